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

NCCL_API(ncclResult_t, ncclGroupSimulateEnd, ncclSimInfo_t* simInfo) {
  return unimplemented("ncclGroupSimulateEnd", "kolo's cost model is not exposed through NCCL's API (see kolo-plan)");
}

// NCCL 2.28's device API (nccl_device/*.h): the host calls that set a device communicator
// up. kolo has no device-side API; PyTorch's libtorch_cuda imports ncclDevCommCreate and
// ncclDevCommDestroy (it loads only if they are there), so all are present and refuse.
// Types the drop-in does not declare travel as opaque pointers (the same C ABI); a team
// is nccl_device/core.h's struct of three ints, by value.
struct ncclTeamAbi {
  int nRanks, rank, stride;
};

NCCL_API(ncclResult_t, ncclDevCommCreate, ncclComm_t comm, const void* requirements, void* outDevComm) {
  return unimplemented("ncclDevCommCreate", "kolo has no device-side API (NCCL 2.28's nccl_device.h)");
}

NCCL_API(ncclResult_t, ncclDevCommDestroy, ncclComm_t comm, const void* devComm) {
  return unimplemented("ncclDevCommDestroy", "kolo has no device-side API; no device communicator was made");
}

NCCL_API(ncclResult_t, ncclGinBarrierCreateRequirement, ncclComm_t comm, ncclTeamAbi team, int nBarriers,
         void* outHandle, void* outRequirements) {
  return unimplemented("ncclGinBarrierCreateRequirement", "kolo has no device-side API");
}

NCCL_API(ncclResult_t, ncclLsaBarrierCreateRequirement, ncclTeamAbi team, int nBarriers, void* outHandle,
         void* outRequirements) {
  return unimplemented("ncclLsaBarrierCreateRequirement", "kolo has no device-side API");
}

NCCL_API(ncclResult_t, ncclLLA2ACreateRequirement, int nBlocks, int nSlots, void* outHandle, void* outRequirements) {
  return unimplemented("ncclLLA2ACreateRequirement", "kolo has no device-side API");
}

// The calls that return a number or a team cannot return an error code: they say why in
// ncclGetLastError and return nothing usable (-1, an empty team).
NCCL_API(int, ncclLLA2ACalcSlots, int maxElts, int maxEltSize) {
  (void)unimplemented("ncclLLA2ACalcSlots", "kolo has no device-side API");
  return -1;
}

NCCL_API(ncclTeamAbi, ncclTeamWorld, ncclComm_t comm) {
  (void)unimplemented("ncclTeamWorld", "kolo has no device-side API");
  return ncclTeamAbi{0, -1, 0};
}

NCCL_API(ncclTeamAbi, ncclTeamLsa, ncclComm_t comm) {
  (void)unimplemented("ncclTeamLsa", "kolo has no device-side API");
  return ncclTeamAbi{0, -1, 0};
}

NCCL_API(ncclTeamAbi, ncclTeamRail, ncclComm_t comm) {
  (void)unimplemented("ncclTeamRail", "kolo has no device-side API");
  return ncclTeamAbi{0, -1, 0};
}

NCCL_API(int, ncclTeamRankToWorld, ncclComm_t comm, ncclTeamAbi team, int rank) {
  (void)unimplemented("ncclTeamRankToWorld", "kolo has no device-side API");
  return -1;
}

NCCL_API(int, ncclTeamRankToLsa, ncclComm_t comm, ncclTeamAbi team, int rank) {
  (void)unimplemented("ncclTeamRankToLsa", "kolo has no device-side API");
  return -1;
}

// NVIDIA's library exports it (not in its headers): its debug settings read again. kolo
// reads its logging settings once, so this does nothing, as ncclResetDebugInit.
__attribute__((visibility("default"))) void ncclResetDebugInitInternal() {}

// Deprecated in nccl.h and void: nothing to refuse with. kolo reads its logging settings
// once, so this does nothing.
NCCL_API(void, ncclResetDebugInit) {}

}  // extern "C"
