// checkpoint_throughput: a sharded checkpoint (format v2) written and restored by P ps
// tasks holding N MB of variables, next to a plain sequential write (with fsync) and
// read of the same bytes on the same disk, in the same run.
//
// P real ps services (VariableStore + CheckpointShards + PsServiceImpl behind StartServer,
// as the ps daemon runs them, each with the same --checkpoint_dir) listen on free
// loopback ports in this process; the chief's side is the chief's own code
// (ShardedVariables and Checkpointer over gRPC clients). The model is one Embedding table
// of --mb MB (rows of 64 floats) split into P shards, one per ps, with an optimizer that
// keeps slots (Adagrad: one accumulator per value, so the checkpoint holds twice the
// variables' bytes). Each round:
//   checkpoint write: Checkpointer::Write, every ps writing and fsyncing its shard file at
//     once, then the chief's manifest and commit (rename, fsync);
//   checkpoint restore: CheckpointReader::Open of the newest checkpoint and
//     Checkpointer::Restore, every ps reading and verifying its rows at once;
//   raw write / raw read: one file of the checkpoint's size, written sequentially in 16 MiB
//     blocks, fsynced, then read back the same way.
// Before each read the files read are dropped from the page cache
// (posix_fadvise(POSIX_FADV_DONTNEED) on clean pages needs no privileges), so both reads
// come from the disk; --drop_cache=false measures reads from memory instead. Rates are
// MB/s of the bytes on disk (1 MB = 10^6 bytes). Nothing here asserts a time.

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/checkpoint/checkpoint.h"
#include "common/checkpoint/shard_files.h"
#include "common/daemon/command_line.h"
#include "common/malloc_tuning.h"
#include "common/math/cpu_backend.h"
#include "common/model/job_spec.h"
#include "common/model/model.h"
#include "common/rpc/grpc_util.h"
#include "common/sharding/placement_policy.h"
#include "ps_server/checkpoint_shards.h"
#include "ps_server/client/checkpointer.h"
#include "ps_server/client/sharded_variables.h"
#include "ps_server/rpc/grpc_ps_client.h"
#include "ps_server/rpc/ps_service.h"
#include "ps_server/variable_store.h"

ABSL_FLAG(int64_t, mb, 256, "MB (2^20 bytes) of variable values over all ps tasks");
ABSL_FLAG(int, ps, 2, "ps tasks, each writing and restoring its own shard");
ABSL_FLAG(std::string, dir, "/var/tmp",
          "Folder on the disk to measure; the bench works in a fresh folder under it and "
          "removes it");
ABSL_FLAG(std::string, optimizer, "adagrad",
          "The ps's optimizer; its slots are checkpointed too (sgd: none, adagrad: one, "
          "adam: two per value)");
ABSL_FLAG(int, rounds, 2,
          "Times each measurement is made; the order alternates (checkpoint first, then raw "
          "first, ...) so that neither always runs on a disk the other just filled");
ABSL_FLAG(bool, drop_cache, true,
          "Drop the files read from the page cache first, so that reads come from the disk");

namespace pstrain {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kWidth = 64;
constexpr size_t kRawBlock = size_t{16} << 20;  // as the shard files' blocks

std::string ModelJob(int64_t rows, const std::string& optimizer) {
  return absl::StrCat(R"({"model": {"class_name": "Sequential", "config": {"layers": [
    {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 1]}},
    {"class_name": "Embedding", "config": {"name": "table", "input_dim": )",
                      rows, R"(, "output_dim": )", kWidth, R"(}},
    {"class_name": "Flatten", "config": {"name": "flat"}},
    {"class_name": "Dense", "config": {"name": "out", "units": 1}}]}},
    "compile": {"optimizer": ")",
                      optimizer, R"(", "loss": "mse"}})");
}

// Bytes of the regular files under `dir`.
int64_t FolderBytes(const std::string& dir) {
  int64_t bytes = 0;
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) bytes += static_cast<int64_t>(e.file_size());
  }
  return bytes;
}

// Drops `path`'s clean pages (every file under it) from the page cache.
void DropFromCache(const std::string& path) {
  if (!absl::GetFlag(FLAGS_drop_cache)) return;
  auto drop = [](const std::string& file) {
    const int fd = open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
  };
  if (fs::is_regular_file(path)) {
    drop(path);
    return;
  }
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(path)) {
    if (e.is_regular_file()) drop(e.path().string());
  }
}

// The plain baseline: `bytes` written to `path` sequentially in 16 MiB blocks, fsynced
// (file and folder), then read back the same way. Seconds of each, or -1 on an error.
struct RawTimes {
  double write_seconds = -1;
  double read_seconds = -1;
};

RawTimes RawWriteRead(const std::string& path, int64_t bytes) {
  RawTimes times;
  std::vector<char> block(kRawBlock);
  for (size_t i = 0; i < block.size(); ++i) block[i] = static_cast<char>(i * 131);
  absl::Time start = absl::Now();
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    std::perror(path.c_str());
    return times;
  }
  for (int64_t done = 0; done < bytes;) {
    const size_t want = static_cast<size_t>(std::min<int64_t>(block.size(), bytes - done));
    const ssize_t n = write(fd, block.data(), want);
    if (n <= 0) {
      std::perror("write");
      close(fd);
      return times;
    }
    done += n;
  }
  if (fsync(fd) != 0) std::perror("fsync");
  close(fd);
  const int dir_fd = open(fs::path(path).parent_path().c_str(), O_RDONLY | O_DIRECTORY);
  if (dir_fd >= 0) {
    fsync(dir_fd);
    close(dir_fd);
  }
  times.write_seconds = absl::ToDoubleSeconds(absl::Now() - start);

  DropFromCache(path);
  start = absl::Now();
  const int in = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) {
    std::perror(path.c_str());
    return times;
  }
  int64_t read_bytes = 0;
  while (true) {
    const ssize_t n = read(in, block.data(), block.size());
    if (n < 0) std::perror("read");
    if (n <= 0) break;
    read_bytes += n;
  }
  close(in);
  if (read_bytes == bytes) times.read_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  fs::remove(path);
  return times;
}

// P in-process ps tasks behind real gRPC servers on loopback, each writing its checkpoint
// shards into `root`, and the chief's view of them.
struct Cluster {
  std::vector<std::unique_ptr<VariableStore>> stores;
  std::vector<std::unique_ptr<CheckpointShards>> shards;
  std::vector<std::unique_ptr<PsServiceImpl>> services;
  std::vector<RunningServer> servers;
  std::vector<std::unique_ptr<PsClient>> clients;
  std::unique_ptr<ShardedVariables> variables;

  ~Cluster() {
    for (RunningServer& server : servers) server.server->Shutdown();
  }
};

absl::Status StartCluster(int num_ps, const std::string& root, const Model& model,
                          const JobSpec& job, Cluster* cluster) {
  std::vector<PsClient*> ps;
  for (int p = 0; p < num_ps; ++p) {
    cluster->stores.push_back(std::make_unique<VariableStore>());
    cluster->shards.push_back(std::make_unique<CheckpointShards>(
        cluster->stores.back().get(), root, CheckpointShards::Options()));
    cluster->services.push_back(
        std::make_unique<PsServiceImpl>(cluster->stores.back().get(), [](const std::string&) {}));
    cluster->services.back()->set_checkpoint_shards(cluster->shards.back().get());
    absl::StatusOr<RunningServer> server =
        StartServer({"127.0.0.1:0", {cluster->services.back().get()}});
    if (!server.ok()) return server.status();
    cluster->clients.push_back(CreateGrpcPsClient(
        p, absl::StrCat("127.0.0.1:", server->port), absl::Minutes(10)));
    cluster->servers.push_back(*std::move(server));
    ps.push_back(cluster->clients.back().get());
  }
  cluster->variables =
      std::make_unique<ShardedVariables>(&model, ps, job.optimizer, ConsistencyConfig());
  PlacementPolicy one_shard_per_ps;
  one_shard_per_ps.num_shards = num_ps;
  return cluster->variables->Create(one_shard_per_ps, 7);
}

void PrintRow(const char* what, int64_t bytes, double seconds, double raw_seconds) {
  const double rate = bytes / seconds / 1e6;
  const double raw_rate = bytes / raw_seconds / 1e6;
  std::printf("%-20s %12.3f %10.1f %12.1f %8.1f%%\n", what, seconds, rate, raw_rate,
              100.0 * rate / raw_rate);
  std::fflush(stdout);
}

int Main() {
  const int num_ps = absl::GetFlag(FLAGS_ps);
  const int64_t mb = absl::GetFlag(FLAGS_mb);
  if (num_ps < 1 || mb < 1) {
    std::fprintf(stderr, "--ps and --mb must be at least 1\n");
    return 2;
  }
  const int64_t rows = std::max<int64_t>(num_ps, (mb << 20) / (kWidth * 4));
  const std::string work =
      absl::StrCat(absl::GetFlag(FLAGS_dir), "/pstrain-checkpoint-bench-", getpid());
  const std::string root = work + "/checkpoints";
  std::error_code error;
  fs::create_directories(root, error);
  if (error) {
    std::fprintf(stderr, "%s: %s\n", root.c_str(), error.message().c_str());
    return 1;
  }
  auto cleanup = [&] { fs::remove_all(work, error); };

  absl::StatusOr<JobSpec> job = ParseJobSpec(ModelJob(rows, absl::GetFlag(FLAGS_optimizer)), "");
  if (!job.ok()) {
    std::fprintf(stderr, "%s\n", std::string(job.status().message()).c_str());
    cleanup();
    return 1;
  }
  std::unique_ptr<Backend> backend = CreateCpuBackend();
  absl::StatusOr<std::unique_ptr<Model>> model = Model::FromKerasJson(job->model, backend.get());
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", std::string(model.status().message()).c_str());
    cleanup();
    return 1;
  }
  int status = 0;
  {
    Cluster cluster;
    if (absl::Status started = StartCluster(num_ps, root, **model, *job, &cluster);
        !started.ok()) {
      std::fprintf(stderr, "%s\n", std::string(started.message()).c_str());
      cleanup();
      return 1;
    }
    Checkpointer::Options options;
    options.dir = root;
    options.keep = 1;
    Checkpointer checkpointer(options, &*job, cluster.variables.get());
    checkpointer.Start(0);

    std::printf("sharded checkpoint (v2) of a %lld x %lld table over %d ps (%s, one shard per\n"
                "ps), gRPC on loopback, in %s; raw: one file, 16 MiB writes, fsync; %s\n",
                static_cast<long long>(rows), static_cast<long long>(kWidth), num_ps,
                absl::GetFlag(FLAGS_optimizer).c_str(), work.c_str(),
                absl::GetFlag(FLAGS_drop_cache) ? "reads from the disk (page cache dropped)"
                                                : "reads from the page cache");
    std::printf("%-20s %12s %10s %12s %9s\n", "round / phase", "seconds", "MB/s", "raw MB/s",
                "% of raw");
    for (int round = 0; round < absl::GetFlag(FLAGS_rounds); ++round) {
      const bool checkpoint_first = round % 2 == 0;
      RawTimes raw;
      int64_t bytes = 0;
      double write_seconds = 0, restore_seconds = 0;
      for (int part = 0; part < 2; ++part) {
        if ((part == 0) != checkpoint_first) {
          // The raw file's size is the checkpoint's: the first round's when raw goes first.
          raw = RawWriteRead(work + "/raw", bytes > 0 ? bytes : FolderBytes(root));
          continue;
        }
        absl::Time start = absl::Now();
        absl::Status written = checkpointer.Write(0, round + 1, nullptr);
        write_seconds = absl::ToDoubleSeconds(absl::Now() - start);
        if (!written.ok()) {
          std::fprintf(stderr, "checkpoint write: %s\n", std::string(written.message()).c_str());
          status = 1;
          break;
        }
        const std::string path = checkpointer.last().path();
        bytes = FolderBytes(path);
        if (!fs::exists(path + "/" + ShardFileName(0))) {
          std::fprintf(stderr, "%s is not a sharded checkpoint\n", path.c_str());
          status = 1;
          break;
        }
        DropFromCache(path);
        start = absl::Now();
        absl::StatusOr<std::unique_ptr<CheckpointReader>> reader = checkpointer.OpenLatest();
        absl::Status restored = reader.ok() ? checkpointer.Restore(**reader) : reader.status();
        restore_seconds = absl::ToDoubleSeconds(absl::Now() - start);
        if (!restored.ok()) {
          std::fprintf(stderr, "checkpoint restore: %s\n", std::string(restored.message()).c_str());
          status = 1;
          break;
        }
      }
      if (status != 0) break;
      if (raw.write_seconds <= 0 || raw.read_seconds <= 0) {
        status = 1;
        break;
      }
      std::printf("round %d: %lld bytes (%s first)\n", round + 1, static_cast<long long>(bytes),
                  checkpoint_first ? "checkpoint" : "raw");
      PrintRow("  checkpoint write", bytes, write_seconds, raw.write_seconds);
      PrintRow("  checkpoint restore", bytes, restore_seconds, raw.read_seconds);
    }
  }
  cleanup();
  return status;
}

}  // namespace
}  // namespace pstrain

int main(int argc, char** argv) {
  pstrain::ParseCommandLineWithUsage(
      argc, argv,
      "checkpoint_throughput: a sharded checkpoint written and restored by P ps tasks, next to "
      "a plain sequential write and read of the same bytes.\n"
      "  bazel run //bench:checkpoint_throughput -- [--mb=256] [--ps=2] [--dir=/var/tmp]");
  pstrain::KeepLargeBlocksInHeap();
  return pstrain::Main();
}
