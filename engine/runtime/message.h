// The slow path's messages: what each rank tells the coordinator (requests that the
// response cache could not answer, whether it has joined, and for the stall inspector
// every name it waits on), and the coordinator's answer (the operations every rank runs,
// in order). Encoded with wire.h; decoding checks every field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/runtime/request.h"
#include "support/status.h"

namespace kolo::runtime {

struct RequestInfo {
  std::string name;
  Signature sig;
  std::vector<uint64_t> local;  // Request::local
};

struct PendingAge {
  std::string name;
  double age_seconds = 0;
};

struct RankMessage {
  bool joined = false;
  std::vector<RequestInfo> requests;
  std::vector<PendingAge> pending;  // only when the stall inspector asked for it
};

struct Response {
  std::string name;
  Signature sig;
  std::vector<std::vector<uint64_t>> locals;  // per rank: Request::local (allgather, alltoall)
  Code code = Code::kOk;                      // not kOk: every rank fails the request
  std::string message;
};

struct ResponseList {
  std::vector<Response> responses;
  Code shutdown_code = Code::kOk;  // not kOk: every rank stops its runtime with this error
  std::string shutdown_message;
};

std::vector<uint8_t> encode(const RankMessage& message);
Status decode(const uint8_t* data, size_t size, int rank, RankMessage& out);
std::vector<uint8_t> encode(const ResponseList& list);
Status decode(const uint8_t* data, size_t size, ResponseList& out);

}  // namespace kolo::runtime
