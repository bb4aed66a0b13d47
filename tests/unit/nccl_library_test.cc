// The NCCL fallback's loader (engine/executors/nccl/nccl_library.h): the real libnccl.so.2
// where it is installed, missing, too old and incomplete libraries refused with errors that
// name them, the type and operation maps, and, where nccl.h is installed, kolo's copy of
// NCCL's ABI checked against it. Without a GPU nothing past loading can run; KOLO_BACKEND=nccl
// on another device runtime fails kolo_init with the reason.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>

#include "engine/executors/nccl/nccl_library.h"
#include "kolo/kolo.h"
#ifdef KOLO_TEST_NCCL_H
#include <nccl.h>
#endif

namespace kolo::nccl {
namespace {

TEST(NcclLibrary, LoadsTheInstalledNcclAndMakesAUniqueId) {
  Result<Library> lib = load("libnccl.so.2");
  if (!lib.ok()) GTEST_SKIP() << "no NCCL installed here: " << lib.status().message();
  EXPECT_GE(lib.value().version, kMinimumVersion);
  UniqueId a{}, b{};
  ASSERT_EQ(lib.value().get_unique_id(&a), kSuccess);  // needs no GPU
  ASSERT_EQ(lib.value().get_unique_id(&b), kSuccess);
  EXPECT_NE(std::memcmp(a.bytes, b.bytes, sizeof a.bytes), 0) << "two unique ids are the same";
  EXPECT_STREQ(lib.value().get_error_string(kSuccess), "no error");
}

TEST(NcclLibrary, MissingLibraryIsNamed) {
  Result<Library> lib = load("/nonexistent/libnccl.so.2");
  ASSERT_FALSE(lib.ok());
  EXPECT_EQ(lib.status().code(), Code::kUnsupported);
  EXPECT_NE(lib.status().message().find("/nonexistent/libnccl.so.2"), std::string::npos) << lib.status().message();
  EXPECT_NE(lib.status().message().find("KOLO_NCCL_LIBRARY"), std::string::npos) << lib.status().message();
}

// kolo's own drop-in (api/nccl) in NVIDIA's place would send kolo's calls back to kolo.
TEST(NcclLibrary, KolosOwnDropInIsRefused) {
  Result<Library> lib = load(KOLO_NCCL_DROPIN);
  ASSERT_FALSE(lib.ok());
  EXPECT_EQ(lib.status().code(), Code::kUnsupported);
  EXPECT_NE(lib.status().message().find("kolo's own NCCL drop-in"), std::string::npos) << lib.status().message();
}

TEST(NcclLibrary, TooOldLibraryIsRefusedWithItsVersion) {
  Result<Library> lib = load(KOLO_FAKE_NCCL_OLD);
  ASSERT_FALSE(lib.ok());
  EXPECT_NE(lib.status().message().find("is NCCL 2.10.3; kolo needs NCCL 2.14.0 or newer"), std::string::npos)
      << lib.status().message();
}

TEST(NcclLibrary, LibraryWithoutAFunctionIsRefused) {
  Result<Library> lib = load(KOLO_FAKE_NCCL_PARTIAL);
  ASSERT_FALSE(lib.ok());
  EXPECT_NE(lib.status().message().find("has no ncclGetUniqueId"), std::string::npos) << lib.status().message();
}

TEST(NcclLibrary, TypesAndOperations) {
  EXPECT_EQ(dtype_of(DType::kFloat32, 22800).value(), 7);
  EXPECT_EQ(dtype_of(DType::kBFloat16, 22800).value(), 9);
  EXPECT_EQ(dtype_of(DType::kFloat8E5M2, 22800).value(), 11);
  Result<int> fp8_old = dtype_of(DType::kFloat8E4M3, 22300);
  ASSERT_FALSE(fp8_old.ok());
  EXPECT_NE(fp8_old.status().message().find("2.24"), std::string::npos) << fp8_old.status().message();
  EXPECT_EQ(op_of(ReduceOp::kMin).value(), 3);
  EXPECT_FALSE(op_of(ReduceOp::kAvg).ok());  // lowered before it gets here
}

#ifdef KOLO_TEST_NCCL_H
TEST(NcclLibrary, AbiMatchesNcclHeader) {
  EXPECT_EQ(kSuccess, ncclSuccess);
  EXPECT_EQ(kInProgress, ncclInProgress);
  EXPECT_EQ(sizeof(UniqueId), sizeof(ncclUniqueId));
  const struct {
    DType kolo;
    ncclDataType_t nccl;
  } types[] = {{DType::kInt8, ncclInt8},         {DType::kUint8, ncclUint8},       {DType::kInt32, ncclInt32},
               {DType::kUint32, ncclUint32},     {DType::kInt64, ncclInt64},       {DType::kUint64, ncclUint64},
               {DType::kFloat16, ncclFloat16},   {DType::kBFloat16, ncclBfloat16}, {DType::kFloat32, ncclFloat32},
               {DType::kFloat64, ncclFloat64},   {DType::kFloat8E4M3, ncclFloat8e4m3}, {DType::kFloat8E5M2, ncclFloat8e5m2}};
  for (const auto& t : types) EXPECT_EQ(dtype_of(t.kolo, NCCL_VERSION_CODE).value(), static_cast<int>(t.nccl)) << dtype_name(t.kolo);
  EXPECT_EQ(op_of(ReduceOp::kSum).value(), ncclSum);
  EXPECT_EQ(op_of(ReduceOp::kProd).value(), ncclProd);
  EXPECT_EQ(op_of(ReduceOp::kMax).value(), ncclMax);
  EXPECT_EQ(op_of(ReduceOp::kMin).value(), ncclMin);
  // kolo's Config is the 2.14 prefix of ncclConfig_t.
  ncclConfig_t header = NCCL_CONFIG_INITIALIZER;
  Config mine;
  EXPECT_EQ(mine.magic, header.magic);
  EXPECT_EQ(offsetof(Config, magic), offsetof(ncclConfig_t, magic));
  EXPECT_EQ(offsetof(Config, version), offsetof(ncclConfig_t, version));
  EXPECT_EQ(offsetof(Config, blocking), offsetof(ncclConfig_t, blocking));
  EXPECT_EQ(offsetof(Config, cga_cluster_size), offsetof(ncclConfig_t, cgaClusterSize));
  EXPECT_EQ(mine.cga_cluster_size, header.cgaClusterSize);  // NCCL_CONFIG_UNDEF_INT
  EXPECT_EQ(sizeof(Config), offsetof(ncclConfig_t, minCTAs));  // nothing beyond it
  EXPECT_EQ(mine.version, static_cast<unsigned>(NCCL_VERSION(2, 14, 0)));
}
#endif

// KOLO_BACKEND is read when a communicator is made: a process of its own for each case.
void expect_init_fails(const char* backend, const char* library, const char* words) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        for (const char* v : {"KOLO_RANK", "KOLO_SIZE", "KOLO_ADDR", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"}) unsetenv(v);
        setenv("KOLO_DEVICE", "emulated", 1);
        setenv("KOLO_BACKEND", backend, 1);
        if (library != nullptr) setenv("KOLO_NCCL_LIBRARY", library, 1);
        kolo_comm_t comm = nullptr;
        const bool refused = kolo_init(&comm) != KOLO_SUCCESS && std::strstr(kolo_last_error(), words) != nullptr;
        if (!refused) std::fprintf(stderr, "kolo_init: %s\n", kolo_last_error());
        std::exit(refused ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(NcclBackend, NeedsTheCudaDeviceRuntime) {
  if (!load("libnccl.so.2").ok()) GTEST_SKIP() << "no NCCL installed here";
  expect_init_fails("nccl", nullptr, "needs the cuda device runtime");
}

TEST(NcclBackend, MissingLibraryFailsInit) { expect_init_fails("nccl", "/nonexistent/libnccl.so.2", "/nonexistent/libnccl.so.2"); }

TEST(NcclBackend, UnknownBackendIsRefused) { expect_init_fails("mpi", nullptr, "KOLO_BACKEND='mpi' is not kolo or nccl"); }

}  // namespace
}  // namespace kolo::nccl
