// Shared memory between the ranks of one host (transport/shm/shm_segment.cc): an
// anonymous memfd of mode 0600, never a name in /dev/shm, handed only to the pids the
// store announced and only if they run as this user.
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <set>

#include "security_util.h"
#include "transport/shm/shm_segment.h"

namespace kolo::security_test {
namespace {

std::set<std::string> dev_shm_names() {
  std::set<std::string> names;
  if (DIR* dir = ::opendir("/dev/shm")) {
    while (dirent* entry = ::readdir(dir)) names.insert(entry->d_name);
    ::closedir(dir);
  }
  return names;
}

TEST(ShmAccess, SegmentIsAnOwnerOnlyMemfdWithNoName) {
  std::set<std::string> before = dev_shm_names();
  Fd memfd;
  Result<shm::Mapping> mapping = shm::create_shared_memory(1 << 20, &memfd);
  ASSERT_TRUE(mapping.ok()) << mapping.status().to_string();
  struct stat st {};
  ASSERT_EQ(::fstat(memfd.get(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u) << "segment mode " << std::oct << (st.st_mode & 07777);
  EXPECT_EQ(st.st_uid, ::getuid());
  char target[256] = {};
  std::string link = str_cat("/proc/self/fd/", memfd.get());
  ASSERT_GT(::readlink(link.c_str(), target, sizeof(target) - 1), 0);
  EXPECT_EQ(std::string(target).rfind("/memfd:", 0), 0u) << target;
  EXPECT_EQ(dev_shm_names(), before) << "a segment appeared in /dev/shm";
}

// Forks a child that runs `body` and returns its exit status (or -1).
template <typename Body>
pid_t fork_child(Body body) {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(body());
  return pid;
}

int exit_status(pid_t pid) {
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

// What a child reports: 0 = got no descriptor, 1 = got one (and read the marker), 2 = got
// one whose memory was wrong.
int try_take(const std::string& offer) {
  Result<Fd> fd = shm::take_fd(offer, Deadline(3));
  if (!fd.ok()) return 0;
  Result<shm::Mapping> mapping = shm::map_shared_memory(fd.value().get(), 4096);
  return mapping.ok() && std::strcmp(mapping.value().data(), "marker") == 0 ? 1 : 2;
}

TEST(ShmAccess, OfferGoesOnlyToTheAnnouncedPids) {
  Fd memfd;
  Result<shm::Mapping> mapping = shm::create_shared_memory(4096, &memfd);
  ASSERT_TRUE(mapping.ok());
  std::strcpy(mapping.value().data(), "marker");
  Result<shm::FdOffer> offer = shm::FdOffer::open();
  ASSERT_TRUE(offer.ok()) << offer.status().to_string();
  const std::string name = offer.value().name();

  // The stranger goes first and must get nothing; the announced rank then gets the segment.
  int order[2];
  ASSERT_EQ(::pipe(order), 0);
  pid_t stranger = fork_child([&] {
    int got = try_take(name);
    (void)!::write(order[1], "x", 1);
    return got;
  });
  pid_t rank = fork_child([&] {
    char byte;
    (void)!::read(order[0], &byte, 1);
    return try_take(name);
  });
  ::close(order[0]);
  ::close(order[1]);
  Status served = offer.value().serve(memfd.get(), {rank}, Deadline(10));
  EXPECT_TRUE(served.ok()) << served.to_string();
  EXPECT_EQ(exit_status(stranger), 0) << "a process that was not announced got the segment";
  EXPECT_EQ(exit_status(rank), 1) << "the announced rank did not get the segment";
}

// A process of another user is turned away even with an announced pid (root only: it takes
// setuid to be someone else).
TEST(ShmAccess, OfferRefusesAnotherUser) {
  if (::getuid() != 0) GTEST_SKIP() << "needs root to run a child as another user";
  Fd memfd;
  Result<shm::Mapping> mapping = shm::create_shared_memory(4096, &memfd);
  ASSERT_TRUE(mapping.ok());
  std::strcpy(mapping.value().data(), "marker");
  Result<shm::FdOffer> offer = shm::FdOffer::open();
  ASSERT_TRUE(offer.ok());
  const std::string name = offer.value().name();
  pid_t other_user = fork_child([&] {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) return 3;  // nobody
    return try_take(name);
  });
  Status served = offer.value().serve(memfd.get(), {other_user}, Deadline(3));
  EXPECT_EQ(served.code(), Code::kTimeout) << "the offer was served: " << served.to_string();
  int got = exit_status(other_user);
  ASSERT_NE(got, 3) << "could not become nobody";
  EXPECT_EQ(got, 0) << "a process of another user got the segment";
}

}  // namespace
}  // namespace kolo::security_test
