#include "distribute/multi_worker_mirrored_strategy.h"

#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "distribute/allreduce/in_process_ring.h"
#include "distribute/fit.h"
#include "distribute/fit_test_util.h"

namespace pstrain {
namespace {

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
      MultiWorkerMirroredStrategy strategy(ring.transport(r), options);
      FitOptions fo;
      fo.sync_check_every = check_every;
      results[r] = Fit(job, data, &strategy, fo);
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

// N workers with per-replica batch b end where 1 replica with the global batch N*b does,
// and every worker holds bit-identical weights (checked after every step).
TEST(MultiWorkerMirroredTest, NWorkersMatchOneReplicaWithTheGlobalBatch) {
  FitData data{Blobs(300, 5), Blobs(60, 6)};
  for (int n : {2, 3, 4}) {
    JobSpec job = SmallJob(/*batch_size=*/8 * n, /*epochs=*/3, /*shuffle=*/true);
    DefaultStrategy one;
    absl::StatusOr<FitResult> single = Fit(job, data, &one, FitOptions());
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

TEST(MultiWorkerMirroredTest, WeightCheckCatchesADivergedWorker) {
  InProcessRing ring(2);
  std::vector<absl::Status> status(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      MultiWorkerMirroredStrategy s(ring.transport(r), MultiWorkerMirroredOptions());
      std::vector<float> w = {1.0f, 2.0f, r == 0 ? 3.0f : 3.0001f};
      status[r] = s.CheckInSync({absl::MakeConstSpan(w)});
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(absl::IsFailedPrecondition(status[r])) << status[r];
}

}  // namespace
}  // namespace pstrain
