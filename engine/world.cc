#include "engine/world.h"

#include <fcntl.h>
#include <sys/stat.h>
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
#include "transport/socket.h"

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

// The rendezvous of a Slurm step, with no address given: rank 0 (task 0, on the step's
// first node under block and cyclic distributions) hosts the store there, at a port from the
// job and step ids (two steps of one job may run at once, on the same nodes).
Status slurm_store_address(WorldInfo& w) {
  const char* nodes = std::getenv("SLURM_STEP_NODELIST");
  if (nodes == nullptr || *nodes == '\0') nodes = std::getenv("SLURM_JOB_NODELIST");
  const char* job_id = std::getenv("SLURM_JOB_ID");
  if (nodes == nullptr || job_id == nullptr) return Status();  // KOLO_ADDR is then required below
  // Unsigned, so that any ids (the environment's: huge, negative, not numbers) wrap into
  // the port range instead of overflowing (env_fuzz found 777777777777777777 * 31).
  const char* step_id = std::getenv("SLURM_STEP_ID");
  const unsigned long long job = std::strtoull(job_id, nullptr, 10);
  const unsigned long long step = step_id != nullptr ? std::strtoull(step_id, nullptr, 10) : 0;
  const std::string first = first_slurm_host(nodes);
  w.store_addr = str_cat(first, ":", 20000 + (job * 31 + step) % 20000);
  if (w.rank == 0) {
    char name[256] = {};
    if (::gethostname(name, sizeof(name) - 1) == 0) {
      std::string here = name;
      auto short_name = [](const std::string& host) { return host.substr(0, host.find('.')); };
      if (short_name(here) != short_name(first)) {
        return error(Code::kInvalidUsage, "rank 0 (Slurm task 0) runs on ", here, ", not on the step's first node ",
                     first, ", where the other ranks look for its store: use srun's block or cyclic distribution, "
                     "or set KOLO_ADDR=host:port of rank 0's node");
      }
    }
  }
  return Status();
}

Status errno_status(const std::string& what) { return error(Code::kSystem, what, ": ", std::strerror(errno)); }

// The user's own secret (KOLO_SECRET_FILE): read, or made with 32 random bytes on first use.
// Like an ssh key it must be the user's and unreadable by others. Made under a name of its
// own, then linked into place: ranks making it at once on several nodes of a shared home
// directory all end up reading the one that was linked first.
Result<std::string> user_secret(const std::string& path) {
  if (path.empty()) return error(Code::kInvalidUsage, "KOLO_SECRET_FILE is empty and HOME is not set: set KOLO_SECRET");
  for (int attempt = 0; attempt < 2; ++attempt) {
    Fd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (fd.valid()) {
      struct stat st {};
      if (::fstat(fd.get(), &st) != 0) return errno_status(str_cat("stat of ", path));
      if (st.st_uid != ::geteuid() || (st.st_mode & 077) != 0) {
        return error(Code::kInvalidUsage, "the secret file ", path,
                     " must be yours and unreadable by others, as an ssh key: run chmod 600 ", path);
      }
      std::string text(4096, '\0');
      const ssize_t got = ::read(fd.get(), text.data(), text.size());
      if (got < 16) return error(Code::kInvalidUsage, "the secret file ", path, " holds under 16 bytes");
      text.resize(static_cast<size_t>(got));
      return text;
    }
    if (errno != ENOENT) return errno_status(str_cat("opening the secret file ", path));
    // Its folders as `mkdir -p` makes them, the user's alone (errors show at the file's open).
    for (size_t slash = path.find('/', 1); slash != std::string::npos; slash = path.find('/', slash + 1)) {
      (void)::mkdir(path.substr(0, slash).c_str(), 0700);
    }
    char host[128] = {};
    (void)::gethostname(host, sizeof(host) - 1);
    const std::string mine = str_cat(path, ".", host, ".", ::getpid());
    unsigned char bytes[32];
    KOLO_TRY(random_bytes(bytes, sizeof(bytes)));
    const std::string hex = to_hex(bytes, sizeof(bytes)) + "\n";
    {
      Fd out(::open(mine.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
      if (!out.valid()) return errno_status(str_cat("making the secret file ", mine));
      if (::write(out.get(), hex.data(), hex.size()) != static_cast<ssize_t>(hex.size()) || ::fsync(out.get()) != 0) {
        ::unlink(mine.c_str());
        return errno_status(str_cat("writing the secret file ", mine));
      }
    }
    const int linked = ::link(mine.c_str(), path.c_str());
    const int link_errno = errno;
    ::unlink(mine.c_str());
    if (linked != 0 && link_errno != EEXIST) {
      errno = link_errno;
      return errno_status(str_cat("linking the secret file ", path));
    }
    if (linked == 0) log_info(Subsys::kBootstrap, "made the secret file ", path, " (Slurm jobs' secrets come from it)");
  }
  return error(Code::kInternal, "the secret file ", path, " vanished while it was read");
}

// KOLO_SIZE set by hand inside a job that a launcher started with another number of ranks:
// some would wait for ranks that never come, or two worlds would meet. Say both figures.
Status launcher_agrees(int size) {
  struct Launcher {
    const char* variable;
    const char* what;
    bool applies;
  };
  const Launcher launchers[] = {
      {"OMPI_COMM_WORLD_SIZE", "Open MPI's", true},
      {"PMI_SIZE", "MPICH's (Hydra)", true},
      {"SLURM_NTASKS", "Slurm's (this step's tasks)", std::getenv("SLURM_STEP_ID") != nullptr},
  };
  for (const Launcher& l : launchers) {
    const char* text = std::getenv(l.variable);
    if (!l.applies || text == nullptr) continue;
    auto theirs = parse_rank_variable(l.variable, text);
    if (theirs.ok() && theirs.value() != size) {
      return error(Code::kInvalidUsage, "KOLO_SIZE=", size, " but ", l.what, " ", l.variable, "=", theirs.value(),
                   ": the launcher started ", theirs.value(), " ranks; unset KOLO_RANK and KOLO_SIZE (kolo reads the "
                   "launcher's) or make them agree");
    }
  }
  return Status();
}

// The rank and size a launcher set, parsed into `w` (errors name the variable).
Status take_rank_and_size(WorldInfo& w, const char* rank_var, const std::string& rank_text, const char* size_var,
                          const std::string& size_text) {
  auto rank = parse_rank_variable(rank_var, rank_text);
  if (!rank.ok()) return rank.status();
  auto size = parse_rank_variable(size_var, size_text);
  if (!size.ok()) return size.status();
  w.rank = rank.value();
  w.size = size.value();
  return Status();
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
    KOLO_TRY(take_rank_and_size(w, "KOLO_RANK", env_string("KOLO_RANK"), "KOLO_SIZE", env_string("KOLO_SIZE")));
    w.source = env_string("KOLO_LAUNCHER") == "kolorun" ? "kolorun" : "KOLO_RANK";
    w.host_store = w.source != "kolorun" && w.rank == 0;
    if (w.source == "KOLO_RANK") KOLO_TRY(launcher_agrees(w.size));
  } else if (std::getenv("OMPI_COMM_WORLD_RANK") && std::getenv("OMPI_COMM_WORLD_SIZE")) {
    KOLO_TRY(take_rank_and_size(w, "OMPI_COMM_WORLD_RANK", std::getenv("OMPI_COMM_WORLD_RANK"), "OMPI_COMM_WORLD_SIZE", std::getenv("OMPI_COMM_WORLD_SIZE")));
    w.source = "Open MPI";
    w.host_store = w.rank == 0;
  } else if (std::getenv("PMI_RANK") && std::getenv("PMI_SIZE")) {
    // MPICH's Hydra (mpiexec; Intel MPI's and MVAPICH's too). Before Slurm: Hydra under
    // Slurm starts its proxies with srun, and its ranks inherit a proxy's SLURM_PROCID.
    KOLO_TRY(take_rank_and_size(w, "PMI_RANK", std::getenv("PMI_RANK"), "PMI_SIZE", std::getenv("PMI_SIZE")));
    w.source = "MPICH (Hydra)";
    w.host_store = w.rank == 0;
  } else if (std::getenv("SLURM_PROCID") && std::getenv("SLURM_NTASKS") && std::getenv("SLURM_STEP_ID")) {
    // A task of a job step (srun). A batch script's own process has SLURM_PROCID 0 and the
    // job's task count too, but no step: it is one process, not rank 0 of a world.
    KOLO_TRY(take_rank_and_size(w, "SLURM_PROCID", std::getenv("SLURM_PROCID"), "SLURM_NTASKS", std::getenv("SLURM_NTASKS")));
    w.source = "Slurm";
    w.host_store = w.rank == 0;
    if (!env_is_set("KOLO_ADDR")) KOLO_TRY(slurm_store_address(w));
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

Result<std::string> world_secret(const WorldInfo& world) {
  if (world.source != "Slurm" || env_is_set("KOLO_SECRET") || env_string("KOLO_INSECURE") == "1" || world.size == 1) {
    return job_secret(world.size);
  }
  // A Slurm step: its tasks share the user's secret file (the nodes share the home
  // directory), and the job and step make it this step's alone.
  std::string path = env_string("KOLO_SECRET_FILE");
  if (path.empty() && std::getenv("HOME") != nullptr && *std::getenv("HOME") != '\0') {
    path = str_cat(std::getenv("HOME"), "/.kolo/secret");
  }
  auto key = user_secret(path);
  if (!key.ok()) return key.status().with_context(str_cat("rank ", world.rank, " (Slurm, no KOLO_SECRET): "));
  const std::string what = str_cat("kolo slurm job ", std::getenv("SLURM_JOB_ID") ? std::getenv("SLURM_JOB_ID") : "",
                                   " step ", std::getenv("SLURM_STEP_ID"));
  const Mac mac = hmac_sha256(key.value(), what.data(), what.size());
  return std::string(mac.begin(), mac.end());
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
  auto secret = world_secret(world.value());
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
