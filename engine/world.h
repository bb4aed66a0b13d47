// Where a process learns who it is: kolorun's variables, Open MPI's, Slurm's, or the
// user's own KOLO_RANK/KOLO_SIZE/KOLO_ADDR; and the unique-id path (kolo_get_unique_id).
#pragma once

#include <memory>
#include <string>

#include "engine/communicator.h"
#include "support/status.h"

namespace kolo {

struct WorldInfo {
  int rank = 0;
  int size = 1;
  std::string store_addr;  // host:port; empty = single process, store in this process
  bool host_store = false; // this process must start the store (rank 0 outside kolorun)
  std::string source;      // "kolorun", "KOLO_RANK", "Open MPI", "Slurm" or "single process"
};

Result<WorldInfo> world_from_environment();
// The job's secret from KOLO_SECRET (hex), or empty with a warning when KOLO_INSECURE=1.
Result<std::string> job_secret(int world_size);
// The secret of this world's job: job_secret, except for a Slurm step without KOLO_SECRET:
// an HMAC of the job and step ids keyed by the user's secret file (KOLO_SECRET_FILE,
// $HOME/.kolo/secret by default; made on first use, mode 0600), which every task of the
// step reads from the home directory the nodes share.
Result<std::string> world_secret(const WorldInfo& world);
// Connects to (and when asked, first starts) the store named by the world.
Result<std::shared_ptr<StoreSession>> open_store(const WorldInfo& world, const std::string& secret);

// kolo_init: the world communicator from the environment (KOLO_ELASTIC=join: the next
// epoch of a running elastic job, engine/elastic.h).
Result<std::unique_ptr<Communicator>> init_world();
Result<std::unique_ptr<Communicator>> join_world();

// kolo_get_unique_id / kolo_comm_init_rank. The id holds the store's address, the secret
// and a nonce naming the communicator.
constexpr size_t kUniqueIdBytes = 128;
Status make_unique_id(char (&id)[kUniqueIdBytes]);
Result<std::unique_ptr<Communicator>> init_from_unique_id(const char (&id)[kUniqueIdBytes], int nranks, int rank);

}  // namespace kolo
