#include "engine/world.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "engine/elastic.h"
#include "support/crypto.h"
#include "support/env.h"
#include "support/log.h"

namespace kolo {
namespace {

// `text`: the value of `name`, KOLO_RANK/KOLO_SIZE (read through env_string) or a launcher's.
Result<int> parse_rank_variable(const char* name, const std::string& text) {
  char* end = nullptr;
  long value = std::strtol(text.c_str(), &end, 10);
  if (end == text.c_str() || *end != '\0' || value < 0 || value > (1 << 24)) {
    return error(Code::kInvalidArgument, name, "='", text, "' is not a valid rank or size");
  }
  return static_cast<int>(value);
}

// First host of a Slurm node list: "node[03-05,7],gpu1" -> "node03".
std::string first_slurm_host(const std::string& list) {
  size_t end = list.find_first_of(",[");
  std::string host = list.substr(0, end);
  if (end != std::string::npos && list[end] == '[') {
    size_t stop = list.find_first_of("-,]", end + 1);
    host += list.substr(end + 1, stop - end - 1);
  }
  return host;
}

Status rank_in_range(const WorldInfo& w) {
  if (w.size < 1) return error(Code::kInvalidArgument, "world size ", w.size, " from ", w.source, " must be >= 1");
  if (w.rank >= w.size) {
    return error(Code::kInvalidArgument, "rank ", w.rank, " from ", w.source, " is not below the size ", w.size);
  }
  return Status();
}

std::string reachable_host() {
  std::string ifname = env_string("KOLO_SOCKET_IFNAME");
  if (!ifname.empty()) {
    Result<std::string> ip = interface_address(ifname);
    if (ip.ok()) return ip.value();
  }
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) == 0 && name[0] != '\0') {
    Result<Fd> probe = listen_tcp(name, 0);  // resolvable here, so most likely by peers too
    if (probe.ok()) return name;
  }
  return "127.0.0.1";
}

struct UniqueId {
  uint32_t magic;
  uint16_t port;
  uint8_t secret[32];
  uint8_t nonce[16];
  char host[kUniqueIdBytes - 4 - 2 - 32 - 16];
};
static_assert(sizeof(UniqueId) <= kUniqueIdBytes);
constexpr uint32_t kUniqueIdMagic = 0x6b6f6c31;  // "kol1"

// Stores started by kolo_get_unique_id in this process, so that the rank that made the
// id can join without a second store. Kept for the life of the process, never destroyed as
// statics themselves; their server threads end at exit in the store's own exit handler
// (store_server.cc), before OpenSSL's and the function-local statics they use.
std::mutex& g_hosted_mutex = *new std::mutex;
std::map<std::string, std::shared_ptr<StoreSession>>& g_hosted = *new std::map<std::string, std::shared_ptr<StoreSession>>;

std::atomic<int> g_world_count{0};

}  // namespace

Result<WorldInfo> world_from_environment() {
  WorldInfo w;
  if (env_is_set("KOLO_RANK") && env_is_set("KOLO_SIZE")) {
    auto rank = parse_rank_variable("KOLO_RANK", env_string("KOLO_RANK"));
    auto size = parse_rank_variable("KOLO_SIZE", env_string("KOLO_SIZE"));
    if (!rank.ok()) return rank.status();
    if (!size.ok()) return size.status();
    w.rank = rank.value();
    w.size = size.value();
    w.source = env_string("KOLO_LAUNCHER") == "kolorun" ? "kolorun" : "KOLO_RANK";
    w.host_store = w.source != "kolorun" && w.rank == 0;
  } else if (std::getenv("OMPI_COMM_WORLD_RANK") && std::getenv("OMPI_COMM_WORLD_SIZE")) {
    auto rank = parse_rank_variable("OMPI_COMM_WORLD_RANK", std::getenv("OMPI_COMM_WORLD_RANK"));
    auto size = parse_rank_variable("OMPI_COMM_WORLD_SIZE", std::getenv("OMPI_COMM_WORLD_SIZE"));
    if (!rank.ok()) return rank.status();
    if (!size.ok()) return size.status();
    w.rank = rank.value();
    w.size = size.value();
    w.source = "Open MPI";
    w.host_store = w.rank == 0;
  } else if (std::getenv("SLURM_PROCID") && std::getenv("SLURM_NTASKS")) {
    auto rank = parse_rank_variable("SLURM_PROCID", std::getenv("SLURM_PROCID"));
    auto size = parse_rank_variable("SLURM_NTASKS", std::getenv("SLURM_NTASKS"));
    if (!rank.ok()) return rank.status();
    if (!size.ok()) return size.status();
    w.rank = rank.value();
    w.size = size.value();
    w.source = "Slurm";
    w.host_store = w.rank == 0;
    if (!env_is_set("KOLO_ADDR") && std::getenv("SLURM_JOB_NODELIST") && std::getenv("SLURM_JOB_ID")) {
      long job = std::strtol(std::getenv("SLURM_JOB_ID"), nullptr, 10);
      w.store_addr = str_cat(first_slurm_host(std::getenv("SLURM_JOB_NODELIST")), ":", 20000 + job % 20000);
    }
  } else {
    w.source = "single process";
    return w;
  }
  KOLO_TRY(rank_in_range(w));
  // Nobody to meet: a private store, no port, no secret needed. Unless the job is elastic
  // (KOLO_ELASTIC=1 and a store given): workers may join the one rank later.
  const bool elastic_one = env_string("KOLO_ELASTIC") == "1" && env_is_set("KOLO_ADDR");
  if (w.size == 1 && !elastic_one) {
    w.store_addr.clear();
    w.host_store = false;
    return w;
  }
  if (env_is_set("KOLO_ADDR")) w.store_addr = env_string("KOLO_ADDR");
  if (w.store_addr.empty() && w.size > 1) {
    return error(Code::kInvalidUsage, "rank ", w.rank, " of ", w.size, " (from ", w.source,
                 "): KOLO_ADDR is not set; set it to host:port of rank 0 in every rank's environment");
  }
  return w;
}

Result<std::string> job_secret(int world_size) {
  if (env_is_set("KOLO_SECRET")) {
    Result<std::string> raw = from_hex(env_string("KOLO_SECRET"));
    if (!raw.ok() || raw.value().size() < 16) {
      return error(Code::kInvalidArgument, "KOLO_SECRET must be at least 32 hex digits (e.g. `openssl rand -hex 32`)");
    }
    return raw.take();
  }
  if (env_string("KOLO_INSECURE") == "1" || world_size == 1) {
    if (world_size > 1) log_warn(Subsys::kBootstrap, "KOLO_INSECURE=1: the rendezvous store is unauthenticated");
    return std::string();
  }
  return error(Code::kInvalidUsage,
               "KOLO_SECRET is not set. Outside kolorun every rank needs the same secret in its environment: "
               "export KOLO_SECRET=$(openssl rand -hex 32) before launching (or KOLO_INSECURE=1 on a trusted network)");
}

Result<std::shared_ptr<StoreSession>> open_store(const WorldInfo& world, const std::string& secret) {
  auto session = std::make_shared<StoreSession>();
  session->secret = secret;
  Deadline deadline(env_timeout_seconds());
  HostPort target{"127.0.0.1", 0};
  if (world.store_addr.empty()) {  // one process: a private store on loopback, own secret
    session->secret.resize(32);
    KOLO_TRY(random_bytes(session->secret.data(), session->secret.size()));
    auto server = StoreServer::start("127.0.0.1", 0, session->secret);
    if (!server.ok()) return server.status();
    session->server = server.take();
    target.port = session->server->port();
  } else {
    auto parsed = parse_host_port(world.store_addr);
    if (!parsed.ok()) return parsed.status().with_context("KOLO_ADDR: ");
    target = parsed.value();
    if (world.host_store) {
      auto server = StoreServer::start(listen_host_for(target.host), target.port, secret);
      if (!server.ok()) {
        return server.status().with_context(str_cat("rank 0 cannot host the store at ", world.store_addr, ": "));
      }
      session->server = server.take();
    }
  }
  auto client = StoreClient::connect(target, session->secret, deadline);
  if (!client.ok()) {
    return client.status().with_context(str_cat("rank ", world.rank, ": "));
  }
  session->client = client.take();
  return session;
}

Result<std::unique_ptr<Communicator>> init_world() {
  KOLO_TRY(env_check_all());  // every KOLO_* value, before any is used
  const std::string elastic = env_string("KOLO_ELASTIC");
  if (elastic == "join") return join_world();
  auto world = world_from_environment();
  if (!world.ok()) return world.status();
  log_set_rank(world.value().rank);
  auto secret = job_secret(world.value().size);
  if (!secret.ok()) return secret.status();
  auto store = open_store(world.value(), secret.value());
  if (!store.ok()) return store.status();
  log_info(Subsys::kInit, "rank ", world.value().rank, " of ", world.value().size, " from ", world.value().source,
           ", store ", world.value().store_addr.empty() ? "in-process" : world.value().store_addr);
  CommIdentity id{str_cat("world", g_world_count.fetch_add(1)), world.value().rank, world.value().size};
  // Elastic: the job's store stays open for rebuilds (engine/elastic.h), kept before the
  // world is made so that its ranks' live keys go there.
  const bool elastic_world = elastic == "1" && !elastic_job_store();
  if (elastic_world) keep_elastic_job_store(store.value());
  auto comm = Communicator::create(store.take(), id);
  if (comm.ok() && elastic_world) {
    Lineage lineage = comm.value()->lineage();
    lineage.elastic_world = true;
    comm.value()->set_lineage(std::move(lineage));
  }
  return comm;
}

// KOLO_ELASTIC=join: a worker started into a running elastic job (kolorun --max-np), with
// the job's store and secret but no rank: it is let in at the job's next rebuild.
Result<std::unique_ptr<Communicator>> join_world() {
  if (!env_is_set("KOLO_ADDR")) {
    return error(Code::kInvalidUsage, "KOLO_ELASTIC=join needs KOLO_ADDR: the running job's store (kolorun sets it)");
  }
  auto secret = job_secret(2);
  if (!secret.ok()) return secret.status();
  WorldInfo job;
  job.store_addr = env_string("KOLO_ADDR");
  job.source = "elastic join";
  auto store = open_store(job, secret.value());
  if (!store.ok()) return store.status();
  keep_elastic_job_store(store.value());
  return join_elastic_world(store.take());
}

Status make_unique_id(char (&out)[kUniqueIdBytes]) {
  UniqueId id{};
  id.magic = kUniqueIdMagic;
  KOLO_TRY(random_bytes(id.secret, sizeof(id.secret)));
  KOLO_TRY(random_bytes(id.nonce, sizeof(id.nonce)));
  std::string secret(reinterpret_cast<char*>(id.secret), sizeof(id.secret));
  std::string host = reachable_host();
  if (host.size() >= sizeof(id.host)) host = "127.0.0.1";
  auto server = StoreServer::start(listen_host_for(host), 0, secret);
  if (!server.ok()) return server.status();
  id.port = server.value()->port();
  std::memcpy(id.host, host.c_str(), host.size() + 1);
  auto session = std::make_shared<StoreSession>();
  session->server = server.take();
  session->secret = secret;
  {
    std::lock_guard<std::mutex> lock(g_hosted_mutex);
    g_hosted[to_hex(id.nonce, sizeof(id.nonce))] = session;
  }
  std::memset(out, 0, kUniqueIdBytes);
  std::memcpy(out, &id, sizeof(id));
  return Status();
}

Result<std::unique_ptr<Communicator>> init_from_unique_id(const char (&raw)[kUniqueIdBytes], int nranks, int rank) {
  KOLO_TRY(env_check_all());  // every KOLO_* value, before any is used
  UniqueId id;
  std::memcpy(&id, raw, sizeof(id));
  if (id.magic != kUniqueIdMagic || id.port == 0 || std::memchr(id.host, '\0', sizeof(id.host)) == nullptr) {
    return error(Code::kInvalidArgument, "id is not a kolo_unique_id from kolo_get_unique_id (bad magic or address)");
  }
  log_set_rank(rank);
  const std::string nonce = to_hex(id.nonce, sizeof(id.nonce));
  // The secret comes from this id alone: a store this process hosts (g_hosted, alive for
  // the life of the process) is shared by every rank that joins from this process, on
  // any thread, so nothing here writes to it.
  const std::string secret(reinterpret_cast<char*>(id.secret), sizeof(id.secret));
  auto client = StoreClient::connect(HostPort{id.host, id.port}, secret, Deadline(env_timeout_seconds()));
  if (!client.ok()) return client.status().with_context(str_cat("rank ", rank, " joining via unique id: "));
  auto own = std::make_shared<StoreSession>();
  own->secret = secret;
  own->client = client.take();
  return Communicator::create(own, CommIdentity{str_cat("uid/", nonce), rank, nranks});
}

}  // namespace kolo
