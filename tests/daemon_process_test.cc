// The daemon runtime (common/daemon/) as a user meets it, on the three real binaries as
// separate processes, each with OpenBLAS running two threads: health answered to a client
// that has nothing but server reflection; a loopback TF_CONFIG address listened on by
// loopback only; a second daemon on a taken port refused in one line while the first
// keeps serving; SIGTERM and SIGINT blocked in every thread (the one that sigwaits aside);
// and SIGTERM to a ps, a worker and a chief that waits for its tasks ending each with
// exit 0, by itself, within the grace.
//
// This binary links no pstrain .proto and no libgrpc++_reflection: what it calls it
// learns from each daemon's reflection service (tests/reflection/reflection_client.h).

#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "deploy/local/free_port.h"
#include "deploy/local/local_cluster.h"
#include "deploy/local/process_group.h"
#include "gtest/gtest.h"
#include "tests/cluster_test_util.h"
#include "tests/reflection/reflection_client.h"

namespace pstrain {
namespace {

constexpr char kGrace[] = "--shutdown_grace=15s";

struct Daemon {
  std::string name;     // process name in the group: "chief", "ps0", "worker0"
  std::string binary;   // relative to the runfiles root
  std::string type;     // TF_CONFIG task type
  std::string service;  // its own gRPC service
  std::vector<std::string> args;
};

const std::vector<Daemon>& Daemons() {
  static const auto* daemons = new std::vector<Daemon>{
      {"chief", "chief/chief", "chief", "pstrain.Chief",
       {"--job=tests/testdata/tiny_synthetic.json", kGrace}},
      {"ps0", "ps_server/ps_server", "ps", "pstrain.ParameterServer", {kGrace}},
      {"worker0", "worker/worker", "worker", "pstrain.FunctionWorker", {"--device=cpu", kGrace}},
  };
  return *daemons;
}

// A cluster on 127.0.0.1 with a second worker that never starts: the chief waits for it,
// the ps and worker 0 wait for work.
struct WaitingCluster {
  std::vector<std::pair<std::string, std::vector<std::string>>> spec;
  std::map<std::string, std::string> address;  // by process name
};

WaitingCluster MakeWaitingCluster() {
  absl::StatusOr<std::vector<int>> ports = PickFreePorts(4);
  EXPECT_TRUE(ports.ok()) << ports.status();
  std::vector<std::string> a;
  for (int i = 0; i < 4; ++i) {
    a.push_back(absl::StrCat("127.0.0.1:", ports.ok() ? (*ports)[i] : 0));
  }
  WaitingCluster cluster;
  cluster.spec = {{"chief", {a[0]}}, {"ps", {a[1]}}, {"worker", {a[2], a[3]}}};
  cluster.address = {{"chief", a[0]}, {"ps0", a[1]}, {"worker0", a[2]}};
  return cluster;
}

ProcessGroup::Spec SpecFor(const Daemon& d, const WaitingCluster& cluster) {
  return {d.name, d.binary, d.args,
          {{"TF_CONFIG", MakeTfConfig(cluster.spec, d.type, 0)},
           // OpenBLAS starts its second thread when it loads, before main().
           {"OPENBLAS_NUM_THREADS", "2"}}};
}

// Waits until `address` answers SERVING to a reflection-only health check.
absl::StatusOr<std::string> WaitUntilServing(const std::string& address) {
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  absl::StatusOr<std::string> health;
  while (absl::Now() < give_up) {
    health = HealthCheckByReflection(address, absl::Seconds(5));
    if (health.ok() && *health == "SERVING") return health;
    absl::SleepFor(absl::Milliseconds(200));
  }
  return health;
}

// "127.0.0.1", "::ffff:127.0.0.1", "0.0.0.0", "::" ... for every socket listening on
// `port` (/proc/net/tcp and tcp6: the address in the kernel's byte order, state 0A).
std::vector<std::string> ListeningHosts(int port) {
  std::vector<std::string> hosts;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::vector<std::string> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
      if (fields.size() < 4 || fields[3] != "0A") continue;
      const std::vector<std::string> local = absl::StrSplit(fields[1], ':');
      int local_port = 0;
      if (local.size() != 2 || !absl::SimpleHexAtoi(local[1], &local_port) ||
          local_port != port) {
        continue;
      }
      // Each group of 8 hex digits is a 32-bit word in host (little-endian) order.
      std::vector<int> bytes;
      for (size_t word = 0; word + 8 <= local[0].size(); word += 8) {
        uint32_t value = 0;
        absl::SimpleHexAtoi(local[0].substr(word, 8), &value);
        for (int b = 0; b < 4; ++b) bytes.push_back((value >> (8 * b)) & 0xff);
      }
      if (bytes.size() == 4) {
        hosts.push_back(absl::StrCat(bytes[0], ".", bytes[1], ".", bytes[2], ".", bytes[3]));
      } else {
        const bool v4_mapped = std::all_of(bytes.begin(), bytes.begin() + 10,
                                           [](int b) { return b == 0; }) &&
                               bytes[10] == 0xff && bytes[11] == 0xff;
        const bool any = std::all_of(bytes.begin(), bytes.end(), [](int b) { return b == 0; });
        const bool loopback6 = std::all_of(bytes.begin(), bytes.begin() + 15,
                                           [](int b) { return b == 0; }) &&
                               bytes[15] == 1;
        hosts.push_back(v4_mapped ? absl::StrCat("::ffff:", bytes[12], ".", bytes[13], ".",
                                                 bytes[14], ".", bytes[15])
                        : any       ? "::"
                        : loopback6 ? "::1"
                                    : "another IPv6 address");
      }
    }
  }
  return hosts;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Checks that every thread of `pid` blocks SIGTERM and SIGINT, but for the thread that
// waits for them in rt_sigtimedwait (syscall 128 on x86-64), which the kernel shows
// unblocked while it waits. Returns the number of threads.
int ExpectShutdownSignalsBlockedInEveryThread(pid_t pid, const std::string& name) {
  const uint64_t kShutdownSignals = (1ull << (SIGTERM - 1)) | (1ull << (SIGINT - 1));
  int threads = 0;
  int waiting = 0;
  for (const auto& task :
       std::filesystem::directory_iterator(absl::StrCat("/proc/", pid, "/task"))) {
    ++threads;
    const std::string status = ReadFile(task.path().string() + "/status");
    const size_t at = status.find("SigBlk:");
    const size_t end = status.find('\n', at);
    uint64_t blocked = 0;
    EXPECT_TRUE(at != std::string::npos &&
                absl::SimpleHexAtoi(absl::StripAsciiWhitespace(status.substr(at + 7, end - at - 7)),
                                    &blocked))
        << name << ": no SigBlk in " << task.path();
    const std::string syscall = ReadFile(task.path().string() + "/syscall");
    if (absl::StartsWith(syscall, "128 ")) {
      ++waiting;
      continue;
    }
    EXPECT_EQ(blocked & kShutdownSignals, kShutdownSignals)
        << name << " thread " << task.path().filename() << " ("
        << absl::StripAsciiWhitespace(ReadFile(task.path().string() + "/comm"))
        << ") does not block SIGTERM and SIGINT: a signal to the process could end it there";
  }
  EXPECT_EQ(waiting, 1) << name << ": one thread should wait for the signals";
  return threads;
}

TEST(DaemonProcessTest, ServeReflectionHealthOwnPortsAndStopOnSigterm) {
  const WaitingCluster cluster = MakeWaitingCluster();
  ProcessGroup group;
  for (const Daemon& d : Daemons()) ASSERT_TRUE(group.Start(SpecFor(d, cluster)).ok()) << d.name;

  for (const Daemon& d : Daemons()) {
    const std::string& address = cluster.address.at(d.name);
    SCOPED_TRACE(d.name + " at " + address);
    absl::StatusOr<std::string> health = WaitUntilServing(address);
    ASSERT_TRUE(health.ok()) << health.status();
    EXPECT_EQ(*health, "SERVING");
    absl::StatusOr<std::vector<std::string>> services =
        ListServicesByReflection(address, absl::Seconds(5));
    ASSERT_TRUE(services.ok()) << services.status();
    for (const char* expected : {"grpc.health.v1.Health", d.service.c_str()}) {
      EXPECT_NE(std::find(services->begin(), services->end(), expected), services->end())
          << expected;
    }
    // TF_CONFIG says 127.0.0.1: nothing listens on another interface.
    int port = 0;
    ASSERT_TRUE(absl::SimpleAtoi(address.substr(address.rfind(':') + 1), &port));
    const std::vector<std::string> hosts = ListeningHosts(port);
    EXPECT_FALSE(hosts.empty());
    for (const std::string& host : hosts) {
      EXPECT_TRUE(host == "127.0.0.1" || host == "::ffff:127.0.0.1") << host;
    }
    absl::StatusOr<pid_t> pid = group.Pid(d.name);
    ASSERT_TRUE(pid.ok());
    // Its own threads, gRPC's and OpenBLAS's second one.
    EXPECT_GT(ExpectShutdownSignalsBlockedInEveryThread(*pid, d.name), 2);
  }

  // The same daemon again with the same TF_CONFIG: its port is taken.
  for (const Daemon& d : Daemons()) {
    const std::string& address = cluster.address.at(d.name);
    SCOPED_TRACE(d.name + " again at " + address);
    ProcessGroup second;
    ASSERT_TRUE(second.Start(SpecFor(d, cluster)).ok());
    ProcessRun run = CollectRun(second, absl::Seconds(60), absl::Seconds(5));
    ASSERT_EQ(run.exits.size(), 1u);
    EXPECT_EQ(run.exits[0].exit_code, 1) << DescribeExit(run.exits[0]);
    const std::string& err = run.stderr_of[d.name];
    int error_lines = 0;
    for (absl::string_view line : absl::StrSplit(err, '\n', absl::SkipEmpty())) {
      if (!absl::StartsWith(line, "E ")) continue;
      ++error_lines;
      EXPECT_TRUE(absl::StrContains(line, address) && absl::StrContains(line, "in use")) << line;
    }
    EXPECT_EQ(error_lines, 1) << err;
    // The first one still serves, alone on its port.
    absl::StatusOr<std::string> health = HealthCheckByReflection(address, absl::Seconds(5));
    ASSERT_TRUE(health.ok()) << health.status();
    EXPECT_EQ(*health, "SERVING");
  }

  for (const Daemon& d : Daemons()) ASSERT_TRUE(group.Signal(d.name, SIGTERM).ok()) << d.name;
  ProcessRun run = CollectRun(group, absl::Seconds(90), absl::Seconds(30));
  ASSERT_EQ(run.exits.size(), Daemons().size());
  for (const ProcessGroup::Exit& exit : run.exits) {
    const std::string& log = run.stderr_of[exit.name];
    EXPECT_EQ(exit.signal, 0) << exit.name << " " << DescribeExit(exit) << "\n" << log;
    EXPECT_EQ(exit.exit_code, 0) << exit.name << " " << DescribeExit(exit) << "\n" << log;
    EXPECT_TRUE(absl::StrContains(log, "SIGTERM received")) << exit.name << "\n" << log;
    // By itself, not ended by the grace.
    EXPECT_FALSE(absl::StrContains(log, "did not shut down within")) << exit.name << "\n" << log;
  }
}

}  // namespace
}  // namespace pstrain
