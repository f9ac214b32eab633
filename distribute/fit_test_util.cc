#include "distribute/fit_test_util.h"

#include <cmath>
#include <limits>
#include <random>
#include <utility>

#include "nlohmann/json.hpp"

namespace pstrain {

JobSpec SmallJob(int batch_size, int epochs, bool shuffle) {
  nlohmann::json layers = nlohmann::json::array();
  layers.push_back({{"class_name", "InputLayer"},
                    {"config", {{"batch_input_shape", {nullptr, 4}}, {"name", "input"}}}});
  layers.push_back({{"class_name", "Dense"},
                    {"config", {{"name", "dense"}, {"units", 16}, {"activation", "relu"}}}});
  layers.push_back({{"class_name", "Dense"},
                    {"config", {{"name", "dense_1"}, {"units", 3}, {"activation", "softmax"}}}});
  nlohmann::json j = {
      {"model",
       {{"class_name", "Sequential"}, {"config", {{"name", "small"}, {"layers", layers}}}}},
      {"compile",
       {{"optimizer", {{"class_name", "Adam"}, {"config", {{"learning_rate", 0.01}}}}},
        {"loss", "sparse_categorical_crossentropy"},
        {"metrics", {"accuracy"}}}},
      {"fit", {{"epochs", epochs}, {"batch_size", batch_size}, {"shuffle", shuffle}}},
      {"seed", 7}};
  absl::StatusOr<JobSpec> job = ParseJobSpec(j.dump(), ".");
  return *std::move(job);  // a fixed, valid spec
}

std::shared_ptr<const Dataset> Blobs(int64_t n, uint64_t seed) {
  std::mt19937_64 engine(seed);
  std::normal_distribution<float> noise(0.0f, 0.5f);
  Tensor x({n, 4});
  Tensor y({n});
  for (int64_t i = 0; i < n; ++i) {
    const int c = static_cast<int>(i % 3);
    for (int f = 0; f < 4; ++f) x.data()[i * 4 + f] = (f == c ? 1.5f : 0.0f) + noise(engine);
    y.data()[i] = static_cast<float>(c);
  }
  absl::StatusOr<Dataset> d = MakeDataset(std::move(x), std::move(y), 3);
  return std::make_shared<const Dataset>(*std::move(d));
}

double MaxAbsDiff(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double worst = 0;
  for (size_t v = 0; v < a.size(); ++v) {
    if (a[v].num_elements() != b[v].num_elements()) {
      return std::numeric_limits<double>::infinity();
    }
    for (int64_t i = 0; i < a[v].num_elements(); ++i) {
      worst = std::max(worst, std::abs(static_cast<double>(a[v].data()[i]) - b[v].data()[i]));
    }
  }
  return worst;
}

}  // namespace pstrain
