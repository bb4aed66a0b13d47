// The world as launchers describe it (engine/world.cc). Slurm: a task of a step is a rank,
// the batch script's own process is not; rank 0 hosts the store on the step's first node,
// at a port from the job and the step; rank 0 elsewhere is told so. MPICH's Hydra: PMI_*.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/world.h"

namespace kolo {
namespace {

// Sets the variables for one test and puts the environment back after it.
class SlurmEnv {
 public:
  SlurmEnv() {
    for (const char* v : {"KOLO_RANK", "KOLO_SIZE", "KOLO_ADDR", "KOLO_LAUNCHER", "KOLO_SECRET", "KOLO_SECRET_FILE", "OMPI_COMM_WORLD_RANK",
                          "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_JOB_ID", "SLURM_STEP_ID",
                          "SLURM_JOB_NODELIST", "SLURM_STEP_NODELIST", "PMI_RANK", "PMI_SIZE"}) {
      const char* old = std::getenv(v);
      saved_.push_back({v, old != nullptr, old != nullptr ? old : ""});
      ::unsetenv(v);
    }
  }
  ~SlurmEnv() {
    for (const Saved& s : saved_) {
      if (s.set) {
        ::setenv(s.name.c_str(), s.value.c_str(), 1);
      } else {
        ::unsetenv(s.name.c_str());
      }
    }
  }
  void set(const char* name, const std::string& value) { ::setenv(name, value.c_str(), 1); }
  // Task `task` of `tasks` in step `step` of job `job`, as srun sets them.
  void slurm_task(int task, int tasks, int job, int step) {
    set("SLURM_PROCID", std::to_string(task));
    set("SLURM_NTASKS", std::to_string(tasks));
    set("SLURM_JOB_ID", std::to_string(job));
    set("SLURM_STEP_ID", std::to_string(step));
  }

 private:
  struct Saved {
    std::string name;
    bool set;
    std::string value;
  };
  std::vector<Saved> saved_;
};

std::string this_host() {
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  return name;
}

TEST(WorldSlurm, ATaskOfAStepMeetsOnTheStepsFirstNode) {
  SlurmEnv env;
  env.slurm_task(3, 8, 123456, 2);
  env.set("SLURM_JOB_NODELIST", "gpu[01-04]");
  env.set("SLURM_STEP_NODELIST", "gpu[03-04]");  // the step runs on part of the allocation
  auto w = world_from_environment();
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EXPECT_EQ(w.value().source, "Slurm");
  EXPECT_EQ(w.value().rank, 3);
  EXPECT_EQ(w.value().size, 8);
  EXPECT_FALSE(w.value().host_store);
  EXPECT_EQ(w.value().store_addr, "gpu03:" + std::to_string(20000 + (123456L * 31 + 2) % 20000));
}

TEST(WorldSlurm, TwoStepsOfOneJobMeetAtDifferentPorts) {
  SlurmEnv env;
  env.set("SLURM_PROCID", "1");
  env.set("SLURM_NTASKS", "4");
  env.set("SLURM_JOB_ID", "77");
  env.set("SLURM_JOB_NODELIST", "n1");
  env.set("SLURM_STEP_ID", "0");
  auto first = world_from_environment();
  env.set("SLURM_STEP_ID", "1");
  auto second = world_from_environment();
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_NE(first.value().store_addr, second.value().store_addr);
}

// Ids the environment makes huge or negative still give a port of the range, with no
// overflow (env_fuzz: a job id of 777777777777777777, undefined behaviour before).
TEST(WorldSlurm, HugeOrNegativeIdsGiveAPortInTheRange) {
  SlurmEnv env;
  env.set("SLURM_PROCID", "1");
  env.set("SLURM_NTASKS", "4");
  env.set("SLURM_JOB_NODELIST", "n1");
  for (const char* job : {"777777777777777777", "99999999999999999999999", "-5"}) {
    env.set("SLURM_JOB_ID", job);
    env.set("SLURM_STEP_ID", "-3");
    auto w = world_from_environment();
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    const int port = std::stoi(w.value().store_addr.substr(w.value().store_addr.find(':') + 1));
    EXPECT_GE(port, 20000) << job;
    EXPECT_LT(port, 40000) << job;
  }
}

TEST(WorldSlurm, TheBatchScriptsOwnProcessIsOneProcess) {
  SlurmEnv env;  // sbatch: SLURM_PROCID 0 and the job's task count, but no step
  env.set("SLURM_PROCID", "0");
  env.set("SLURM_NTASKS", "8");
  env.set("SLURM_JOB_ID", "9");
  env.set("SLURM_JOB_NODELIST", "n[1-2]");
  auto w = world_from_environment();
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EXPECT_EQ(w.value().source, "single process");
  EXPECT_EQ(w.value().size, 1);
}

TEST(WorldSlurm, RankZeroOnTheFirstNodeHostsTheStore) {
  SlurmEnv env;
  env.slurm_task(0, 2, 5, 0);
  env.set("SLURM_STEP_NODELIST", this_host() + ",other");
  auto w = world_from_environment();
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EXPECT_TRUE(w.value().host_store);
}

TEST(WorldSlurm, RankZeroElsewhereIsAClearError) {
  SlurmEnv env;
  env.slurm_task(0, 2, 5, 0);
  env.set("SLURM_STEP_NODELIST", "not-this-host[1-2]");
  auto w = world_from_environment();
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("not on the step's first node not-this-host1"), std::string::npos)
      << w.status().to_string();
  EXPECT_NE(w.status().message().find("KOLO_ADDR"), std::string::npos);
}

TEST(WorldSlurm, AnAddressGivenWins) {
  SlurmEnv env;
  env.slurm_task(0, 2, 5, 0);
  env.set("SLURM_STEP_NODELIST", "not-this-host1");
  env.set("KOLO_ADDR", "10.0.0.1:4000");
  auto w = world_from_environment();
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EXPECT_EQ(w.value().store_addr, "10.0.0.1:4000");
}

TEST(WorldSlurm, EachStepsSecretComesFromTheUsersSecretFile) {
  SlurmEnv env;
  char dir[] = "/tmp/kolo-secret-test.XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string file = std::string(dir) + "/kolo/secret";
  env.set("KOLO_SECRET_FILE", file);
  ::unsetenv("KOLO_SECRET");
  WorldInfo w;
  w.source = "Slurm";
  w.size = 4;
  env.set("SLURM_JOB_ID", "42");
  env.set("SLURM_STEP_ID", "0");
  auto first = world_secret(w);  // makes the file
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto again = world_secret(w);  // another task of the step reads it
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(first.value(), again.value());
  EXPECT_EQ(first.value().size(), 32u);
  env.set("SLURM_STEP_ID", "1");
  auto next_step = world_secret(w);
  ASSERT_TRUE(next_step.ok());
  EXPECT_NE(first.value(), next_step.value());
  ::chmod(file.c_str(), 0644);  // readable by others: refused, with the fix
  auto exposed = world_secret(w);
  ASSERT_FALSE(exposed.ok());
  EXPECT_NE(exposed.status().message().find("chmod 600"), std::string::npos) << exposed.status().to_string();
  ::unlink(file.c_str());
  ::rmdir((std::string(dir) + "/kolo").c_str());
  ::rmdir(dir);
}

TEST(WorldSlurm, KoloSizeThatDisagreesWithTheLauncherNamesBoth) {
  SlurmEnv env;
  env.set("KOLO_RANK", "0");
  env.set("KOLO_SIZE", "12");
  env.set("KOLO_ADDR", "127.0.0.1:1");
  env.set("SLURM_PROCID", "0");
  env.set("SLURM_NTASKS", "16");
  env.set("SLURM_STEP_ID", "0");
  auto w = world_from_environment();
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("KOLO_SIZE=12 but Slurm's (this step's tasks) SLURM_NTASKS=16"), std::string::npos)
      << w.status().to_string();
  env.set("SLURM_NTASKS", "12");  // agreeing: fine
  EXPECT_TRUE(world_from_environment().ok());
}

TEST(WorldHydra, MpichsRanksAreRanksAndNeedAnAddress) {
  SlurmEnv env;
  env.set("PMI_RANK", "2");
  env.set("PMI_SIZE", "16");
  auto unaddressed = world_from_environment();
  ASSERT_FALSE(unaddressed.ok());  // no silent one-process worlds: the address is asked for
  EXPECT_NE(unaddressed.status().message().find("KOLO_ADDR is not set"), std::string::npos);
  env.set("KOLO_ADDR", "node1:29500");
  auto w = world_from_environment();
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EXPECT_EQ(w.value().source, "MPICH (Hydra)");
  EXPECT_EQ(w.value().rank, 2);
  EXPECT_EQ(w.value().size, 16);
  // Hydra under Slurm: its ranks inherit a proxy's Slurm task; PMI_* decides.
  env.set("SLURM_PROCID", "0");
  env.set("SLURM_NTASKS", "4");
  env.set("SLURM_STEP_ID", "0");
  auto under_slurm = world_from_environment();
  ASSERT_TRUE(under_slurm.ok());
  EXPECT_EQ(under_slurm.value().source, "MPICH (Hydra)");
  EXPECT_EQ(under_slurm.value().rank, 2);
}

}  // namespace
}  // namespace kolo
