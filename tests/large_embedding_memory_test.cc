// What each task holds of a large Embedding table, measured from outside by the kernel's
// own count: the same job (examples/zipf_embedding.json's model, few examples, 1 epoch)
// with a 100,000-row and a 2,000,000-row x 64 table, on 1 chief, 2 ps and 1 worker as real
// processes on free ports. The chief evaluates as a worker trains (dense variables whole,
// of the table only a validation batch's rows: ps_server/client/sharded_evaluator.h), and
// the ps tasks draw their own rows, so the chief's peak resident memory (VmHWM, from the
// status it logs as it exits: the same figures as `psctl status`) must not grow with the
// table, while each ps's grows with its rows.

#include <fstream>
#include <iostream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "deploy/local/process_group.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/cluster_test_util.h"
#include "tests/zipf_checkpoint.h"
#include "tests/ps_final_status.h"

namespace pstrain {
namespace {

constexpr int64_t kWidth = 64;
constexpr int64_t kMiB = 1 << 20;

struct PeakMemory {
  int64_t chief = 0;
  int64_t ps[2] = {0, 0};
};

// Runs the job with a `rows` x 64 table and reads the chief's peak resident memory from
// its final status, each ps's from its exit.
PeakMemory RunWithTable(int64_t rows) {
  PeakMemory peak;
  ZipfCheckpointSpec zipf;
  zipf.rows = rows;
  zipf.width = kWidth;
  zipf.samples = 2000;
  absl::StatusOr<nlohmann::json> zipf_job = ZipfJob(zipf);
  EXPECT_TRUE(zipf_job.ok()) << zipf_job.status();
  if (!zipf_job.ok()) return peak;
  nlohmann::json job = *std::move(zipf_job);
  job["compile"]["optimizer"] = "sgd";  // no slots: the ps hold the table and its update
  job["fit"]["batch_size"] = 128;
  const std::string dir = FreshTestDir(absl::StrCat("large_embedding_", rows));
  const std::string job_path = dir + "/job.json";
  std::ofstream(job_path) << job.dump();

  // The job ends with a sharded checkpoint that each ps writes itself: its rows go to disk
  // from where they are, without a second copy in memory.
  const std::string checkpoints = dir + "/checkpoints";
  ProcessGroup group;
  StartTestCluster(group, 2, 1, {"--heartbeat_interval=200ms", "--chief_timeout=30s"},
                   {"--job=" + job_path, "--checkpoint_dir=" + checkpoints}, {},
                   {"--checkpoint_dir=" + checkpoints});
  ProcessRun run = CollectRun(group, ScaledForSanitizers(absl::Minutes(3)), absl::Seconds(10));
  for (const auto& exit : run.exits) {
    EXPECT_EQ(exit.exit_code, 0) << exit.name << "\n" << run.stderr_of[exit.name];
  }
  // The job ran to its validation (the figures the chief evaluated by rows) and its
  // checkpoint, written by the ps tasks.
  EXPECT_GE(LastValAccuracy(run.stdout_of["chief"]), 0.0) << run.stdout_of["chief"];
  EXPECT_TRUE(absl::StrContains(run.stderr_of["chief"], " written (epoch 1"))
      << run.stderr_of["chief"];
  EXPECT_FALSE(absl::StrContains(run.stderr_of["chief"], "(format 1)")) << run.stderr_of["chief"];
  absl::StatusOr<ChiefStatusResponse> status = FinalChiefStatus(run.stderr_of["chief"]);
  EXPECT_TRUE(status.ok()) << status.status() << "\n" << run.stderr_of["chief"];
  if (!status.ok()) return peak;
  peak.chief = status->chief_peak_resident_memory_bytes();
  // Each ps's peak from the kernel as it exited: its last heartbeat (what the chief's
  // status shows) may come before the rows were drawn or the final checkpoint written.
  for (int p = 0; p < 2; ++p) peak.ps[p] = PeakResidentBytesOf(run, absl::StrCat("ps", p));
  return peak;
}

TEST(LargeEmbeddingMemoryTest, TheChiefHoldsNoMoreForATwentyTimesLargerTable) {
  const PeakMemory small = RunWithTable(100000);
  const PeakMemory large = RunWithTable(2000000);
  const std::string figures =
      absl::StrCat("peak MiB, 100k rows: chief ", small.chief / kMiB, ", ps ",
                   small.ps[0] / kMiB, " and ", small.ps[1] / kMiB, "; 2M rows: chief ",
                   large.chief / kMiB, ", ps ", large.ps[0] / kMiB, " and ", large.ps[1] / kMiB);
  ASSERT_GT(small.chief, 0) << figures;
  // The whole 2M x 64 table is 488 MiB. The chief's peak differs by less than a run's
  // noise (10%) plus 32 MiB: the Zipf generator's table of 8 bytes per id that makes the
  // validation data (15 MiB at 2M ids) is data, not the model.
  EXPECT_LT(large.chief, small.chief * 11 / 10 + 32 * kMiB) << figures;
  // Each ps holds its share of the table: (2M - 100k) rows x 64 floats over 2 ps is
  // 232 MiB more each; at least half of that shows.
  const int64_t more_per_ps = (2000000 - 100000) * kWidth * 4 / 2;
  for (int p = 0; p < 2; ++p) {
    EXPECT_GT(large.ps[p], small.ps[p] + more_per_ps / 2) << "ps " << p << ": " << figures;
    // ...and only once: the checkpoint at the end is written from the rows in place (a copy
    // of the shard for the write, as before, doubled the growth).
    EXPECT_LT(large.ps[p], small.ps[p] + more_per_ps * 3 / 2) << "ps " << p << ": " << figures;
  }
  std::cout << figures << std::endl;
}

}  // namespace
}  // namespace pstrain
