// A communicator's start-up, modelled phase by phase (docs/scale.md): the figures
// bench/scale/startup.sh measures on one machine, and a projection to clusters of many
// hosts. The phases follow communicator.cc: the launcher starts the ranks; each connects to
// the job's store and to its rank 0's (one server thread each: connections and requests
// queue there); the start-up exchange runs over a binary tree of links (bootstrap_net.h:
// two allgathers, 2 log2 N steps each); shared memory is set up per host; the first calls
// make their links when they first need them (ring and tree neighbours).
#pragma once

#include <string>

namespace kolo {

struct StartupParams {
  // A rank's own CPU to start (exec, loading libkolo, kolo_init's own work, its share of
  // the store and tree work), fitted as a + b log2 N + c N from measured CPU per rank.
  double rank_cpu_s = 0;
  double rank_cpu_per_log2_s = 0;
  double rank_cpu_per_rank_s = 0;  // decoding every rank's entries, the host map
  // A store server's thread: per authenticated connection and per request (measured with
  // kolo-scale-model --measure-store on the machine of the figures). Each rank connects to
  // three, each with its own thread: the job's (kolorun's; one lookup), its communicator's
  // (rank 0's: live key, address, the tree neighbours' addresses) and its host's (the host's
  // first rank's: the shared-memory set-up). Requests per rank counted in the code.
  double store_connection_s = 0;
  double store_request_s = 0;
  double job_store_requests = 1;
  double comm_store_requests = 4;
  double host_store_requests = 7;
  // Between hosts: one message's latency, the link's bandwidth, a link's handshake (TCP
  // connect and the challenge-response: two round trips and two HMACs).
  double net_latency_s = 0;
  double net_gbs = 0;
  double link_setup_s = 0;
  double entry_bytes = 0;  // one rank's entry in the exchange (host identity, transports)
};

struct StartupEstimate {
  double launch_s = 0;   // the ranks' own CPU, on their host's cores
  double store_s = 0;    // the longest store queue: the job's or the communicator's
  double host_store_s = 0;  // a host's store's queue (its ranks' shared-memory set-up)
  double tree_s = 0;     // the exchange's steps and bytes
  double links_s = 0;    // the tree's links and the first calls' lazy links
  double total_s = 0;
  std::string bound;     // what takes the most: "ranks' CPU", "store", "tree"
};

// `hosts` hosts of `ranks_per_host` ranks, each host with `cores` cores.
StartupEstimate estimate_startup(int hosts, int ranks_per_host, int cores, const StartupParams& p);

// The figures of the machine of bench/results/2026-12-06-startup-scale.md (fitted there).
StartupParams fitted_startup_params();
// The same with a cluster's network: 400 Gbit/s links, 5 us between hosts.
StartupParams cluster_startup_params();

}  // namespace kolo
