// kolo-trace FOLDER: the one-screen diagnosis of a job from its flight-recorder dumps
// (trace_report.h). Exit status: 0 = every file read; 1 = a file skipped, or no dump;
// 2 = usage.
#include <cstdio>
#include <cstring>
#include <string>

#include "tools/kolo_trace/trace_report.h"

int main(int argc, char** argv) {
  if (argc != 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    std::fprintf(argc == 2 ? stdout : stderr,
                 "usage: kolo-trace FOLDER\n"
                 "Reads the flight-recorder dumps (kolo-trace.*.json) that the ranks of a job wrote to FOLDER\n"
                 "(KOLO_TRACE_DIR: on a failure, on SIGUSR1, on kolo_comm_dump) and prints where the ranks\n"
                 "stand: the last call each completed, where they part (who never entered a call, who\n"
                 "mismatched it, who failed in it), the first error, and the ranks that enter calls late.\n");
    return argc == 2 ? 0 : 2;
  }
  const std::string folder = argv[1];
  const kolo::trace::Dumps dumps = kolo::trace::read_folder(folder);
  std::fputs(kolo::trace::report(dumps, folder).c_str(), stdout);
  return dumps.problems.empty() && !dumps.ranks.empty() ? 0 : 1;
}
