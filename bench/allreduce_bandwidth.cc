// allreduce_bandwidth: the ring all-reduce's bus bandwidth (algorithm bandwidth x
// 2(n-1)/n, what NCCL's tests print) for 4 KB .. 64 MB with 2 and 4 ranks, each a process
// with its own gRPC server on loopback (as multi_worker_mirrored's workers are), next to
// raw TCP loopback measured in the same run and torch.distributed's gloo all-reduce
// (bench/gloo_allreduce.py, skipped without Debian's python3-torch), also one process per
// rank. Ring and gloo take turns per rank count, --repeats times, and the medians are
// compared, so a change in the machine's load hits both alike.
//
//   bazel run //bench:allreduce_bandwidth -- [--ranks=2,4] [--sizes=4096,...] [--seconds=1]
//       [--repeats=1]

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/python_peer.h"
#include "common/daemon/command_line.h"
#include "common/malloc_tuning.h"
#include "common/rpc/grpc_util.h"
#include "deploy/local/free_port.h"
#include "distribute/allreduce/chunk_mailbox.h"
#include "distribute/allreduce/grpc_ring_transport.h"
#include "distribute/allreduce/ring_allreduce.h"

ABSL_FLAG(std::string, ranks, "2,4", "Ring sizes to measure.");
ABSL_FLAG(std::string, sizes, "4096,65536,1048576,4194304,16777216,67108864",
          "All-reduce sizes in bytes.");
ABSL_FLAG(double, seconds, 1.0, "Time spent per (ranks, size).");
ABSL_FLAG(int64_t, chunk_bytes, pstrain::RingAllReduceOptions().chunk_bytes,
          "RingAllReduceOptions::chunk_bytes.");
ABSL_FLAG(int, repeats, 1, "Turns of ring and gloo per rank count; the medians are printed.");
// Internal: how the bench starts one rank of the ring in its own process.
ABSL_FLAG(int, ring_rank, -1, "Internal: run rank N of the ring in this process.");
ABSL_FLAG(std::string, ring_addresses, "", "Internal: every rank's host:port, in ring order.");
ABSL_FLAG(std::string, gloo_script, "", "bench/gloo_allreduce.py (found in runfiles by default).");
ABSL_FLAG(std::string, python, "/usr/bin/python3", "Python with Debian's python3-torch.");

namespace pstrain {
namespace {

// One TCP stream on loopback, writer thread to reader: GB/s.
double RawTcpLoopback(double seconds) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(listener, 1) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(listener);
    return -1;
  }
  int64_t received = 0;
  std::thread reader([&] {
    const int fd = accept(listener, nullptr, nullptr);
    std::vector<char> buf(1 << 20);
    ssize_t n;
    while ((n = read(fd, buf.data(), buf.size())) > 0) received += n;
    close(fd);
  });
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    close(listener);
    reader.join();
    return -1;
  }
  std::vector<char> buf(1 << 20, 'x');
  const absl::Time start = absl::Now();
  while (absl::Now() - start < absl::Seconds(seconds)) {
    size_t off = 0;
    while (off < buf.size()) {
      const ssize_t n = write(fd, buf.data() + off, buf.size() - off);
      if (n <= 0) break;
      off += n;
    }
  }
  close(fd);
  reader.join();
  const double elapsed = absl::ToDoubleSeconds(absl::Now() - start);
  close(listener);
  return static_cast<double>(received) / elapsed / 1e9;
}

// One rank of the ring, in this process: serves its chunks on its address, reduces each
// size for about `seconds`, and (rank 0) prints "ring n=2 bytes=4096 busbw_gbs=0.01".
// Returns the exit code.
int RingRank(int rank, const std::vector<std::string>& addresses,
             const std::vector<int64_t>& sizes, double seconds) {
  const int n = static_cast<int>(addresses.size());
  if (rank >= n) {
    std::printf("ring rank %d: only %d addresses\n", rank, n);
    return 2;
  }
  ChunkMailbox mailbox;
  CollectiveService service(&mailbox, (rank + n - 1) % n);
  ServerOptions so;
  so.listen_address = addresses[rank];
  so.services = {&service};
  absl::StatusOr<RunningServer> server = StartServer(so);
  if (!server.ok()) {
    std::printf("ring rank %d: %s\n", rank, std::string(server.status().message()).c_str());
    return 1;
  }
  GrpcRingOptions o;
  o.rank = rank;
  o.addresses = addresses;
  for (int r = 0; r < n; ++r) o.names.push_back(absl::StrCat("worker ", r));
  absl::StatusOr<std::unique_ptr<GrpcRingTransport>> transport =
      GrpcRingTransport::Create(o, &mailbox);
  if (!transport.ok()) {
    std::printf("ring rank %d: %s\n", rank, std::string(transport.status().message()).c_str());
    return 2;
  }
  RingAllReduceOptions options;
  options.chunk_bytes = absl::GetFlag(FLAGS_chunk_bytes);
  options.timeout = absl::Seconds(60);
  int exit_code = 0;
  {
    RingAllReduce ring(transport->get(), options);
    for (int64_t size : sizes) {
      std::vector<float> data(size / 4, 1.0f);
      // Every rank runs the same number of iterations: rank 0 decides, through a flag it
      // all-reduces with the data (its last element: rank 0 sets it to 0 or 1, the others
      // to 0), when time is up. One tensor, as gloo's peer reduces: a second one for the
      // flag would send every bucket through the fusion buffer (two extra copies).
      float& flag = data.back();
      bool warm = false;
      int64_t iterations = 0;
      absl::Time begin = absl::Now();
      absl::Status status;
      while (true) {
        flag = (rank == 0 && warm && absl::Now() - begin >= absl::Seconds(seconds)) ? 1 : 0;
        std::vector<absl::Span<float>> spans = {absl::MakeSpan(data)};
        status = ring.AllReduceSum(spans);
        if (!status.ok() || flag > 0) break;
        if (!warm) {
          warm = true;  // the first call connects; not timed
          begin = absl::Now();
        } else {
          ++iterations;
        }
      }
      if (!status.ok()) {
        std::printf("ring n=%d bytes=%lld rank %d: %s\n", n, static_cast<long long>(size), rank,
                    std::string(status.message()).c_str());
        exit_code = 1;
        break;
      }
      const double elapsed = absl::ToDoubleSeconds(absl::Now() - begin);
      // The last (flag) call moved data too: count it.
      const double algbw = static_cast<double>(size) * (iterations + 1) / elapsed / 1e9;
      if (rank == 0) {
        std::printf("ring n=%d bytes=%lld busbw_gbs=%.6f\n", n, static_cast<long long>(size),
                    algbw * 2.0 * (n - 1) / n);
        std::fflush(stdout);
      }
    }
  }
  server->server->Shutdown(std::chrono::system_clock::now());
  return exit_code;
}

// n ranks, each a process (this binary with --ring_rank); returns busbw GB/s per size
// (missing on error, which rank 0's lines explain).
std::map<int64_t, double> RingBusBandwidth(int n, double seconds) {
  std::map<int64_t, double> out;
  absl::StatusOr<std::vector<int>> ports = PickFreePorts(n);
  if (!ports.ok()) return out;
  std::vector<std::string> addresses;
  for (int port : *ports) addresses.push_back(absl::StrCat("localhost:", port));
  // This binary's own path (for the shell that starts rank 0, /proc/self/exe is the shell).
  char path[4096];
  const ssize_t length = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (length <= 0) return out;
  const std::string self(path, length);
  auto args_of = [&](int rank) {
    return std::vector<std::string>{
        self,
        absl::StrCat("--ring_rank=", rank),
        absl::StrCat("--ring_addresses=", absl::StrJoin(addresses, ",")),
        absl::StrCat("--sizes=", absl::GetFlag(FLAGS_sizes)),
        absl::StrCat("--seconds=", seconds),
        absl::StrCat("--chunk_bytes=", absl::GetFlag(FLAGS_chunk_bytes))};
  };
  // Ranks 1.. in the background (their output is not needed: rank 0 reports).
  std::vector<pid_t> others;
  posix_spawn_file_actions_t quiet;
  posix_spawn_file_actions_init(&quiet);
  posix_spawn_file_actions_addopen(&quiet, 1, "/dev/null", O_WRONLY, 0);
  for (int r = 1; r < n; ++r) {
    std::vector<std::string> args = args_of(r);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    if (posix_spawn(&pid, self.c_str(), &quiet, nullptr, argv.data(), environ) == 0) {
      others.push_back(pid);
    }
  }
  posix_spawn_file_actions_destroy(&quiet);
  RunPeer(absl::StrJoin(args_of(0), " "), [&out](const char* line) {
    int ranks = 0;
    long long bytes = 0;
    double busbw = 0;
    if (std::sscanf(line, "ring n=%d bytes=%lld busbw_gbs=%lf", &ranks, &bytes, &busbw) != 3) {
      return false;
    }
    out[bytes] = busbw;
    return true;
  });
  // Rank 0 is done; the others finish the same last call. One that is stuck (rank 0
  // failed) is not waited for past a few seconds.
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  for (pid_t pid : others) {
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) == 0) {
      if (absl::Now() > give_up) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        break;
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
  }
  return out;
}

// (n, bytes) -> gloo busbw GB/s; empty when skipped (the reason is printed).
std::map<std::pair<int, int64_t>, double> RunGloo(const std::string& script, int n,
                                                  double seconds) {
  std::map<std::pair<int, int64_t>, double> out;
  if (script.empty()) return out;
  const std::string cmd = absl::StrCat(absl::GetFlag(FLAGS_python), " ", script, " --ranks=", n,
                                       " --sizes=",
                                       absl::GetFlag(FLAGS_sizes), " --seconds=", seconds,
                                       " --port=", 20000 + getpid() % 20000);
  const bool ran = RunPeer(cmd, [&out](const char* line) {
    int n = 0;
    long long bytes = 0;
    double busbw = 0;
    if (std::sscanf(line, "gloo n=%d bytes=%lld busbw_gbs=%lf", &n, &bytes, &busbw) != 3) {
      return false;
    }
    out[{n, bytes}] = busbw;
    return true;
  });
  if (!ran) std::printf("gloo: cannot run %s: skipped\n", cmd.c_str());
  return out;
}

int Main(const char* argv0) {
  std::vector<int> ranks;
  std::vector<int64_t> sizes;
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_sizes), ',')) {
    int64_t b = 0;
    if (!absl::SimpleAtoi(s, &b) || b < 4) {
      std::fprintf(stderr, "allreduce_bandwidth: bad --sizes entry '%s'\n", std::string(s).c_str());
      return 2;
    }
    sizes.push_back(b);
  }
  if (absl::GetFlag(FLAGS_ring_rank) >= 0) {
    const std::vector<std::string> addresses =
        absl::StrSplit(absl::GetFlag(FLAGS_ring_addresses), ',');
    return RingRank(absl::GetFlag(FLAGS_ring_rank), addresses, sizes,
                    absl::GetFlag(FLAGS_seconds));
  }
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_ranks), ',')) {
    int n = 0;
    if (!absl::SimpleAtoi(s, &n) || n < 2) {
      std::fprintf(stderr, "allreduce_bandwidth: bad --ranks entry '%s'\n", std::string(s).c_str());
      return 2;
    }
    ranks.push_back(n);
  }
  const double seconds = absl::GetFlag(FLAGS_seconds);
  const int repeats = std::max(1, absl::GetFlag(FLAGS_repeats));
  const double tcp = RawTcpLoopback(seconds);
  std::printf("raw TCP loopback, one stream: %.3f GB/s\n", tcp);
  std::fflush(stdout);
  const std::string script =
      FindPeerScript(absl::GetFlag(FLAGS_gloo_script), "bench/gloo_allreduce.py", argv0);
  if (script.empty()) std::printf("gloo: bench/gloo_allreduce.py not found: skipped\n");
  // (n, bytes) -> every turn's figure.
  std::map<std::pair<int, int64_t>, std::vector<double>> ring, gloo;
  for (int n : ranks) {
    for (int turn = 0; turn < repeats; ++turn) {
      for (const auto& [size, busbw] : RingBusBandwidth(n, seconds)) {
        ring[{n, size}].push_back(busbw);
      }
      for (const auto& [cell, busbw] : RunGloo(script, n, seconds)) {
        gloo[cell].push_back(busbw);
      }
    }
  }
  auto median = [](std::vector<double> v) {
    if (v.empty()) return -1.0;
    std::sort(v.begin(), v.end());
    return v.size() % 2 == 1 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  };
  if (repeats > 1) std::printf("medians of %d turns each\n", repeats);
  std::printf("%5s %12s %14s %10s %14s %10s\n", "ranks", "bytes", "ring busbw GB/s", "% raw TCP",
              "gloo busbw GB/s", "x gloo");
  for (int n : ranks) {
    for (int64_t size : sizes) {
      const double r = median(ring[{n, size}]);
      const double g = median(gloo[{n, size}]);
      std::printf("%5d %12lld %14.3f %9.1f%%", n, static_cast<long long>(size), r,
                  tcp > 0 ? 100.0 * r / tcp : 0.0);
      if (g > 0) {
        std::printf(" %14.3f %9.2fx\n", g, r / g);
      } else {
        std::printf(" %14s %10s\n", "-", "-");
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace pstrain

int main(int argc, char** argv) {
  pstrain::ParseCommandLineWithUsage(
      argc, argv,
      "allreduce_bandwidth: ring all-reduce bus bandwidth next to raw TCP and gloo.\n  bazel run //bench:allreduce_bandwidth -- [--ranks=2,4] [--sizes=4096,...] [--seconds=1] [--repeats=1]");
  // gRPC's message buffers are above glibc's mmap threshold: keep them in the heap
  // (shared/notes/performance-facts.md: about 10x for 256 KiB - 16 MiB messages).
  pstrain::KeepLargeBlocksInHeap();
  return pstrain::Main(argv[0]);
}
