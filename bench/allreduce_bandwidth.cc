// allreduce_bandwidth: the ring all-reduce's bus bandwidth (algorithm bandwidth x
// 2(n-1)/n, what NCCL's tests print) for 4 KB .. 64 MB with 2 and 4 ranks, each a thread
// with its own gRPC server on loopback, next to raw TCP loopback measured in the same run
// and torch.distributed's gloo all-reduce (bench/gloo_allreduce.py, skipped without
// Debian's python3-torch).
//
//   bazel run //bench:allreduce_bandwidth -- [--ranks=2,4] [--sizes=4096,...] [--seconds=1]

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/python_peer.h"
#include "common/malloc_tuning.h"
#include "common/rpc/grpc_util.h"
#include "deploy/local/free_port.h"
#include "worker/allreduce/chunk_mailbox.h"
#include "worker/allreduce/grpc_ring_transport.h"
#include "worker/allreduce/ring_allreduce.h"

ABSL_FLAG(std::string, ranks, "2,4", "Ring sizes to measure.");
ABSL_FLAG(std::string, sizes, "4096,65536,1048576,4194304,16777216,67108864",
          "All-reduce sizes in bytes.");
ABSL_FLAG(double, seconds, 1.0, "Time spent per (ranks, size).");
ABSL_FLAG(int64_t, chunk_bytes, pstrain::RingAllReduceOptions().chunk_bytes,
          "RingAllReduceOptions::chunk_bytes.");
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

// n ranks as threads with their own servers; returns busbw GB/s per size (-1 on error).
std::map<int64_t, double> RingBusBandwidth(int n, const std::vector<int64_t>& sizes,
                                           double seconds) {
  std::map<int64_t, double> out;
  absl::StatusOr<std::vector<int>> ports = PickFreePorts(n);
  if (!ports.ok()) return out;
  GrpcRingOptions base;
  for (int r = 0; r < n; ++r) {
    base.addresses.push_back(absl::StrCat("localhost:", (*ports)[r]));
    base.names.push_back(absl::StrCat("worker ", r));
  }
  std::vector<std::unique_ptr<ChunkMailbox>> mailboxes;
  std::vector<std::unique_ptr<CollectiveService>> services;
  std::vector<std::unique_ptr<grpc::Server>> servers;
  std::vector<std::unique_ptr<GrpcRingTransport>> transports;
  std::vector<std::unique_ptr<RingAllReduce>> rings;
  RingAllReduceOptions options;
  options.chunk_bytes = absl::GetFlag(FLAGS_chunk_bytes);
  options.timeout = absl::Seconds(60);
  for (int r = 0; r < n; ++r) {
    mailboxes.push_back(std::make_unique<ChunkMailbox>());
    services.push_back(std::make_unique<CollectiveService>(mailboxes[r].get(), (r + n - 1) % n));
    ServerOptions so;
    so.listen_address = base.addresses[r];
    so.services = {services[r].get()};
    absl::StatusOr<RunningServer> server = StartServer(so);
    if (!server.ok()) return out;
    servers.push_back(std::move(server->server));
    GrpcRingOptions o = base;
    o.rank = r;
    transports.push_back(*GrpcRingTransport::Create(o, mailboxes[r].get()));
    rings.push_back(std::make_unique<RingAllReduce>(transports[r].get(), options));
  }
  for (int64_t size : sizes) {
    std::vector<std::vector<float>> data(n, std::vector<float>(size / 4, 1.0f));
    // Every rank runs the same number of iterations: rank 0 decides, through a flag it
    // all-reduces with the data (its last element: rank 0 sets it to 0 or 1, the others
    // to 0), when time is up. One tensor, as gloo's peer reduces: a second one for the
    // flag would send every bucket through the fusion buffer (two extra copies).
    std::vector<int> iterations(n, 0);
    std::vector<absl::Status> status(n);
    absl::Time start;
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&, r] {
        float& flag = data[r].back();
        bool warm = false;
        absl::Time begin = absl::Now();
        while (true) {
          flag = (r == 0 && warm && absl::Now() - begin >= absl::Seconds(seconds)) ? 1 : 0;
          std::vector<absl::Span<float>> spans = {absl::MakeSpan(data[r])};
          status[r] = rings[r]->AllReduceSum(spans);
          if (!status[r].ok() || flag > 0) break;
          if (!warm) {
            warm = true;  // the first call connects; not timed
            begin = absl::Now();
            if (r == 0) start = begin;
          } else {
            ++iterations[r];
          }
        }
      });
    }
    for (auto& t : threads) t.join();
    const double elapsed = absl::ToDoubleSeconds(absl::Now() - start);
    bool ok = true;
    for (const absl::Status& s : status) {
      if (!s.ok()) {
        std::printf("ring n=%d bytes=%lld: %s\n", n, static_cast<long long>(size),
                    std::string(s.message()).c_str());
        ok = false;
      }
    }
    // The last (flag) call moved data too: count it.
    const double algbw = static_cast<double>(size) * (iterations[0] + 1) / elapsed / 1e9;
    out[size] = ok ? algbw * 2.0 * (n - 1) / n : -1;
  }
  for (auto& s : servers) s->Shutdown(std::chrono::system_clock::now());
  return out;
}

// (n, bytes) -> gloo busbw GB/s; empty when skipped (the reason is printed).
std::map<std::pair<int, int64_t>, double> RunGloo(const std::string& script, double seconds) {
  std::map<std::pair<int, int64_t>, double> out;
  if (script.empty()) {
    std::printf("gloo: bench/gloo_allreduce.py not found: skipped\n");
    return out;
  }
  const std::string cmd = absl::StrCat(absl::GetFlag(FLAGS_python), " ", script, " --ranks=",
                                       absl::GetFlag(FLAGS_ranks), " --sizes=",
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
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_ranks), ',')) {
    int n = 0;
    if (!absl::SimpleAtoi(s, &n) || n < 2) {
      std::fprintf(stderr, "allreduce_bandwidth: bad --ranks entry '%s'\n", std::string(s).c_str());
      return 2;
    }
    ranks.push_back(n);
  }
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_sizes), ',')) {
    int64_t b = 0;
    if (!absl::SimpleAtoi(s, &b) || b < 4) {
      std::fprintf(stderr, "allreduce_bandwidth: bad --sizes entry '%s'\n", std::string(s).c_str());
      return 2;
    }
    sizes.push_back(b);
  }
  const double seconds = absl::GetFlag(FLAGS_seconds);
  const double tcp = RawTcpLoopback(seconds);
  std::printf("raw TCP loopback, one stream: %.3f GB/s\n", tcp);
  std::fflush(stdout);
  std::map<std::pair<int, int64_t>, double> ring;
  for (int n : ranks) {
    for (const auto& [size, busbw] : RingBusBandwidth(n, sizes, seconds)) ring[{n, size}] = busbw;
  }
  const std::string script =
      FindPeerScript(absl::GetFlag(FLAGS_gloo_script), "bench/gloo_allreduce.py", argv0);
  const std::map<std::pair<int, int64_t>, double> gloo = RunGloo(script, seconds);
  std::printf("%5s %12s %14s %10s %14s %10s\n", "ranks", "bytes", "ring busbw GB/s", "% raw TCP",
              "gloo busbw GB/s", "x gloo");
  for (int n : ranks) {
    for (int64_t size : sizes) {
      const double r = ring.count({n, size}) ? ring[{n, size}] : -1;
      auto g = gloo.find({n, size});
      std::printf("%5d %12lld %14.3f %9.1f%%", n, static_cast<long long>(size), r,
                  tcp > 0 ? 100.0 * r / tcp : 0.0);
      if (g != gloo.end() && g->second > 0) {
        std::printf(" %14.3f %9.2fx\n", g->second, r / g->second);
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
  absl::ParseCommandLine(argc, argv);
  // gRPC's message buffers are above glibc's mmap threshold: keep them in the heap
  // (shared/notes/performance-facts.md: about 10x for 256 KiB - 16 MiB messages).
  pstrain::KeepLargeBlocksInHeap();
  return pstrain::Main(argv[0]);
}
