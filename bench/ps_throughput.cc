// ps_throughput: push-and-pull throughput of the parameter server over gRPC on loopback,
// next to a raw TCP loopback transfer measured in the same run.
//
// A real ps (VariableStore + PsServiceImpl behind StartServer, as the daemon runs it)
// listens on a free port; 1 or 2 client threads ("workers") each own a gRPC client and
// PushPull one variable of the given size as fast as they can for --seconds. Each
// PushPull moves the tensor twice (gradient up, value down), counted both ways. Two raw
// TCP baselines on 127.0.0.1: one socket pair moving bytes in both directions at once
// (the most loopback moves), and the push-and-pull's own exchange (send, then receive the
// same size back) over bare sockets with as many connections as workers. Then, where
// Debian's python3-torch is installed, the same cells over torch.distributed.rpc
// (bench/torch_rpc_pushpull.py: a ps process applying SGD, 1 or 2 client processes), and
// pstrain's rate next to it. Nothing here asserts a time: it prints tables.

#include <arpa/inet.h>
#include <malloc.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/python_peer.h"
#include "common/daemon/command_line.h"
#include "common/malloc_tuning.h"
#include "common/metrics/metrics_registry.h"
#include "common/rpc/call_authorizer.h"
#include "common/rpc/client_security.h"
#include "common/rpc/grpc_util.h"
#include "ps_server/ps_metrics.h"
#include "ps_server/rpc/grpc_ps_client.h"
#include "ps_server/rpc/ps_service.h"
#include "ps_server/variable_store.h"

ABSL_FLAG(std::string, sizes, "1024,1048576,67108864", "Tensor sizes in bytes");
ABSL_FLAG(std::string, workers, "1,2", "Concurrent pushing clients");
ABSL_FLAG(std::string, authorization, "both",
          "off: a plaintext ps without authorization; on: the daemons' default, every call "
          "carrying its identity and a MAC keyed by the job's token, checked against the role "
          "table before its handler, and every answer the ps's proof, checked by the client "
          "(common/rpc/call_authorizer.h); both: each cell twice, side by side");
ABSL_FLAG(double, seconds, 2.0, "Measuring time per cell");
ABSL_FLAG(int, rounds, 1,
          "Times each cell is measured; with --authorization=both the order alternates "
          "(off then on, then on then off, ...): the second cell of a pair measured slower "
          "whichever it was");
ABSL_FLAG(bool, one_malloc_arena, true,
          "mallopt(M_ARENA_MAX, 1): glibc serves a thread's blocks above 64 MiB with a fresh "
          "mmap (and a page fault per 4 KiB) from its per-thread arenas whatever the mmap "
          "threshold; one arena keeps them in the heap");
ABSL_FLAG(bool, metrics, true,
          "Count pushes, bytes and latency as ps_server does (false: as before metrics)");
ABSL_FLAG(int64_t, chunk_bytes, pstrain::kDefaultPushPullChunkBytes,
          "Chunk size of the streamed push-and-pull, both directions");
ABSL_FLAG(int64_t, stream_threshold_bytes, pstrain::GrpcPsClientOptions().stream_threshold_bytes,
          "Push-and-pulls of at least this many bytes are streamed in chunks; smaller ones "
          "are unary (a huge value measures the unary path alone)");
ABSL_FLAG(std::string, optimizer, "sgd",
          "The ps's optimizer (sgd, adam, adagrad, rmsprop): the cluster's jobs run adam, "
          "whose update costs several times sgd's");
ABSL_FLAG(bool, torch_peer, true,
          "After pstrain's table, measure the same cells over torch.distributed.rpc "
          "(bench/torch_rpc_pushpull.py; skipped without python3-torch) and print the ratios");
ABSL_FLAG(std::string, torch_script, "",
          "bench/torch_rpc_pushpull.py (found in runfiles by default).");
ABSL_FLAG(std::string, python, "/usr/bin/python3", "Python with Debian's python3-torch.");

namespace pstrain {
namespace {

struct Cell {
  double gbps = 0;          // bytes moved (both directions) per second, 1e9
  double round_trips = 0;   // PushPull calls per second, all workers together
  // Per call, this whole process (clients and ps): CPU time, and the times a thread gave
  // up the CPU to wait (a thread hop or a blocking wait each). Unlike the rate, these
  // hardly depend on what else the machine runs.
  double cpu_us_per_call = 0;
  double waits_per_call = 0;
};

struct Usage {
  double cpu_us = 0;
  double voluntary_switches = 0;
};

Usage ProcessUsage() {
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  Usage u;
  u.cpu_us = (r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1e6 + r.ru_utime.tv_usec + r.ru_stime.tv_usec;
  u.voluntary_switches = static_cast<double>(r.ru_nvcsw);
  return u;
}

// `n` TCP connections on 127.0.0.1: (client fd, server fd) each.
std::vector<std::pair<int, int>> LoopbackConnections(int n) {
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  listen(listener, n);
  std::vector<std::pair<int, int>> connections;
  for (int i = 0; i < n; ++i) {
    const int client = socket(AF_INET, SOCK_STREAM, 0);
    connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    connections.push_back({client, accept(listener, nullptr, nullptr)});
  }
  close(listener);
  return connections;
}

// One socket pair on loopback; each side sends `bytes` while reading what the other
// sends, for `seconds`. Returns GB/s counted in both directions.
double RawTcpLoopback(size_t chunk, double seconds) {
  const std::vector<std::pair<int, int>> pair = LoopbackConnections(1);
  const int a = pair[0].first;
  const int b = pair[0].second;

  std::atomic<bool> stop{false};
  std::atomic<int64_t> received{0};
  auto pump = [&](int fd) {
    std::vector<char> out(chunk, 1), in(chunk);
    std::thread reader([&] {
      while (true) {
        const ssize_t n = read(fd, in.data(), in.size());
        if (n <= 0) break;
        received += n;
      }
    });
    while (!stop) {
      size_t sent = 0;
      while (sent < out.size()) {
        const ssize_t n = write(fd, out.data() + sent, out.size() - sent);
        if (n <= 0) break;
        sent += n;
      }
    }
    shutdown(fd, SHUT_WR);
    reader.join();
  };
  const absl::Time start = absl::Now();
  std::thread ta(pump, a), tb(pump, b);
  absl::SleepFor(absl::Seconds(seconds));
  const int64_t at_stop = received.load();
  const double elapsed = absl::ToDoubleSeconds(absl::Now() - start);
  stop = true;
  ta.join();
  tb.join();
  close(a);
  close(b);
  return at_stop / elapsed / 1e9;
}

constexpr int kOne = 1;

// Reads or writes exactly `bytes` (false when the peer went away).
bool ReadFully(int fd, char* data, size_t bytes) {
  for (size_t done = 0; done < bytes;) {
    const ssize_t n = read(fd, data + done, bytes - done);
    if (n <= 0) return false;
    done += n;
  }
  return true;
}
bool WriteFully(int fd, const char* data, size_t bytes) {
  for (size_t done = 0; done < bytes;) {
    const ssize_t n = write(fd, data + done, bytes - done);
    if (n <= 0) return false;
    done += n;
  }
  return true;
}

// A push-and-pull's exchange over bare sockets: each of `workers` connections sends
// `bytes`, the server reads them all and sends `bytes` back, the client reads them all,
// again and again for `seconds`. What a push-and-pull could reach if the transport cost
// nothing beyond the kernel's loopback copies. Returns GB/s counted in both directions.
double RawTcpRoundTrips(size_t bytes, int workers, double seconds) {
  std::vector<int> clients, servers;
  for (const auto& [client, server] : LoopbackConnections(workers)) {
    clients.push_back(client);
    servers.push_back(server);
  }
  // As gRPC does: without it Nagle's algorithm and delayed ACKs stall each reply's tail.
  for (int fd : clients) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &kOne, sizeof(kOne));
  for (int fd : servers) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &kOne, sizeof(kOne));
  std::atomic<bool> stop{false};
  std::atomic<int64_t> exchanges{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, fd = servers[w]] {
      std::vector<char> buffer(bytes);
      while (ReadFully(fd, buffer.data(), bytes) && WriteFully(fd, buffer.data(), bytes)) {
      }
    });
    threads.emplace_back([&, fd = clients[w]] {
      std::vector<char> out(bytes, 1), in(bytes);
      while (!stop && WriteFully(fd, out.data(), bytes) && ReadFully(fd, in.data(), bytes)) {
        ++exchanges;
      }
      shutdown(fd, SHUT_WR);
    });
  }
  const absl::Time start = absl::Now();
  absl::SleepFor(absl::Seconds(seconds));
  const int64_t done = exchanges.load();
  const double elapsed = absl::ToDoubleSeconds(absl::Now() - start);
  stop = true;
  for (std::thread& t : threads) t.join();
  for (int fd : clients) close(fd);
  for (int fd : servers) close(fd);
  return 2.0 * bytes * done / elapsed / 1e9;
}

Cell PushPull(const std::string& address, size_t bytes, int workers, double seconds) {
  const int64_t elements = static_cast<int64_t>(bytes / sizeof(float));
  std::atomic<bool> stop{false};
  std::atomic<int64_t> calls{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      GrpcPsClientOptions options;
      options.chunk_bytes = absl::GetFlag(FLAGS_chunk_bytes);
      options.stream_threshold_bytes = absl::GetFlag(FLAGS_stream_threshold_bytes);
      std::unique_ptr<PsClient> client =
          CreateGrpcPsClient(0, address, absl::Seconds(60), options);
      const std::vector<NamedTensor> gradient = {
          {"v" + std::to_string(elements), Tensor({elements}, std::vector<float>(elements, 0.0f))}};
      while (!stop) {
        absl::StatusOr<std::vector<Tensor>> values = client->PushPull(gradient, 0);
        if (!values.ok()) {
          std::fprintf(stderr, "worker %d: %s\n", w, std::string(values.status().message()).c_str());
          return;
        }
        ++calls;
      }
    });
  }
  // The window starts once every worker completed a call (its channel is connected).
  while (calls.load() < workers) absl::SleepFor(absl::Milliseconds(1));
  const absl::Time start = absl::Now();
  const int64_t calls_before = calls.load();
  const Usage usage_before = ProcessUsage();
  absl::SleepFor(absl::Seconds(seconds));
  // Large tensors take longer than the window per call: wait for a few whole calls (at
  // most a minute) so the figure is not zero.
  while (calls.load() < 2 * workers && absl::Now() - start < absl::Minutes(1)) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  const int64_t done = calls.load() - calls_before;
  const Usage usage_after = ProcessUsage();
  const double elapsed = absl::ToDoubleSeconds(absl::Now() - start);
  stop = true;
  for (std::thread& t : threads) t.join();
  Cell cell;
  cell.round_trips = done / elapsed;
  cell.gbps = cell.round_trips * 2.0 * static_cast<double>(elements * sizeof(float)) / 1e9;
  if (done > 0) {
    cell.cpu_us_per_call = (usage_after.cpu_us - usage_before.cpu_us) / done;
    cell.waits_per_call =
        (usage_after.voluntary_switches - usage_before.voluntary_switches) / done;
  }
  return cell;
}

// VariableStore::Push of one zero gradient of `elements` floats, in this process, as fast
// as one thread can for `seconds`: the ps's own share of a push-and-pull (the checks and
// the update, no gRPC), in pushes per second.
double StorePushes(VariableStore* store, int64_t elements, double seconds) {
  const std::vector<NamedTensor> gradient = {
      {"v" + std::to_string(elements), Tensor({elements}, std::vector<float>(elements, 0.0f))}};
  const absl::Time start = absl::Now();
  int64_t pushes = 0;
  while (pushes < 2 || absl::Now() - start < absl::Seconds(seconds)) {
    if (absl::Status s = store->Push(gradient); !s.ok()) {
      std::fprintf(stderr, "store push: %s\n", std::string(s.message()).c_str());
      return 0;
    }
    ++pushes;
  }
  return pushes / absl::ToDoubleSeconds(absl::Now() - start);
}

// One cell of the same push-and-pull over torch.distributed.rpc.
struct TorchCell {
  double round_trips = 0;      // push-and-pulls per second, all clients together
  double cpu_us_per_call = 0;  // the ps's and every client's CPU time per call
};

// Runs bench/torch_rpc_pushpull.py for --sizes, --workers and --seconds: (bytes, workers)
// -> its cell. Empty when it is skipped or fails (the reason is printed).
std::map<std::pair<size_t, int>, TorchCell> RunTorchPeer(const char* argv0) {
  std::map<std::pair<size_t, int>, TorchCell> out;
  const std::string script =
      FindPeerScript(absl::GetFlag(FLAGS_torch_script), "bench/torch_rpc_pushpull.py", argv0);
  if (script.empty()) {
    std::printf("torch.rpc: bench/torch_rpc_pushpull.py not found: skipped\n");
    return out;
  }
  const std::string cmd = absl::StrCat(
      absl::GetFlag(FLAGS_python), " ", script, " --sizes=", absl::GetFlag(FLAGS_sizes),
      " --workers=", absl::GetFlag(FLAGS_workers), " --seconds=", absl::GetFlag(FLAGS_seconds));
  std::printf("torch.rpc peer: %s\n", cmd.c_str());
  std::fflush(stdout);
  const bool ran = RunPeer(cmd, [&out](const char* line) {
    int workers = 0;
    unsigned long long bytes = 0;
    TorchCell cell;
    if (std::sscanf(line, "torch_rpc workers=%d bytes=%llu pushpull_per_s=%lf cpu_us_per_call=%lf",
                    &workers, &bytes, &cell.round_trips, &cell.cpu_us_per_call) != 4) {
      return false;
    }
    out[{static_cast<size_t>(bytes), workers}] = cell;
    return true;
  });
  if (!ran) {
    std::printf("torch.rpc: cannot run %s: skipped\n", cmd.c_str());
  } else if (out.empty()) {
    std::printf("torch.rpc: no figures from %s: skipped\n", cmd.c_str());
  }
  return out;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 == 1 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// pstrain's cells (the median of --rounds) next to torch.rpc's, one row per auth mode.
void PrintTorchComparison(const std::map<std::tuple<size_t, int, bool>, std::vector<Cell>>& ours,
                          const std::map<std::pair<size_t, int>, TorchCell>& torch) {
  std::printf(
      "pstrain vs torch.distributed.rpc (TensorPipe), the same cells measured after\n"
      "pstrain's; x torch: pstrain's pushpull/s over torch's; cpu us/call: pstrain's\n"
      "process, torch's ps and client processes summed%s\n",
      absl::GetFlag(FLAGS_rounds) > 1 ? "; pstrain: medians of --rounds" : "");
  std::printf("%10s %8s %5s %14s %14s %8s %14s %14s\n", "bytes", "workers", "auth", "pushpull/s",
              "torch pp/s", "x torch", "cpu us/call", "torch cpu us");
  for (const auto& [key, cells] : ours) {
    const auto& [bytes, workers, auth] = key;
    const auto it = torch.find({bytes, workers});
    if (it == torch.end()) continue;
    std::vector<double> rates, cpus;
    for (const Cell& c : cells) {
      rates.push_back(c.round_trips);
      cpus.push_back(c.cpu_us_per_call);
    }
    const double rate = Median(rates);
    std::printf("%10zu %8d %5s %14.1f %14.1f %7.2fx %14.1f %14.1f\n", bytes, workers,
                auth ? "on" : "off", rate, it->second.round_trips,
                it->second.round_trips > 0 ? rate / it->second.round_trips : 0.0, Median(cpus),
                it->second.cpu_us_per_call);
  }
}

int Main(const char* argv0) {
  std::vector<size_t> sizes;
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_sizes), ',')) {
    sizes.push_back(std::stoull(std::string(s)));
  }
  std::vector<int> worker_counts;
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_workers), ',')) {
    worker_counts.push_back(std::stoi(std::string(s)));
  }
  const double seconds = absl::GetFlag(FLAGS_seconds);

  VariableStore store;
  PsServiceImpl service(&store, [](const std::string&) {});
  service.set_chunk_bytes(absl::GetFlag(FLAGS_chunk_bytes));
  // As ps_server counts them: every push timed and counted, every pull's bytes.
  MetricsRegistry registry;
  PsMetrics metrics(&registry, &store);
  if (absl::GetFlag(FLAGS_metrics)) service.set_metrics(&metrics);
  absl::StatusOr<RunningServer> server = StartServer({"127.0.0.1:0", {&service}});
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", std::string(server.status().message()).c_str());
    return 1;
  }
  const std::string address = "127.0.0.1:" + std::to_string(server->port);
  // The same store behind a second server that authorizes every call as a daemon's does
  // (a gRPC service belongs to one server, hence a second service object).
  const std::string mode = absl::GetFlag(FLAGS_authorization);
  if (mode != "off" && mode != "on" && mode != "both") {
    std::fprintf(stderr, "--authorization must be off, on or both\n");
    return 2;
  }
  constexpr char kToken[] = "ps-throughput-bench-token-0123456789";
  PsServiceImpl authorized_service(&store, [](const std::string&) {});
  authorized_service.set_chunk_bytes(absl::GetFlag(FLAGS_chunk_bytes));
  if (absl::GetFlag(FLAGS_metrics)) authorized_service.set_metrics(&metrics);
  ServerOptions authorized_options;
  authorized_options.listen_address = "127.0.0.1:0";
  authorized_options.services = {&authorized_service};
  authorized_options.credentials =
      AuthorizingServerCredentials(std::make_shared<CallAuthorizer>(kToken));
  absl::StatusOr<RunningServer> authorized = StartServer(authorized_options);
  if (!authorized.ok()) {
    std::fprintf(stderr, "%s\n", std::string(authorized.status().message()).c_str());
    return 1;
  }
  const std::string authorized_address = "127.0.0.1:" + std::to_string(authorized->port);
  std::vector<bool> auth_modes;
  if (mode != "on") auth_modes.push_back(false);
  if (mode != "off") auth_modes.push_back(true);
  OptimizerConfig optimizer;
  optimizer.set_name(absl::GetFlag(FLAGS_optimizer));
  optimizer.set_learning_rate(0.01f);
  std::vector<NamedTensor> variables;
  for (size_t bytes : sizes) {
    const int64_t elements = static_cast<int64_t>(bytes / sizeof(float));
    variables.push_back({"v" + std::to_string(elements), Tensor({elements})});
  }
  if (absl::Status s = store.CreateVariables(std::move(variables), optimizer); !s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 1;
  }

  std::printf("ps push+pull over gRPC on loopback vs raw TCP loopback (both directions counted)\n");
  std::printf("streamed in %lld-byte chunks from %lld bytes up (smaller: unary); %s\n",
              static_cast<long long>(absl::GetFlag(FLAGS_chunk_bytes)),
              static_cast<long long>(absl::GetFlag(FLAGS_stream_threshold_bytes)),
              absl::GetFlag(FLAGS_one_malloc_arena) ? "one malloc arena" : "glibc's arenas");
  std::printf("raw TCP: one socket pair streaming both ways at once; raw exchange: the same\n"
              "send-then-receive round trips as a push-and-pull, over bare sockets\n");
  std::printf("auth on: every call carries a worker identity and a MAC keyed by the job's\n"
              "token, checked by the ps in gRPC's auth filter before its handler, and every\n"
              "answer the ps's proof, checked by the client (as the daemons run by default)\n");
  std::printf("store push/s: VariableStore::Push of the same gradient alone, one thread in\n"
              "this process (the ps's checks and update, no gRPC); optimizer %s\n",
              optimizer.name().c_str());
  std::printf("cpu us/call, waits/call: this process's CPU time and voluntary context switches\n"
              "(threads blocking: wake-ups, hops) per push-and-pull, clients and ps together\n");
  std::printf("%10s %8s %5s %14s %12s %14s %8s %16s %9s %13s %12s %11s\n", "bytes", "workers",
              "auth", "pushpull/s", "GB/s", "raw TCP GB/s", "%raw", "raw exch. GB/s", "%exch.",
              "store push/s", "cpu us/call", "waits/call");
  // (bytes, workers, auth) -> every round's cell, for the comparison with torch.rpc.
  std::map<std::tuple<size_t, int, bool>, std::vector<Cell>> measured;
  for (size_t bytes : sizes) {
    const double raw = RawTcpLoopback(std::min<size_t>(bytes, 4 << 20), seconds / 2);
    const double store_pushes =
        StorePushes(&store, static_cast<int64_t>(bytes / sizeof(float)), seconds / 2);
    for (int workers : worker_counts) {
      const double exchange = RawTcpRoundTrips(bytes, workers, seconds / 2);
      std::vector<bool> order;
      for (int round = 0; round < absl::GetFlag(FLAGS_rounds); ++round) {
        if (round % 2 == 0) {
          order.insert(order.end(), auth_modes.begin(), auth_modes.end());
        } else {
          order.insert(order.end(), auth_modes.rbegin(), auth_modes.rend());
        }
      }
      for (bool auth : order) {
        // Read by the clients' channels, made as PushPull starts its workers.
        ClientSecurity security;
        if (auth) {
          security = {kToken, {Role::kWorker, 0}};
          security.require_server_proof = true;  // as a daemon's clients
        }
        SetClientSecurity(security);
        const Cell cell = PushPull(auth ? authorized_address : address, bytes, workers, seconds);
        measured[{bytes, workers, auth}].push_back(cell);
        std::printf("%10zu %8d %5s %14.1f %12.3f %14.3f %7.1f%% %16.3f %8.1f%% %13.1f %12.1f %11.2f\n",
                    bytes, workers, auth ? "on" : "off", cell.round_trips, cell.gbps, raw,
                    100.0 * cell.gbps / raw, exchange, 100.0 * cell.gbps / exchange,
                    store_pushes, cell.cpu_us_per_call, cell.waits_per_call);
        std::fflush(stdout);
      }
    }
  }
  authorized->server->Shutdown();
  server->server->Shutdown();
  if (absl::GetFlag(FLAGS_torch_peer) && optimizer.name() != "sgd") {
    std::printf("torch.rpc: its ps applies SGD only: skipped with --optimizer=%s\n",
                optimizer.name().c_str());
  } else if (absl::GetFlag(FLAGS_torch_peer)) {
    const std::map<std::pair<size_t, int>, TorchCell> torch = RunTorchPeer(argv0);
    if (!torch.empty()) PrintTorchComparison(measured, torch);
  }
  return 0;
}

}  // namespace
}  // namespace pstrain

int main(int argc, char** argv) {
  pstrain::ParseCommandLineWithUsage(
      argc, argv,
      "ps_throughput: push-and-pull throughput of the parameter server over gRPC on loopback, next "
      "to raw TCP and torch.distributed.rpc.\n  bazel run //bench:ps_throughput -- [flags]");
  pstrain::KeepLargeBlocksInHeap();
  if (absl::GetFlag(FLAGS_one_malloc_arena)) mallopt(M_ARENA_MAX, 1);
  return pstrain::Main(argv[0]);
}
