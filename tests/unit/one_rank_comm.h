// A fixture with a one-rank world communicator made by kolo_init, with every launcher
// variable cleared (tests must not join a job they happen to run under).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>

#include "kolo/kolo.h"

class OneRankComm : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : {"KOLO_RANK", "KOLO_SIZE", "KOLO_ADDR", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                          "SLURM_PROCID", "SLURM_NTASKS"}) {
      unsetenv(v);
    }
    ASSERT_EQ(kolo_init(&comm_), KOLO_SUCCESS) << kolo_last_error();
  }
  void TearDown() override {
    if (comm_ != nullptr) kolo_comm_destroy(comm_);
  }
  kolo_comm_t comm_ = nullptr;
};
