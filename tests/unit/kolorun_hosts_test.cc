// kolorun's host lists, host files and rank placement (tools/kolorun/hosts.h).
#include "tools/kolorun/hosts.h"
#include "tools/kolorun/discovery.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

namespace kolo::kolorun {
namespace {

std::vector<HostSlots> parse_ok(const std::string& text) {
  Result<std::vector<HostSlots>> hosts = parse_host_list(text);
  EXPECT_TRUE(hosts.ok()) << text << ": " << hosts.status().message();
  return hosts.ok() ? hosts.value() : std::vector<HostSlots>{};
}

std::string parse_error(const std::string& text) {
  Result<std::vector<HostSlots>> hosts = parse_host_list(text);
  EXPECT_FALSE(hosts.ok()) << text;
  return hosts.ok() ? "" : hosts.status().message();
}

std::string hostfile_error(const std::string& text) {
  Result<std::vector<HostSlots>> hosts = parse_hostfile(text, "hosts.txt");
  EXPECT_FALSE(hosts.ok()) << text;
  return hosts.ok() ? "" : hosts.status().message();
}

TEST(KolorunHosts, HostListWithSlots) {
  std::vector<HostSlots> hosts = parse_ok("node1:4,node2:2,node3");
  ASSERT_EQ(hosts.size(), 3u);
  EXPECT_EQ(hosts[0].name, "node1");
  EXPECT_EQ(hosts[0].slots, 4);
  EXPECT_EQ(hosts[1].name, "node2");
  EXPECT_EQ(hosts[1].slots, 2);
  EXPECT_EQ(hosts[2].name, "node3");
  EXPECT_EQ(hosts[2].slots, 1);
  EXPECT_EQ(total_slots(hosts), 7);
}

TEST(KolorunHosts, HostListMergesRepeatsAndTrims) {
  std::vector<HostSlots> hosts = parse_ok(" a:2 , b ,a:3");
  ASSERT_EQ(hosts.size(), 2u);
  EXPECT_EQ(hosts[0].name, "a");
  EXPECT_EQ(hosts[0].slots, 5);
  EXPECT_EQ(hosts[1].name, "b");
}

TEST(KolorunHosts, HostListIpv6AndUsers) {
  std::vector<HostSlots> hosts = parse_ok("[::1]:3,fe80::2,alice@gpu-7.cluster:8,[10.0.0.1]");
  ASSERT_EQ(hosts.size(), 4u);
  EXPECT_EQ(hosts[0].name, "::1");
  EXPECT_EQ(hosts[0].slots, 3);
  EXPECT_EQ(hosts[1].name, "fe80::2");
  EXPECT_EQ(hosts[1].slots, 1);
  EXPECT_EQ(hosts[2].name, "alice@gpu-7.cluster");
  EXPECT_EQ(hosts[2].slots, 8);
  EXPECT_EQ(hosts[3].name, "10.0.0.1");
}

TEST(KolorunHosts, HostListErrorsNameTheEntry) {
  EXPECT_NE(parse_error("a,,b").find("empty entry"), std::string::npos);
  EXPECT_NE(parse_error("").find("empty entry"), std::string::npos);
  EXPECT_NE(parse_error("a:").find("'a:'"), std::string::npos);
  EXPECT_NE(parse_error("a:0").find("'a:0'"), std::string::npos);
  EXPECT_NE(parse_error("a:-1").find("'a:-1'"), std::string::npos);
  EXPECT_NE(parse_error("a:two").find("'two'"), std::string::npos);
  EXPECT_NE(parse_error("a:99999999999").find("a:99999999999"), std::string::npos);
  EXPECT_NE(parse_error("a:2000000").find("not in 1.."), std::string::npos);
  // An ssh option smuggled in as a host name, and shell metacharacters.
  EXPECT_NE(parse_error("-oProxyCommand=x").find("starts with '-'"), std::string::npos);
  EXPECT_NE(parse_error("a;rm").find("';'"), std::string::npos);
  EXPECT_NE(parse_error("a b").find("' '"), std::string::npos);
  EXPECT_NE(parse_error("[::1").find("lacks ']'"), std::string::npos);
  EXPECT_NE(parse_error("[::1]x").find("':N'"), std::string::npos);
  EXPECT_NE(parse_error(":4").find("empty host name"), std::string::npos);
}

TEST(KolorunHosts, HostfileFormat) {
  Result<std::vector<HostSlots>> hosts = parse_hostfile(
      "# the cluster\n"
      "\n"
      "node1 slots=4\n"
      "  node2   slots=2  max_slots=8   # trailing comment\n"
      "node3 slots=1\r\n",
      "hosts.txt");
  ASSERT_TRUE(hosts.ok()) << hosts.status().message();
  ASSERT_EQ(hosts.value().size(), 3u);
  EXPECT_EQ(hosts.value()[0].name, "node1");
  EXPECT_EQ(hosts.value()[0].slots, 4);
  EXPECT_EQ(hosts.value()[0].origin, "hosts.txt:3");
  EXPECT_EQ(hosts.value()[1].name, "node2");
  EXPECT_EQ(hosts.value()[1].slots, 2);
  EXPECT_EQ(hosts.value()[2].name, "node3");
  EXPECT_EQ(hosts.value()[2].slots, 1);
}

TEST(KolorunHosts, HostfileErrorsNameTheLine) {
  EXPECT_NE(hostfile_error("a slots=2\n\nb slots=x\n").find("hosts.txt:3:"), std::string::npos);
  EXPECT_NE(hostfile_error("a slots=0\n").find("hosts.txt:1:"), std::string::npos);
  EXPECT_NE(hostfile_error("# c\na cpus=4\n").find("hosts.txt:2: unknown field 'cpus=4'"), std::string::npos);
  EXPECT_NE(hostfile_error("a slots\n").find("hosts.txt:1: unknown field 'slots'"), std::string::npos);
  EXPECT_NE(hostfile_error("a slots=2 slots=3\n").find("hosts.txt:1: slots given twice"), std::string::npos);
  EXPECT_NE(hostfile_error("a slots=4 max_slots=2\n").find("hosts.txt:1:"), std::string::npos);
  EXPECT_NE(hostfile_error("ok\n-bad\n").find("hosts.txt:2:"), std::string::npos);
  EXPECT_NE(hostfile_error("a$b slots=1\n").find("hosts.txt:1:"), std::string::npos);
  EXPECT_NE(hostfile_error("# nothing\n\n").find("no hosts"), std::string::npos);
  // The same host twice: a mistake, named with both lines.
  EXPECT_NE(hostfile_error("a slots=2\nb\na slots=1\n").find("hosts.txt:3: host 'a' again (first at hosts.txt:1)"),
            std::string::npos);
  EXPECT_NE(hostfile_error("").find("no hosts"), std::string::npos);
}

TEST(KolorunHosts, ReadHostfileFromDisk) {
  char path[] = "/tmp/kolorun_hosts_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  {
    std::ofstream file(path);
    file << "alpha slots=2\nbeta slots=oops\n";
  }
  Result<std::vector<HostSlots>> hosts = read_hostfile(path);
  ASSERT_FALSE(hosts.ok());
  EXPECT_NE(hosts.status().message().find(std::string(path) + ":2:"), std::string::npos)
      << hosts.status().message();
  std::remove(path);
  Result<std::vector<HostSlots>> missing = read_hostfile(path);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("cannot open"), std::string::npos);
}

TEST(KolorunHosts, LocalHostNames) {
  EXPECT_TRUE(is_local_host("localhost", "node7"));
  EXPECT_TRUE(is_local_host("127.0.0.1", "node7"));
  EXPECT_TRUE(is_local_host("127.0.1.1", "node7"));
  EXPECT_TRUE(is_local_host("::1", "node7"));
  EXPECT_TRUE(is_local_host("node7", "node7"));
  EXPECT_TRUE(is_local_host("node7.cluster", "node7"));
  EXPECT_TRUE(is_local_host("node7", "node7.cluster"));
  EXPECT_FALSE(is_local_host("node7.other", "node7.cluster"));
  EXPECT_FALSE(is_local_host("node8", "node7"));
  EXPECT_FALSE(is_local_host("node70", "node7"));
  EXPECT_FALSE(is_local_host("alice@localhost", "node7"));
  EXPECT_TRUE(is_local_host(this_hostname(), this_hostname()));
}

TEST(KolorunHosts, PlacementWithoutHostsIsLocal) {
  Result<std::vector<Placement>> placed = place_ranks({}, 3, "me");
  ASSERT_TRUE(placed.ok());
  ASSERT_EQ(placed.value().size(), 3u);
  for (int rank = 0; rank < 3; ++rank) {
    const Placement& p = placed.value()[rank];
    EXPECT_EQ(p.rank, rank);
    EXPECT_TRUE(p.local);
    EXPECT_EQ(p.local_rank, rank);
    EXPECT_EQ(p.local_size, 3);
  }
}

TEST(KolorunHosts, PlacementFillsHostsInOrder) {
  Result<std::vector<Placement>> placed = place_ranks({{"a", 2}, {"me", 1}, {"b", 3}}, 5, "me");
  ASSERT_TRUE(placed.ok());
  const std::vector<Placement>& p = placed.value();
  ASSERT_EQ(p.size(), 5u);
  const char* expected_hosts[] = {"a", "a", "me", "b", "b"};
  const int expected_local_rank[] = {0, 1, 0, 0, 1};
  const int expected_local_size[] = {2, 2, 1, 2, 2};
  for (int rank = 0; rank < 5; ++rank) {
    EXPECT_EQ(p[rank].rank, rank);
    EXPECT_EQ(p[rank].host, expected_hosts[rank]) << rank;
    EXPECT_EQ(p[rank].local_rank, expected_local_rank[rank]) << rank;
    EXPECT_EQ(p[rank].local_size, expected_local_size[rank]) << rank;
    EXPECT_EQ(p[rank].local, rank == 2) << rank;
  }
}

TEST(KolorunHosts, PlacementMergesLocalAliases) {
  // localhost and this machine's name are one machine: local ranks count across both.
  Result<std::vector<Placement>> placed = place_ranks({{"localhost", 1}, {"x", 1}, {"me", 2}}, 4, "me");
  ASSERT_TRUE(placed.ok());
  const std::vector<Placement>& p = placed.value();
  EXPECT_TRUE(p[0].local);
  EXPECT_FALSE(p[1].local);
  EXPECT_TRUE(p[2].local);
  EXPECT_TRUE(p[3].local);
  EXPECT_EQ(p[0].local_rank, 0);
  EXPECT_EQ(p[2].local_rank, 1);
  EXPECT_EQ(p[3].local_rank, 2);
  EXPECT_EQ(p[0].local_size, 3);
  EXPECT_EQ(p[1].local_rank, 0);
  EXPECT_EQ(p[1].local_size, 1);
}

TEST(KolorunHosts, PlacementErrors) {
  Result<std::vector<Placement>> too_many = place_ranks({{"a", 2}, {"b", 1}}, 4, "me");
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.status().message().find("only 3 slots"), std::string::npos) << too_many.status().message();
  EXPECT_FALSE(place_ranks({}, 0, "me").ok());
  EXPECT_FALSE(place_ranks({}, -1, "me").ok());
  EXPECT_FALSE(place_ranks({}, kMaxRanks + 1, "me").ok());
  EXPECT_TRUE(place_ranks({{"a", 2}}, 1, "me").ok());  // fewer ranks than slots is fine
}

// --launcher 'ip netns exec {host}': words split on blanks, every {host} replaced.
TEST(KolorunHosts, LauncherTemplate) {
  using Words = std::vector<std::string>;
  EXPECT_EQ(launcher_words("ip netns exec {host}", "kolo-h0"), (Words{"ip", "netns", "exec", "kolo-h0"}));
  EXPECT_EQ(launcher_words("  tools/testhosts.sh\texec   {host} ", "h1"), (Words{"tools/testhosts.sh", "exec", "h1"}));
  EXPECT_EQ(launcher_words("run --name={host}-x {host}{host}", "a"), (Words{"run", "--name=a-x", "aa"}));
  // A host name holding the placeholder is not expanded again.
  EXPECT_EQ(launcher_words("x {host}", "{host}"), (Words{"x", "{host}"}));

  EXPECT_EQ(launcher_template_problem("ip netns exec {host}"), "");
  EXPECT_EQ(launcher_template_problem("docker exec -i {host}"), "");
  EXPECT_NE(launcher_template_problem("   ").find("empty"), std::string::npos);
  EXPECT_NE(launcher_template_problem("ip netns exec"), "");
  EXPECT_NE(launcher_template_problem("{host}/bin/start"), "");
}

// --host-discovery-script: horovodrun's "host:slots" lines; the script itself through sh.
TEST(KolorunHosts, DiscoveredHosts) {
  auto hosts = parse_discovered_hosts("node1:4\n  node2  \n\n# a comment\nnode3:2 # spare\n");
  ASSERT_TRUE(hosts.ok()) << hosts.status().to_string();
  ASSERT_EQ(hosts.value().size(), 3u);
  EXPECT_EQ(hosts.value()[0].name, "node1");
  EXPECT_EQ(hosts.value()[0].slots, 4);
  EXPECT_EQ(hosts.value()[1].slots, 1);
  EXPECT_EQ(hosts.value()[2].slots, 2);
  EXPECT_TRUE(parse_discovered_hosts("").value().empty());  // no host now: not an error
  EXPECT_FALSE(parse_discovered_hosts("node1:x\n").ok());

  auto found = discover_hosts("printf 'a:2\\nb:1\\n'", 10);
  ASSERT_TRUE(found.ok()) << found.status().to_string();
  EXPECT_EQ(found.value().size(), 2u);
  auto failed = discover_hosts("exit 3", 10);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("status 3"), std::string::npos) << failed.status().message();
  auto slow = discover_hosts("sleep 5", 0.2);
  ASSERT_FALSE(slow.ok());
  EXPECT_EQ(slow.status().code(), Code::kTimeout);
}

TEST(KolorunHosts, AnUnknownHostIsNamedBeforeAnythingStarts) {
  Result<std::vector<HostSlots>> hosts = parse_hostfile("localhost slots=2\nno-such-host.invalid slots=2\n", "hf");
  ASSERT_TRUE(hosts.ok()) << hosts.status().message();
  Status known = check_hosts_resolve(hosts.value(), this_hostname());
  ASSERT_FALSE(known.ok());
  EXPECT_NE(known.message().find("hf:2: host 'no-such-host.invalid' is unknown"), std::string::npos) << known.message();
  Result<std::vector<HostSlots>> local = parse_host_list("localhost:2");
  ASSERT_TRUE(local.ok());
  EXPECT_TRUE(check_hosts_resolve(local.value(), this_hostname()).ok());
}

}  // namespace
}  // namespace kolo::kolorun
