// Compile-time check of the drop-in's copy of NCCL's types (api/nccl/nccl_abi.h) against
// NVIDIA's nccl.h: the same values, sizes and layouts, or this file does not compile.
#include <nccl.h>

#include <climits>
#include <cstddef>

namespace ours {
#define KOLO_NCCL_ABI_TYPES_ONLY
#include "api/nccl/nccl_abi.h"
}  // namespace ours

static_assert(KOLO_NCCL_VERSION_CODE == NCCL_VERSION_CODE, "the drop-in implements this nccl.h's version");
static_assert(sizeof(ours::ncclUniqueId) == sizeof(ncclUniqueId));
static_assert(sizeof(ours::cudaStream_t) == sizeof(cudaStream_t));
static_assert(sizeof(ours::ncclRedOp_t) == sizeof(ncclRedOp_t));
static_assert(sizeof(ours::ncclDataType_t) == sizeof(ncclDataType_t));
static_assert(sizeof(ours::ncclResult_t) == sizeof(ncclResult_t));

#define SAME(name) static_assert(static_cast<long>(ours::name) == static_cast<long>(name), #name)
SAME(ncclSuccess);
SAME(ncclUnhandledCudaError);
SAME(ncclSystemError);
SAME(ncclInternalError);
SAME(ncclInvalidArgument);
SAME(ncclInvalidUsage);
SAME(ncclRemoteError);
SAME(ncclInProgress);
SAME(ncclNumResults);
SAME(ncclSum);
SAME(ncclProd);
SAME(ncclMax);
SAME(ncclMin);
SAME(ncclAvg);
SAME(ncclNumOps);
SAME(ncclMaxRedOp);
SAME(ncclInt8);
SAME(ncclChar);
SAME(ncclUint8);
SAME(ncclInt32);
SAME(ncclInt);
SAME(ncclUint32);
SAME(ncclInt64);
SAME(ncclUint64);
SAME(ncclFloat16);
SAME(ncclHalf);
SAME(ncclFloat32);
SAME(ncclFloat);
SAME(ncclFloat64);
SAME(ncclDouble);
SAME(ncclBfloat16);
SAME(ncclFloat8e4m3);
SAME(ncclFloat8e5m2);
SAME(ncclNumTypes);
SAME(ncclScalarDevice);
SAME(ncclScalarHostImmediate);
#undef SAME

// ncclConfig_t and ncclSimInfo_t, field by field.
static_assert(sizeof(ours::ncclConfig_t) == sizeof(ncclConfig_t));
#define FIELD(type, f) static_assert(offsetof(ours::type, f) == offsetof(type, f), #type "::" #f)
FIELD(ncclConfig_t, size);
FIELD(ncclConfig_t, magic);
FIELD(ncclConfig_t, version);
FIELD(ncclConfig_t, blocking);
FIELD(ncclConfig_t, cgaClusterSize);
FIELD(ncclConfig_t, minCTAs);
FIELD(ncclConfig_t, maxCTAs);
FIELD(ncclConfig_t, netName);
FIELD(ncclConfig_t, splitShare);
FIELD(ncclConfig_t, trafficClass);
FIELD(ncclConfig_t, commName);
FIELD(ncclConfig_t, collnetEnable);
FIELD(ncclConfig_t, CTAPolicy);
FIELD(ncclConfig_t, shrinkShare);
FIELD(ncclConfig_t, nvlsCTAs);
FIELD(ncclConfig_t, nChannelsPerNetPeer);
FIELD(ncclConfig_t, nvlinkCentricSched);
static_assert(sizeof(ours::ncclSimInfo_t) == sizeof(ncclSimInfo_t));
FIELD(ncclSimInfo_t, estimatedTime);
#undef FIELD

// The magic NCCL_CONFIG_INITIALIZER writes, which the drop-in checks.
static_assert(KOLO_NCCL_CONFIG_MAGIC == ncclConfig_t(NCCL_CONFIG_INITIALIZER).magic);
