// Builds without nvcc have no cuda backend; KOLO_DEVICE=cuda then says so.
#include "support/device/device.h"

namespace kolo::device {

const DeviceOps* cuda_ops() { return nullptr; }
bool cuda_present() { return false; }

}  // namespace kolo::device
