#include "distribute/multi_worker_mirrored_strategy.h"

#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "distribute/allreduce/in_process_ring.h"

namespace pstrain {
namespace {

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
