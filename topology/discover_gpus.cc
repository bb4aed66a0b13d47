// GPUs through the CUDA driver API and NVLinks through NVML, both opened with dlopen so that
// kolo builds without CUDA headers and runs where the driver is missing.
// GPUs come from the driver (libcuda.so.1), not the runtime: kolo already links the CUDA
// runtime statically (support/device/cuda_device.cc), and dlopen'ing libcudart would load a
// second runtime into the process, whose calls create and attach state of their own. The
// driver calls used here (cuInit, cuDeviceGet*, cuDeviceGetP2PAttribute) create no context,
// and libcuda.so.1 is the library cuda_device.cc opens: one loaded instance, refcounted.
#include <dlfcn.h>

#include <cctype>
#include <map>

#include "support/log.h"
#include "topology/bandwidth.h"
#include "topology/discover_sources.h"

namespace kolo::discovery {
namespace {

void* open_first(std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL)) return h;
  }
  return nullptr;
}

template <typename F>
F sym(void* lib, const char* name) {
  return reinterpret_cast<F>(dlsym(lib, name));
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The driver ABI, declared here so that this file compiles without cuda.h (values checked
// against CUDA 13.0's cuda.h; the driver ABI is stable).
using CuResult = int;  // CUresult; CUDA_SUCCESS is 0
using CuDevice = int;  // CUdevice
constexpr CuResult kCudaSuccess = 0;
// CUdevice_attribute: CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR.
constexpr int kComputeMajor = 75, kComputeMinor = 76;
// CUdevice_P2PAttribute: CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK, _ACCESS_SUPPORTED,
// _NATIVE_ATOMIC_SUPPORTED.
constexpr int kP2PPerfRank = 1, kP2PAccess = 2, kP2PAtomics = 3;

bool add_cuda(HostTopology* topo) {
  // Never dlclose'd, like the handle in support/device/cuda_device.cc: libcuda does not
  // tolerate being unloaded while the process (or the CUDA runtime) may still use it.
  void* lib = open_first({"libcuda.so.1"});
  if (lib == nullptr) return false;
  auto init_fn = sym<CuResult (*)(unsigned)>(lib, "cuInit");
  auto count_fn = sym<CuResult (*)(int*)>(lib, "cuDeviceGetCount");
  auto get_fn = sym<CuResult (*)(CuDevice*, int)>(lib, "cuDeviceGet");
  auto bus_fn = sym<CuResult (*)(char*, int, CuDevice)>(lib, "cuDeviceGetPCIBusId");
  auto attr_fn = sym<CuResult (*)(int*, int, CuDevice)>(lib, "cuDeviceGetAttribute");
  auto p2p_fn = sym<CuResult (*)(int*, int, CuDevice, CuDevice)>(lib, "cuDeviceGetP2PAttribute");
  if (!init_fn || !count_fn || !get_fn || !bus_fn || !attr_fn) return false;
  int count = 0;
  // cuInit initialises the driver for this process; it creates no context.
  if (init_fn(0) != kCudaSuccess || count_fn(&count) != kCudaSuccess || count <= 0) return false;
  std::vector<int> node_of(count, -1);
  std::vector<CuDevice> dev_of(count, 0);
  for (int d = 0; d < count; ++d) {
    CuDevice dev = 0;
    if (get_fn(&dev, d) != kCudaSuccess) continue;
    dev_of[d] = dev;
    char bus[32] = {};
    if (bus_fn(bus, sizeof(bus) - 1, dev) != kCudaSuccess) continue;
    std::string bus_id = lower(bus);
    int n = topo->find_bus(bus_id);
    if (n < 0) {  // hwloc did not see it (no hwloc, or a container hiding the PCI tree)
      n = topo->add_node(TopoNode{NodeKind::kGpu, topo->fresh_name("gpu"), bus_id});
      int gen = 0, width = 0;
      pci_link(bus_id, &gen, &width);
      topo->add_link(TopoLink{n, cpu_for_bus(*topo, bus_id), LinkKind::kPcie, gen, width});
    }
    int major = 0, minor = 0;
    attr_fn(&major, kComputeMajor, dev);
    attr_fn(&minor, kComputeMinor, dev);
    topo->node(n).index = d;
    topo->node(n).sm = major * 10 + minor;
    node_of[d] = n;
  }
  for (int a = 0; a < count && p2p_fn; ++a) {
    for (int b = 0; b < count; ++b) {
      if (a == b || node_of[a] < 0 || node_of[b] < 0) continue;
      PeerAccess p{node_of[a], node_of[b]};
      int v = 0;
      if (p2p_fn(&v, kP2PAccess, dev_of[a], dev_of[b]) == kCudaSuccess) p.access = v != 0;
      if (p2p_fn(&v, kP2PAtomics, dev_of[a], dev_of[b]) == kCudaSuccess) p.atomics = v != 0;
      if (p2p_fn(&v, kP2PPerfRank, dev_of[a], dev_of[b]) == kCudaSuccess) p.perf_rank = v;
      topo->peers.push_back(p);
    }
  }
  return true;
}

// nvmlPciInfo_t as nvml.h declares it (its layout is part of NVML's ABI).
struct NvmlPciInfo {
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};
constexpr unsigned kMaxNvLinks = 18;  // NVML_NVLINK_MAX_LINKS

bool add_nvml(HostTopology* topo) {
  void* lib = open_first({"libnvidia-ml.so.1"});
  if (lib == nullptr) return false;
  auto init = sym<int (*)()>(lib, "nvmlInit_v2");
  auto by_bus = sym<int (*)(const char*, void**)>(lib, "nvmlDeviceGetHandleByPciBusId_v2");
  auto name_fn = sym<int (*)(void*, char*, unsigned)>(lib, "nvmlDeviceGetName");
  auto state_fn = sym<int (*)(void*, unsigned, int*)>(lib, "nvmlDeviceGetNvLinkState");
  auto remote_fn = sym<int (*)(void*, unsigned, NvmlPciInfo*)>(lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
  if (!init || !by_bus || !state_fn || !remote_fn || init() != 0) return false;
  int nvswitch = -1;
  for (int g : topo->of_kind(NodeKind::kGpu)) {
    void* dev = nullptr;
    if (by_bus(topo->node(g).bus_id.c_str(), &dev) != 0) continue;
    char name[96] = {};
    if (name_fn && name_fn(dev, name, sizeof(name) - 1) == 0) topo->node(g).model = name;
    std::map<int, int> links_to;  // remote node -> active link count
    for (unsigned l = 0; l < kMaxNvLinks; ++l) {
      int active = 0;
      NvmlPciInfo remote{};
      if (state_fn(dev, l, &active) != 0 || !active || remote_fn(dev, l, &remote) != 0) continue;
      remote.bus_id[sizeof(remote.bus_id) - 1] = '\0';
      std::string bus = lower(remote.bus_id);
      if (bus.size() > 12) bus = bus.substr(bus.size() - 12);  // NVML pads the domain to 8 digits
      int peer = topo->find_bus(bus);
      if (peer < 0 || topo->node(peer).kind != NodeKind::kGpu) {
        // Not a GPU: an NVSwitch. NCCL models all of them as one node, and so do we.
        if (nvswitch < 0) nvswitch = topo->add_node(TopoNode{NodeKind::kNvSwitch, "nvswitch"});
        peer = nvswitch;
      }
      ++links_to[peer];
    }
    int gen = nvlink_gen_for_sm(topo->node(g).sm);
    for (auto [peer, count] : links_to) {
      if (topo->node(peer).kind == NodeKind::kGpu && peer < g) continue;  // counted from the other side
      topo->add_link(TopoLink{g, peer, LinkKind::kNvLink, gen, count});
    }
  }
  return true;
}

}  // namespace

std::string add_gpus(HostTopology* topo) {
  std::string used;
  if (add_cuda(topo)) used = "cuda";
  if (!topo->of_kind(NodeKind::kGpu).empty() && add_nvml(topo)) used += used.empty() ? "nvml" : ",nvml";
  return used;
}

}  // namespace kolo::discovery
