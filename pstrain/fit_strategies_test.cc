// Fit under mirrored and multi_worker_mirrored (the core strategies behind the public
// one, as a test makes them: threads, and workers over an in-process ring) ends where one
// replica with the global batch does.

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "distribute/allreduce/in_process_ring.h"
#include "distribute/fit_test_util.h"
#include "distribute/mirrored_strategy.h"
#include "distribute/multi_worker_mirrored_strategy.h"
#include "distribute/strategy.h"
#include "gtest/gtest.h"
#include "pstrain/fit.h"
#include "pstrain/internal/sync_strategy.h"

namespace pstrain {
namespace {

std::unique_ptr<distribute::Strategy> Public(std::unique_ptr<Strategy> core) {
  return distribute::internal::SyncStrategy::Over(std::move(core));
}

// K replicas with per-replica batch b end where 1 replica with batch K*b does.
TEST(FitStrategiesTest, MirroredKReplicasMatchOneReplicaWithTheGlobalBatch) {
  FitData data{Blobs(300, 5), Blobs(60, 6)};
  for (int k : {2, 3, 4}) {
    JobSpec job = SmallJob(/*batch_size=*/8 * k, /*epochs=*/3, /*shuffle=*/true);
    absl::StatusOr<FitResult> single =
        Fit(job, data, Public(CreateDefaultStrategy()).get(), FitOptions());
    ASSERT_TRUE(single.ok()) << single.status();
    std::vector<std::string> devices;
    for (int i = 0; i < k; ++i) devices.push_back(absl::StrCat("cpu:", i));
    absl::StatusOr<FitResult> multi =
        Fit(job, data, Public(std::make_unique<MirroredStrategy>(devices)).get(), FitOptions());
    ASSERT_TRUE(multi.ok()) << multi.status();
    EXPECT_EQ(multi->steps, single->steps);
    EXPECT_LT(MaxAbsDiff(single->weights, multi->weights), 1e-4) << k << " replicas";
    EXPECT_NEAR(multi->history.back().loss, single->history.back().loss, 1e-4);
    EXPECT_EQ(multi->history.back().samples, 300);
    EXPECT_GT(multi->history.back().val_accuracy, 0.8);
  }
}

// Trains `job` on N workers (threads over the in-process ring); returns each's result.
std::vector<absl::StatusOr<FitResult>> TrainOnRing(const JobSpec& job, const FitData& data,
                                                   int n, int64_t check_every) {
  InProcessRing ring(n);
  std::vector<absl::StatusOr<FitResult>> results(n, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      MultiWorkerMirroredOptions options;
      options.ring.timeout = absl::Seconds(20);
      options.ring.chunk_bytes = 64;  // several chunks and buckets even for a tiny model
      options.ring.bucket_bytes = 4 * 50;
      std::unique_ptr<distribute::Strategy> strategy =
          Public(std::make_unique<MultiWorkerMirroredStrategy>(ring.transport(r), options));
      FitOptions fo;
      fo.sync_check_every = check_every;
      results[r] = Fit(job, data, strategy.get(), fo);
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

// N workers with per-replica batch b end where 1 replica with the global batch N*b does,
// and every worker holds bit-identical weights (checked after every step).
TEST(FitStrategiesTest, MultiWorkerMirroredNWorkersMatchOneReplicaWithTheGlobalBatch) {
  FitData data{Blobs(300, 5), Blobs(60, 6)};
  for (int n : {2, 3, 4}) {
    JobSpec job = SmallJob(/*batch_size=*/8 * n, /*epochs=*/3, /*shuffle=*/true);
    absl::StatusOr<FitResult> single =
        Fit(job, data, Public(CreateDefaultStrategy()).get(), FitOptions());
    ASSERT_TRUE(single.ok()) << single.status();
    std::vector<absl::StatusOr<FitResult>> results = TrainOnRing(job, data, n, 1);
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(results[r].ok()) << "worker " << r << ": " << results[r].status();
      EXPECT_EQ(results[r]->steps, single->steps);
      EXPECT_LT(MaxAbsDiff(single->weights, results[r]->weights), 1e-4) << n << " workers";
      EXPECT_EQ(MaxAbsDiff(results[0]->weights, results[r]->weights), 0.0);
      // Metrics cover every replica of every worker.
      EXPECT_EQ(results[r]->history.back().samples, 300);
      EXPECT_NEAR(results[r]->history.back().loss, single->history.back().loss, 1e-4);
      EXPECT_EQ(results[r]->history.back().val_accuracy, results[0]->history.back().val_accuracy);
    }
  }
}

}  // namespace
}  // namespace pstrain
