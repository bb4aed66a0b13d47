// Stand-ins for libnccl.so.2 that kolo must refuse with a clear error: built as
// libkolo_fake_nccl_old.so (NCCL 2.10, too old) and libkolo_fake_nccl_partial.so (a new
// enough version that lacks every other function).
extern "C" int ncclGetVersion(int* version) {
  *version = KOLO_FAKE_NCCL_VERSION;
  return 0;
}
