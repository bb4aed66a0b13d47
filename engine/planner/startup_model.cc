#include "engine/planner/startup_model.h"

#include <algorithm>
#include <cmath>

namespace kolo {

StartupEstimate estimate_startup(int hosts, int ranks_per_host, int cores, const StartupParams& p) {
  StartupEstimate e;
  const double n = static_cast<double>(hosts) * ranks_per_host;
  const double log2n = std::log2(std::max(2.0, n));
  const double depth = std::ceil(std::log2(n + 1));
  // Each rank's own work; a host runs its ranks on its cores (more ranks than cores share).
  const double rank_cpu = p.rank_cpu_s + p.rank_cpu_per_log2_s * log2n + p.rank_cpu_per_rank_s * n;
  const double per_core = std::max(1.0, static_cast<double>(ranks_per_host) / std::max(1, cores));
  e.launch_s = rank_cpu * per_core;
  // One thread serves each store: every rank's connections and requests queue at the job's
  // and at its communicator's (the two drain at once, on different hosts across a cluster),
  // its host's ranks' at their host's. On one host they take a share of the cores too.
  const double job_s = n * (p.store_connection_s + p.job_store_requests * p.store_request_s);
  const double comm_s = n * (p.store_connection_s + p.comm_store_requests * p.store_request_s);
  e.host_store_s = ranks_per_host * (p.store_connection_s + p.host_store_requests * p.store_request_s);
  e.store_s = std::max(job_s, comm_s);
  // Two allgathers: up the tree, each level one latency (the bytes grow to all N entries at
  // the top), then all N entries down every level.
  if (hosts > 1) {
    const double all_bytes_s = n * p.entry_bytes / (p.net_gbs * 1e9);
    e.tree_s = 2 * (depth * p.net_latency_s + all_bytes_s + depth * (p.net_latency_s + all_bytes_s));
    // The tree's links (three per rank, made at once) and the first calls' lazy links (a
    // ring's two and a tree's up to three), each a handshake.
    e.links_s = 2 * p.link_setup_s;
  }
  if (hosts == 1) {
    // Everything shares the host's cores: the ranks' work and the store's.
    const double stores_s = job_s + comm_s + e.host_store_s;
    e.total_s = (n * rank_cpu + stores_s) / std::max(1, cores) + e.tree_s + e.links_s;
    e.bound = n * rank_cpu >= stores_s ? "ranks' CPU" : "store";
  } else {
    // The ranks start in parallel across hosts while the store's queue drains: the longer
    // of the two, then the latency of the exchange and the links.
    e.total_s = std::max(e.launch_s, e.store_s) + e.host_store_s + e.tree_s + e.links_s;
    e.bound = e.store_s > e.launch_s ? "store" : "ranks' CPU";
    if (e.tree_s > std::max(e.launch_s, e.store_s)) e.bound = "tree";
  }
  return e;
}

StartupParams fitted_startup_params() {
  StartupParams p;
  // Fitted on the development VM (AMD EPYC, 2 cores, memcpy 48.9 GB/s), one host,
  // bench/results/2026-12-06-startup-scale.md: CPU per rank 11-13 ms from 8 to 256 ranks.
  p.rank_cpu_s = 0.0105;
  p.rank_cpu_per_log2_s = 0.0003;
  p.rank_cpu_per_rank_s = 0;
  // kolo-scale-model --measure-store, 64 clients on the same 2 cores: per connection
  // (accept, nonces, HELLO) and per request, round trips under load (upper bounds).
  p.store_connection_s = 159e-6;
  p.store_request_s = 22e-6;
  p.net_latency_s = 30e-6;  // veth between network namespaces
  p.net_gbs = 2.0;
  p.link_setup_s = 300e-6;
  p.entry_bytes = 60;
  return p;
}

StartupParams cluster_startup_params() {
  StartupParams p = fitted_startup_params();
  // Assumptions (docs/scale.md): the store's thread on a core of its own spends 40 us per
  // authenticated connection (two HMACs, a nonce, accept) and 8 us per request; a lazy
  // link's handshake 100 us; hosts 5 us apart on 400 Gbit/s links; a rank makes about
  // log2 N lazy links' address lookups more than at 256 ranks.
  p.store_connection_s = 40e-6;
  p.store_request_s = 8e-6;
  p.net_latency_s = 5e-6;
  p.net_gbs = 50.0;  // 400 Gbit/s
  p.link_setup_s = 100e-6;
  return p;
}

}  // namespace kolo
