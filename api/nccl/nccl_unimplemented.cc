// The functions of nccl.h (2.28) that kolo's drop-in does not implement: each is present,
// so that a program linked against NVIDIA's libnccl.so.2 loads, and refuses with
// ncclInvalidUsage and a message for ncclGetLastError saying what is missing.
#include "api/nccl/nccl_internal.h"

namespace {

ncclResult_t unimplemented(const char* function, const char* why) {
  return kolo_nccl::fail(ncclInvalidUsage,
                         kolo_nccl::words(function, " is not implemented by kolo's libnccl.so.2: ", why));
}

}  // namespace

extern "C" {

NCCL_API(ncclResult_t, ncclCommRevoke, ncclComm_t comm, int revokeFlags) {
  return unimplemented("ncclCommRevoke", "kolo has no revocation; use ncclCommAbort");
}

NCCL_API(ncclResult_t, ncclCommShrink, ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
         ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  return unimplemented("ncclCommShrink", "use ncclCommSplit with NCCL_SPLIT_NOCOLOR on the excluded ranks");
}

NCCL_API(ncclResult_t, ncclGroupSimulateEnd, ncclSimInfo_t* simInfo) {
  return unimplemented("ncclGroupSimulateEnd", "kolo's cost model is not exposed through NCCL's API (see kolo-plan)");
}

// Deprecated in nccl.h and void: nothing to refuse with. kolo reads its logging settings
// once, so this does nothing.
NCCL_API(void, ncclResetDebugInit) {}

}  // extern "C"
