// A job started from a .keras file whose Embedding table is large (500,000 x 64 floats,
// 122 MiB), on 1 chief, 2 ps and 1 worker as real processes on free ports: each ps reads
// only its own rows of the file (HDF5 hyperslabs: ps_server/keras_rows.h), so the chief
// never holds the table. Its peak resident memory (VmHWM, from the status it logs as it
// exits: the figures `psctl status` shows) stays well under the table's size, each ps's
// (the kernel's count as it exited) shows its half of it, and the chief's log says which
// way each ps got its rows.
// (Values bit for bit, on 2 and 3 ps and through the fallback of a ps that cannot reach
// the file: ps_server/client/sharded_variables_test.)

#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/checkpoint/keras_export.h"
#include "common/model/job_spec.h"
#include "common/model/model.h"
#include "deploy/local/process_group.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/cluster_test_util.h"
#include "tests/zipf_checkpoint.h"
#include "tests/ps_final_status.h"

namespace pstrain {
namespace {

constexpr int64_t kRows = 500000;
constexpr int64_t kWidth = 64;
constexpr int64_t kMiB = 1 << 20;

TEST(KerasInitialWeightsTest, EachPsReadsItsRowsAndTheChiefHoldsNoTable) {
  ZipfCheckpointSpec zipf;
  zipf.rows = kRows;
  zipf.width = kWidth;
  zipf.samples = 1000;
  absl::StatusOr<nlohmann::json> zipf_job = ZipfJob(zipf);
  ASSERT_TRUE(zipf_job.ok()) << zipf_job.status();
  nlohmann::json job = *std::move(zipf_job);
  job["compile"]["optimizer"] = "sgd";  // no slots: the ps hold the table and its update
  job["fit"]["batch_size"] = 128;
  const std::string dir = FreshTestDir("keras_initial_weights");

  // The model's weights as a .keras file: a table whose rows say where they are.
  {
    absl::StatusOr<JobSpec> spec = ParseJobSpec(job.dump(), dir);
    ASSERT_TRUE(spec.ok()) << spec.status();
    absl::StatusOr<std::unique_ptr<Model>> model = Model::FromKerasJson(spec->model, nullptr);
    ASSERT_TRUE(model.ok()) << model.status();
    std::vector<Tensor> weights;
    for (const VariableSpec& v : (*model)->variables()) {
      Tensor t(v.shape);
      for (int64_t i = 0; i < t.num_elements(); ++i) t.data()[i] = 0.001f * (i % 97) - 0.05f;
      weights.push_back(std::move(t));
    }
    const absl::Status written = ExportKerasModel(*spec, weights, dir + "/model.keras");
    ASSERT_TRUE(written.ok()) << written;
  }
  job["model"] = "model.keras";
  const std::string job_path = dir + "/job.json";
  std::ofstream(job_path) << job.dump();

  ProcessGroup group;
  StartTestCluster(group, 2, 1, {"--heartbeat_interval=200ms", "--chief_timeout=30s"},
                   {"--job=" + job_path});
  ProcessRun run = CollectRun(group, ScaledForSanitizers(absl::Minutes(3)), absl::Seconds(10));
  for (const auto& exit : run.exits) {
    EXPECT_EQ(exit.exit_code, 0) << exit.name << "\n" << run.stderr_of[exit.name];
  }
  const std::string& chief_log = run.stderr_of["chief"];
  for (int p = 0; p < 2; ++p) {
    EXPECT_TRUE(absl::StrContains(chief_log, absl::StrCat("ps task ", p)) &&
                absl::StrContains(chief_log, "read its rows of "))
        << chief_log;
  }
  EXPECT_FALSE(absl::StrContains(chief_log, "reads the file whole")) << chief_log;
  absl::StatusOr<ChiefStatusResponse> status = FinalChiefStatus(chief_log);
  ASSERT_TRUE(status.ok()) << status.status() << "\n" << chief_log;
  const int64_t table = kRows * kWidth * 4;
  // Each ps's peak from the kernel as it exited, not from its last heartbeat: the job is
  // short enough that a ps's last heartbeat may come before it had read its rows.
  int64_t ps_peak[2] = {0, 0};
  for (int p = 0; p < 2; ++p) ps_peak[p] = PeakResidentBytesOf(run, absl::StrCat("ps", p));
  const std::string figures = absl::StrCat(
      "peak MiB for a ", table / kMiB, " MiB table: chief ",
      status->chief_peak_resident_memory_bytes() / kMiB, ", ps ", ps_peak[0] / kMiB, " and ",
      ps_peak[1] / kMiB);
  // The chief read the file's config only: it stays under half the table (reading the
  // weights whole would have taken the whole table, twice over with the HDF5 image).
  EXPECT_GT(status->chief_peak_resident_memory_bytes(), 0) << figures;
  EXPECT_LT(status->chief_peak_resident_memory_bytes(), table / 2) << figures;
  // Each ps holds its half of the table.
  for (int p = 0; p < 2; ++p) EXPECT_GT(ps_peak[p], table / 2) << "ps " << p << ": " << figures;
  std::cout << figures << std::endl;
}

}  // namespace
}  // namespace pstrain
