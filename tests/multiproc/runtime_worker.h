// Helpers the runtime worker's scenarios share (runtime_worker.cc and
// runtime_device_scenarios.cc): the named tensors of the random-order scenarios, their
// expected values and checks.
#pragma once

#include <string>
#include <vector>

#include "engine/runtime/runtime.h"
#include "kolo/kolo.h"

namespace runtime_worker {

bool contains(const std::string& text, const std::string& part);
kolo::runtime::RuntimeStats stats(kolo_comm_t comm);

// One named tensor of the random-order scenarios; its kind and shape follow from its index.
struct Tensor {
  std::string name;
  int kind = 0;  // 0-5 allreduce (dtype and op vary), 6 broadcast, 7 allgather, 8 alltoall, 9 reduce_scatter
  kolo_dtype_t dtype = KOLO_FLOAT32;
  kolo_op_t op = KOLO_SUM;
  size_t count = 0;
  std::vector<char> send, recv;
  std::vector<char> out;  // allocated output (allgather, alltoall)
  kolo_request_t request = nullptr;
};

// Fills tensor t of `step` on `rank` of p ranks; check() compares its result with the
// values every rank contributed.
void prepare(Tensor& x, int t, int step, int rank, int p);
void check(Tensor& x, int t, int step, int rank, int p);

// Scenarios in runtime_device_scenarios.cc.
void scenario_device_random_order(kolo_comm_t comm);
void scenario_wire(kolo_comm_t comm);
void scenario_adasum(kolo_comm_t comm);

}  // namespace runtime_worker
