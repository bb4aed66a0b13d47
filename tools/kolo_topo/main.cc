// kolo-topo: shows the machine as kolo sees it. By default a summary and the GPU/NIC
// matrix of this host (or of --file); --json, --dot and --png write it out.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>

#include "support/status.h"
#include "topology/discover.h"
#include "topology/json_format.h"
#include "topology/render.h"

namespace {

const char* kUsage =
    "usage: kolo-topo [--file PATH] [--json PATH|-] [--dot PATH] [--png PATH] [--quiet]\n"
    "  --file PATH  read a kolo JSON or NCCL topology XML file instead of discovering\n"
    "               (KOLO_TOPO_FILE does the same)\n"
    "  --json PATH  write the topology as kolo JSON ('-' = standard output)\n"
    "  --dot PATH   write Graphviz DOT\n"
    "  --png PATH   write a PNG with Graphviz's dot (skipped with a note when dot is missing)\n"
    "  --quiet      no summary or matrix\n";

bool write_file(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::cout << text;
    return true;
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) std::cerr << "kolo-topo: cannot write " << path << "\n";
  return static_cast<bool>(out);
}

bool have_dot() { return std::system("command -v dot >/dev/null 2>&1") == 0; }

}  // namespace

int main(int argc, char** argv) {
  std::string file, json, dot, png;
  bool quiet = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= argc) {
        std::cerr << "kolo-topo: " << arg << " needs a value\n" << kUsage;
        std::exit(2);
      }
      *out = argv[++i];
    };
    if (arg == "--file") value(&file);
    else if (arg == "--json") value(&json);
    else if (arg == "--dot") value(&dot);
    else if (arg == "--png") value(&png);
    else if (arg == "--quiet") quiet = true;
    else if (arg == "-h" || arg == "--help") { std::cout << kUsage; return 0; }
    else { std::cerr << "kolo-topo: unknown argument '" << arg << "'\n" << kUsage; return 2; }
  }
  kolo::Result<kolo::HostTopology> topo = file.empty() ? kolo::host_topology() : kolo::load_topology_file(file);
  if (!topo.ok()) {
    std::cerr << "kolo-topo: " << topo.status().message() << "\n";
    return 1;
  }
  bool ok = true;
  if (!quiet && json != "-") std::cout << kolo::topology_summary(topo.value()) << "\n" << kolo::topology_matrix(topo.value());
  if (!json.empty()) ok &= write_file(json, kolo::topology_to_json(topo.value()));
  std::string dot_text = kolo::topology_dot(topo.value());
  if (!dot.empty()) ok &= write_file(dot, dot_text);
  if (!png.empty()) {
    if (!have_dot()) {
      std::cerr << "kolo-topo: Graphviz 'dot' is not installed; no PNG written (apt-get install graphviz)\n";
    } else {
      // dot reads the graph on stdin; the path goes through argv, never through a shell.
      char tmpl[] = "/tmp/kolo-topo-XXXXXX";
      int fd = mkstemp(tmpl);
      if (fd < 0) return 1;
      ssize_t wrote = ::write(fd, dot_text.data(), dot_text.size());
      ::close(fd);
      pid_t pid = fork();
      if (pid == 0) {
        execlp("dot", "dot", "-Tpng", "-o", png.c_str(), tmpl, static_cast<char*>(nullptr));
        _exit(127);
      }
      int status = 0;
      waitpid(pid, &status, 0);
      unlink(tmpl);
      if (wrote != static_cast<ssize_t>(dot_text.size()) || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        std::cerr << "kolo-topo: dot failed to write " << png << "\n";
        ok = false;
      }
    }
  }
  return ok ? 0 : 1;
}
