// A rank for secret_exposure_test.sh: joins the world (kolorun, or KOLO_RANK/SIZE/ADDR),
// runs an allreduce, then checks from inside what an observer on the host could see:
//   - the job secret in no process's command line (/proc/*/cmdline);
//   - no listening TCP socket left in this rank after start-up;
//   - with --store-loopback: the store (KOLO_ADDR's port) listens on 127.0.0.1 only.
// Writes its KOLO_SECRET to $SEC_DIR/secret.<rank> so that the script can search the logs
// for it. Exit 0 when every check passed; each failure is one line on stderr.
#include <dirent.h>
#include <kolo/kolo.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

int failures = 0;

void fail(const std::string& what) {
  std::fprintf(stderr, "FAIL: %s\n", what.c_str());
  ++failures;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Socket inodes this process holds.
std::set<std::string> my_socket_inodes() {
  std::set<std::string> inodes;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return inodes;
  while (dirent* entry = ::readdir(dir)) {
    char target[128] = {};
    std::string link = std::string("/proc/self/fd/") + entry->d_name;
    if (::readlink(link.c_str(), target, sizeof(target) - 1) <= 0) continue;
    std::string t = target;
    if (t.rfind("socket:[", 0) == 0) inodes.insert(t.substr(8, t.size() - 9));
  }
  ::closedir(dir);
  return inodes;
}

// LISTEN rows of /proc/net/tcp{,6}: (local address hex, port, inode).
struct Listener {
  std::string address;
  unsigned port;
  std::string inode;
};

std::vector<Listener> listeners() {
  std::vector<Listener> found;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string slot, local, remote, state, queues, timer, retr, uid, timeout, inode;
      f >> slot >> local >> remote >> state >> queues >> timer >> retr >> uid >> timeout >> inode;
      size_t colon = local.rfind(':');
      if (state != "0A" || colon == std::string::npos) continue;
      found.push_back({local.substr(0, colon), static_cast<unsigned>(std::stoul(local.substr(colon + 1), nullptr, 16)),
                       inode});
    }
  }
  return found;
}

void check_command_lines(const std::string& secret) {
  DIR* dir = ::opendir("/proc");
  if (dir == nullptr) return fail("cannot read /proc");
  int seen = 0;
  while (dirent* entry = ::readdir(dir)) {
    if (std::strspn(entry->d_name, "0123456789") != std::strlen(entry->d_name)) continue;
    std::string cmdline = read_all(std::string("/proc/") + entry->d_name + "/cmdline");
    ++seen;
    if (cmdline.find(secret) != std::string::npos) fail(std::string("the secret is on the command line of pid ") + entry->d_name);
  }
  ::closedir(dir);
  if (seen < 3) fail("saw fewer than 3 processes in /proc");
}

}  // namespace

int main(int argc, char** argv) {
  bool store_loopback = argc > 1 && std::strcmp(argv[1], "--store-loopback") == 0;
  kolo_comm_t comm = nullptr;
  if (kolo_init(&comm) != KOLO_SUCCESS) {
    std::fprintf(stderr, "kolo_init: %s\n", kolo_last_error());
    return 3;
  }
  int rank = kolo_comm_rank(comm), size = kolo_comm_size(comm);
  float value = static_cast<float>(rank + 1);
  if (kolo_allreduce(&value, &value, 1, KOLO_FLOAT32, KOLO_SUM, comm, nullptr) != KOLO_SUCCESS) {
    std::fprintf(stderr, "allreduce: %s\n", kolo_last_error());
    return 4;
  }
  if (value != static_cast<float>(size * (size + 1) / 2)) fail("allreduce gave a wrong sum");

  const char* secret = std::getenv("KOLO_SECRET");
  if (secret == nullptr || std::strlen(secret) < 32) {
    fail("no KOLO_SECRET in this rank's environment");
  } else {
    if (const char* dir = std::getenv("SEC_DIR")) {
      std::ofstream(std::string(dir) + "/secret." + std::to_string(rank)) << secret;
    }
    check_command_lines(secret);
  }

  const char* addr = std::getenv("KOLO_ADDR");
  std::string text = addr ? addr : "";
  unsigned port = text.rfind(':') == std::string::npos ? 0 : std::stoul(text.substr(text.rfind(':') + 1));
  std::set<std::string> mine = my_socket_inodes();
  int own_stores = 0;
  // Lazy TCP links (KOLO_LAZY_CONNECT=1, the default): each rank listens for its peers'
  // links while the communicator lives, on the chosen address (127.0.0.1 here), never on
  // every interface; the handshake proves the secret.
  const char* lazy_setting = std::getenv("KOLO_LAZY_CONNECT");  // env-table: exempt (a test program)
  const bool lazy = lazy_setting == nullptr || std::strcmp(lazy_setting, "0") != 0;
  int link_listeners = 0;
  for (const Listener& l : listeners()) {
    // Rank 0 hosts the store itself outside kolorun: that one listener is expected. Rank 0
    // also hosts the communicator's own store (engine/comm_store.h) while the communicator
    // lives: one more, on the address that reaches the job's store (127.0.0.1 here).
    if (!mine.count(l.inode) || l.port == port) continue;
    if (rank == 0 && own_stores++ == 0) {
      if (store_loopback && l.address != "0100007F") {
        fail("rank 0's communicator store listens on " + l.address + ", not 127.0.0.1 alone");
      }
      continue;
    }
    if (lazy && link_listeners++ == 0) {
      if (store_loopback && l.address != "0100007F") {
        fail("rank " + std::to_string(rank) + "'s tcp link listener is on " + l.address + ", not 127.0.0.1 alone");
      }
      continue;
    }
    fail("rank " + std::to_string(rank) + " still listens on port " + std::to_string(l.port));
  }
  if (store_loopback) {
    int found = 0;
    for (const Listener& l : listeners()) {
      if (l.port != port) continue;
      ++found;
      if (l.address != "0100007F") fail("the store listens on " + l.address + ", not 127.0.0.1 alone");
    }
    // kolorun's store lives as long as the job; a store rank 0 hosted for KOLO_ADDR closes
    // once every communicator made from it is through its init (engine/comm_store.h).
    const char* launcher = std::getenv("KOLO_LAUNCHER");
    if (found == 0 && launcher != nullptr && std::strcmp(launcher, "kolorun") == 0) {
      fail("no store listening at KOLO_ADDR=" + text);
    }
  }
  // Everyone checks before anyone leaves, so the store is still up for the last check.
  if (kolo_barrier(comm) != KOLO_SUCCESS) fail(std::string("barrier: ") + kolo_last_error());
  kolo_comm_destroy(comm);
  // With the communicator gone, its rank 0 listens no more (the job's store aside).
  mine = my_socket_inodes();
  for (const Listener& l : listeners()) {
    if (mine.count(l.inode) && l.port != port) {
      fail("rank " + std::to_string(rank) + " still listens on port " + std::to_string(l.port) +
           " after kolo_comm_destroy");
    }
  }
  if (failures == 0) std::printf("rank %d: secret probe passed\n", rank);
  return failures == 0 ? 0 : 1;
}
