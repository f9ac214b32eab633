#include "pstrain/fit.h"

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/memory_budget.h"
#include "common/model/job_spec.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "distribute/fit_test_util.h"
#include "distribute/mirrored_strategy.h"
#include "distribute/strategy.h"
#include "pstrain/internal/sync_strategy.h"

namespace pstrain {
namespace {

// Fit drives the public Strategy: the core strategies these tests were written with,
// behind it.
std::unique_ptr<distribute::Strategy> Public(std::unique_ptr<Strategy> core) {
  return distribute::internal::SyncStrategy::Over(std::move(core));
}

// A small model: 4 features -> 16 relu [-> dropout] -> 3 softmax.
nlohmann::json SmallModel(bool dropout) {
  nlohmann::json layers = nlohmann::json::array();
  layers.push_back({{"class_name", "InputLayer"},
                    {"config", {{"batch_input_shape", {nullptr, 4}}, {"name", "input"}}}});
  layers.push_back({{"class_name", "Dense"},
                    {"config", {{"name", "dense"}, {"units", 16}, {"activation", "relu"}}}});
  if (dropout) {
    layers.push_back(
        {{"class_name", "Dropout"}, {"config", {{"name", "dropout"}, {"rate", 0.2}}}});
  }
  layers.push_back({{"class_name", "Dense"},
                    {"config", {{"name", "dense_1"}, {"units", 3}, {"activation", "softmax"}}}});
  return {{"class_name", "Sequential"}, {"config", {{"name", "small"}, {"layers", layers}}}};
}

JobSpec MakeJob(nlohmann::json extra = nlohmann::json::object(), bool dropout = true,
                const std::string& loss = "sparse_categorical_crossentropy") {
  nlohmann::json j = {
      {"model", SmallModel(dropout)},
      {"compile",
       {{"optimizer", {{"class_name", "Adam"}, {"config", {{"learning_rate", 0.01}}}}},
        {"loss", loss},
        {"metrics", {"accuracy"}}}},
      {"fit", {{"epochs", 5}, {"batch_size", 16}}},
      {"seed", 7}};
  for (auto it = extra.begin(); it != extra.end(); ++it) j[it.key()] = it.value();
  absl::StatusOr<JobSpec> job = ParseJobSpec(j.dump(), ".");
  EXPECT_TRUE(job.ok()) << job.status();
  return *job;
}

// Three well separated Gaussian blobs in 4 dimensions: a linearly separable problem.
std::shared_ptr<const Dataset> Blobs(int64_t n, uint64_t seed, bool one_hot = false) {
  std::mt19937_64 engine(seed);
  std::normal_distribution<float> noise(0.0f, 0.3f);
  Tensor x({n, 4});
  Tensor y = one_hot ? Tensor({n, 3}) : Tensor({n});
  for (int64_t i = 0; i < n; ++i) {
    const int c = static_cast<int>(i % 3);
    for (int f = 0; f < 4; ++f) {
      x.data()[i * 4 + f] = (f == c ? 2.0f : 0.0f) + noise(engine);
    }
    if (one_hot) {
      y.data()[i * 3 + c] = 1.0f;
    } else {
      y.data()[i] = static_cast<float>(c);
    }
  }
  absl::StatusOr<Dataset> d = MakeDataset(std::move(x), std::move(y), 3);
  EXPECT_TRUE(d.ok()) << d.status();
  return std::make_shared<const Dataset>(*std::move(d));
}

TEST(FitTest, LowersLossAndLearnsSeparableProblem) {
  JobSpec job = MakeJob();
  FitData data{Blobs(600, 1), nullptr};
  std::unique_ptr<distribute::Strategy> strategy = Public(CreateDefaultStrategy());
  absl::StatusOr<FitResult> r = Fit(job, data, strategy.get(), FitOptions());
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->history.size(), 5u);
  EXPECT_LT(r->history.back().loss, 0.5 * r->history.front().loss);
  EXPECT_GT(r->history.back().accuracy, 0.95);
  EXPECT_FALSE(r->history.back().has_validation);
  EXPECT_EQ(r->history.front().samples, 600);
  EXPECT_EQ(r->steps, 5 * 38);  // ceil(600 / 16) per epoch, last batch short
}

// learning_rate 1e30 trained to "loss: -nan" and exited 0: the first non-finite gradient
// now fails the fit, naming it, unless the job skips such steps.
TEST(FitTest, NonFiniteGradientsFailTheFitOrAreSkipped) {
  const nlohmann::json huge_lr = {
      {"compile",
       {{"optimizer", {{"class_name", "SGD"}, {"config", {{"learning_rate", 1e30}}}}},
        {"loss", "sparse_categorical_crossentropy"}}}};
  FitData data{Blobs(120, 1), nullptr};
  for (bool two_replicas : {false, true}) {
    std::unique_ptr<distribute::Strategy> one = Public(CreateDefaultStrategy());
    std::unique_ptr<distribute::Strategy> two = Public(std::make_unique<TwoReplicaStrategy>());
    distribute::Strategy* strategy = two_replicas ? two.get() : one.get();
    absl::StatusOr<FitResult> failed = Fit(MakeJob(huge_lr, false), data, strategy, FitOptions());
    EXPECT_EQ(failed.status().code(), absl::StatusCode::kInvalidArgument) << failed.status();
    EXPECT_NE(failed.status().message().find("holds a non-finite value"), std::string::npos)
        << failed.status();
    EXPECT_EQ(failed.status().message().rfind("step ", 0), 0u) << failed.status();

    nlohmann::json skip = huge_lr;
    skip["nonfinite"] = "skip";
    absl::StatusOr<FitResult> skipped = Fit(MakeJob(skip, false), data, strategy, FitOptions());
    ASSERT_TRUE(skipped.ok()) << skipped.status();
    EXPECT_GT(skipped->nonfinite_skipped, 0);
    EXPECT_LT(skipped->nonfinite_skipped, skipped->steps);  // the first step was finite
    for (const Tensor& w : skipped->weights) {
      for (float x : w.values()) ASSERT_TRUE(std::isfinite(x));
    }
  }
  FitResult plain = *Fit(MakeJob(), data, Public(CreateDefaultStrategy()).get(), FitOptions());
  EXPECT_EQ(plain.nonfinite_skipped, 0);
}

// A label past the model's outputs was reported at a row of its shuffled batch.
TEST(FitTest, ABadLabelIsNamedInFileOrderBeforeTraining) {
  Dataset blobs = *Blobs(60, 3);
  blobs.y.data()[41] = 5.0f;  // the model has 3 outputs
  blobs.num_classes = 0;
  FitData data{std::make_shared<const Dataset>(std::move(blobs)), nullptr};
  std::unique_ptr<distribute::Strategy> strategy = Public(CreateDefaultStrategy());
  absl::StatusOr<FitResult> r = Fit(MakeJob(), data, strategy.get(), FitOptions());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "data.train: label 5 of example 41 (row 42 in file order) is not a class id in "
            "[0, 3) for the model's 3 outputs");
}

// A model too large for the memory budget is refused before its weights are allocated,
// naming its largest layer (a Dense(3e8) aborted with std::bad_alloc).
TEST(FitTest, AModelOverTheMemoryBudgetIsRefusedNamingTheLayer) {
  nlohmann::json wide = MakeJob({}, /*dropout=*/false).model;
  wide["config"]["layers"][1]["config"]["units"] = 300000000;
  absl::StatusOr<JobSpec> job = ParseJobSpec(
      nlohmann::json({{"model", wide}, {"compile", {{"loss", "sparse_categorical_crossentropy"}}}})
          .dump(),
      ".");
  ASSERT_TRUE(job.ok()) << job.status();
  FitData data{Blobs(60, 3), nullptr};
  std::unique_ptr<distribute::Strategy> strategy = Public(CreateDefaultStrategy());
  SetMemoryBudgetForTesting(int64_t{8} << 30);
  absl::StatusOr<FitResult> r = Fit(*job, data, strategy.get(), FitOptions());
  SetMemoryBudgetForTesting(0);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  EXPECT_NE(r.status().message().find("its largest layer, dense (Dense), needs"), std::string::npos)
      << r.status();
}

TEST(FitTest, DeterministicForASeed) {
  JobSpec job = MakeJob();
  FitData data{Blobs(300, 2), Blobs(90, 3)};
  std::unique_ptr<distribute::Strategy> strategy = Public(CreateDefaultStrategy());
  FitOptions options;
  options.epochs = 2;
  absl::StatusOr<FitResult> a = Fit(job, data, strategy.get(), options);
  absl::StatusOr<FitResult> b = Fit(job, data, strategy.get(), options);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->history.size(), b->history.size());
  for (size_t e = 0; e < a->history.size(); ++e) {
    EXPECT_EQ(a->history[e].loss, b->history[e].loss);
    EXPECT_EQ(a->history[e].val_loss, b->history[e].val_loss);
  }
  for (size_t v = 0; v < a->weights.size(); ++v) {
    EXPECT_EQ(a->weights[v].values(), b->weights[v].values()) << v;
  }
  // Another seed trains differently.
  JobSpec other = MakeJob({{"seed", 8}});
  absl::StatusOr<FitResult> c = Fit(other, data, strategy.get(), options);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(a->history.back().loss, c->history.back().loss);
}

TEST(FitTest, HonoursEpochsAndStepsPerEpoch) {
  JobSpec job = MakeJob({{"fit", {{"epochs", 3}, {"batch_size", 10}, {"steps_per_epoch", 7}}}});
  FitData data{Blobs(50, 4), nullptr};  // 5 batches per pass: 7 steps must repeat the data
  std::unique_ptr<distribute::Strategy> strategy = Public(CreateDefaultStrategy());
  int calls = 0;
  int64_t batches = 0;
  FitOptions options;
  options.on_epoch = [&](const EpochSummary& s) {
    ++calls;
    EXPECT_EQ(s.epoch, calls);
    EXPECT_EQ(s.epochs, 3);
    return true;
  };
  options.on_batch = [&](const BatchProgress& p) {
    ++batches;
    EXPECT_EQ(p.steps, 7);
  };
  absl::StatusOr<FitResult> r = Fit(job, data, strategy.get(), options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(batches, 21);
  EXPECT_EQ(r->steps, 21);
  for (const EpochSummary& s : r->history) EXPECT_EQ(s.samples, 70);

  // FitOptions::epochs overrides the job; the callback can stop early.
  options.epochs = 5;
  options.on_epoch = [](const EpochSummary& s) { return s.epoch < 2; };
  options.on_batch = nullptr;
  r = Fit(job, data, strategy.get(), options);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->history.size(), 2u);
  EXPECT_EQ(r->history.back().epochs, 5);
}

TEST(FitTest, ReportsValidationFigures) {
  JobSpec job = MakeJob();
  FitData data{Blobs(300, 5), Blobs(99, 6)};
  std::unique_ptr<distribute::Strategy> strategy = Public(CreateDefaultStrategy());
  absl::StatusOr<FitResult> r = Fit(job, data, strategy.get(), FitOptions());
  ASSERT_TRUE(r.ok()) << r.status();
  for (const EpochSummary& s : r->history) {
    EXPECT_TRUE(s.has_validation);
    EXPECT_GT(s.val_loss, 0.0);
    EXPECT_TRUE(std::isfinite(s.val_loss));
  }
  EXPECT_GT(r->history.back().val_accuracy, 0.95);
  EXPECT_LT(r->history.back().val_loss, r->history.front().val_loss);
  const std::string line = FormatEpochLine(r->history.back());
  EXPECT_NE(line.find("Epoch 5/5 - "), std::string::npos) << line;
  // Keras' timing: every step of the epoch, its seconds and time per step.
  EXPECT_NE(line.find(absl::StrCat(" - ", r->history.back().steps, "/",
                                   r->history.back().steps, " - ")),
            std::string::npos)
      << line;
  EXPECT_GT(r->history.back().steps, 0);
  EXPECT_NE(line.find("/step - loss: "), std::string::npos) << line;
  EXPECT_NE(line.find(" - val_accuracy: "), std::string::npos) << line;
}

TEST(FitTest, TwoReplicasMatchOneWithoutDropout) {
  // Without dropout, splitting the global batch and summing weighted gradients is the same
  // math as one replica, up to float rounding.
  JobSpec job = MakeJob({}, /*dropout=*/false);
  FitData data{Blobs(100, 9), nullptr};  // last batch of 4 rows splits 2 + 2
  FitOptions options;
  options.epochs = 2;
  std::unique_ptr<distribute::Strategy> one = Public(CreateDefaultStrategy());
  std::unique_ptr<distribute::Strategy> two = Public(std::make_unique<TwoReplicaStrategy>());
  absl::StatusOr<FitResult> a = Fit(job, data, one.get(), options);
  absl::StatusOr<FitResult> b = Fit(job, data, two.get(), options);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  EXPECT_NEAR(a->history.back().loss, b->history.back().loss, 1e-4);
  for (size_t v = 0; v < a->weights.size(); ++v) {
    for (int64_t i = 0; i < a->weights[v].num_elements(); ++i) {
      EXPECT_NEAR(a->weights[v].data()[i], b->weights[v].data()[i], 1e-3);
    }
  }
}

TEST(FitTest, OneHotLabelsFeedMse) {
  JobSpec job = MakeJob({{"one_hot_labels", true},
                         {"data",
                          {{"train", {{"type", "synthetic"}, {"samples", 64}, {"features", 4},
                                      {"classes", 3}, {"seed", 1}}}}}},
                        true, "mse");
  absl::StatusOr<FitData> data = LoadFitData(job, ".");
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->train->y.shape(), (std::vector<int64_t>{64, 3}));
  EXPECT_EQ(data->validation, nullptr);
  std::unique_ptr<distribute::Strategy> strategy = Public(CreateDefaultStrategy());
  FitOptions options;
  options.epochs = 1;
  EXPECT_TRUE(Fit(job, *data, strategy.get(), options).ok());

  // Class ids with MSE on 3 outputs: a clear error that says what to add.
  FitData sparse{Blobs(30, 1), nullptr};
  absl::StatusOr<FitResult> r = Fit(job, sparse, strategy.get(), options);
  ASSERT_TRUE(absl::IsInvalidArgument(r.status()));
  EXPECT_NE(r.status().message().find("one_hot_labels"), std::string::npos) << r.status();
}

TEST(FitTest, RejectsBadInputs) {
  std::unique_ptr<distribute::Strategy> strategy = Public(CreateDefaultStrategy());
  EXPECT_TRUE(absl::IsInvalidArgument(LoadFitData(MakeJob(), ".").status()));  // no data.train

  // Wrong feature count.
  Tensor x({5, 3});
  Tensor y({5});
  FitData narrow{std::make_shared<const Dataset>(*MakeDataset(x, y, 3)), nullptr};
  absl::StatusOr<FitResult> r = Fit(MakeJob(), narrow, strategy.get(), FitOptions());
  ASSERT_TRUE(absl::IsInvalidArgument(r.status()));
  EXPECT_NE(r.status().message().find("3 features"), std::string::npos) << r.status();
}

// scale_learning_rate multiplies the rate by the replicas in sync: on two replicas it
// trains exactly as twice the rate does (powers of two, so the products are exact), and on
// one replica exactly as the plain rate.
TEST(FitTest, ScaleLearningRateMultipliesTheRateByTheReplicas) {
  auto job_with = [](double learning_rate, bool scale) {
    return MakeJob({{"compile",
                     {{"optimizer",
                       {{"class_name", "Adam"}, {"config", {{"learning_rate", learning_rate}}}}},
                      {"loss", "sparse_categorical_crossentropy"},
                      {"metrics", {"accuracy"}}}},
                    {"scale_learning_rate", scale}},
                   false);
  };
  FitData data{Blobs(64, 3), nullptr};
  FitOptions options;
  options.epochs = 1;
  std::unique_ptr<distribute::Strategy> two = Public(std::make_unique<TwoReplicaStrategy>());
  std::unique_ptr<distribute::Strategy> one = Public(CreateDefaultStrategy());
  absl::StatusOr<FitResult> scaled_two = Fit(job_with(0.0078125, true), data, two.get(), options);
  absl::StatusOr<FitResult> doubled_two = Fit(job_with(0.015625, false), data, two.get(), options);
  absl::StatusOr<FitResult> plain_two = Fit(job_with(0.0078125, false), data, two.get(), options);
  absl::StatusOr<FitResult> scaled_one = Fit(job_with(0.0078125, true), data, one.get(), options);
  absl::StatusOr<FitResult> plain_one = Fit(job_with(0.0078125, false), data, one.get(), options);
  ASSERT_TRUE(scaled_two.ok() && doubled_two.ok() && plain_two.ok() && scaled_one.ok() &&
              plain_one.ok());
  ASSERT_EQ(scaled_two->weights.size(), doubled_two->weights.size());
  for (size_t i = 0; i < scaled_two->weights.size(); ++i) {
    EXPECT_EQ(scaled_two->weights[i].values(), doubled_two->weights[i].values()) << i;
    EXPECT_EQ(scaled_one->weights[i].values(), plain_one->weights[i].values()) << i;
  }
  EXPECT_NE(scaled_two->weights[0].values(), plain_two->weights[0].values());
}

// BatchNormalization's moving statistics are trained by their moving-average rule: after
// one step the moving mean is momentum * 0 + (1 - momentum) * the batch's mean; with two
// mirrored replicas each normalizes with its half's statistics, and the update folds in
// their slice-weighted mean (README, Layers).
TEST(FitTest, BatchNormalizationStatisticsFollowTheReplicas) {
  nlohmann::json model = {
      {"class_name", "Sequential"},
      {"config",
       {{"name", "bn"},
        {"layers",
         {{{"class_name", "InputLayer"}, {"config", {{"batch_shape", {nullptr, 4}}}}},
          {{"class_name", "BatchNormalization"}, {"config", {{"momentum", 0.5}}}},
          {{"class_name", "Dense"}, {"config", {{"units", 3}, {"activation", "softmax"}}}}}}}}};
  JobSpec job = MakeJob({{"model", model}, {"fit", {{"epochs", 1}, {"batch_size", 8},
                                                    {"steps_per_epoch", 1},
                                                    {"shuffle", false}}}});
  const std::shared_ptr<const Dataset> data = Blobs(8, 3);
  auto moments = [&](int64_t first, int64_t count, int f, double* mean, double* var) {
    *mean = 0;
    *var = 0;
    for (int64_t r = first; r < first + count; ++r) *mean += data->x.data()[r * 4 + f] / count;
    for (int64_t r = first; r < first + count; ++r) {
      *var += std::pow(data->x.data()[r * 4 + f] - *mean, 2) / count;
    }
  };
  std::unique_ptr<distribute::Strategy> single = Public(CreateDefaultStrategy());
  auto mirrored = CreateMirroredStrategy("cpu:0,cpu:1");
  ASSERT_TRUE(mirrored.ok()) << mirrored.status();
  std::unique_ptr<distribute::Strategy> two = Public(*std::move(mirrored));
  for (distribute::Strategy* strategy : {single.get(), two.get()}) {
    SCOPED_TRACE(strategy->name());
    absl::StatusOr<FitResult> r = Fit(job, FitData{data, nullptr}, strategy, FitOptions());
    ASSERT_TRUE(r.ok()) << r.status();
    // gamma, beta, moving_mean, moving_variance, dense kernel and bias.
    ASSERT_EQ(r->weights.size(), 6u);
    const int replicas = strategy->num_replicas_in_sync();
    for (int f = 0; f < 4; ++f) {
      double want_mean = 0, want_var = 0;
      for (int k = 0; k < replicas; ++k) {
        double mean, var;
        moments(k * 8 / replicas, 8 / replicas, f, &mean, &var);
        want_mean += mean / replicas;
        want_var += var / replicas;
      }
      EXPECT_NEAR(r->weights[2].data()[f], 0.5 * want_mean, 1e-5) << "feature " << f;
      EXPECT_NEAR(r->weights[3].data()[f], 0.5 + 0.5 * want_var, 1e-5) << "feature " << f;
    }
  }
}

}  // namespace
}  // namespace pstrain
