#include "common/dashboard/dashboard.h"

#include <algorithm>

#include "common/dashboard/dashboard_page.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

constexpr size_t kMaxStepPoints = 4000;

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

}  // namespace

Dashboard::Dashboard(Options options) : options_(std::move(options)) {}

void Dashboard::OnSteps(const StepsDone& steps) {
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  epoch_ = std::max(epoch_, steps.epoch);
  epochs_total_ = steps.epochs;
  global_step_ = std::max(global_step_, steps.global_step);
  if (steps.worker >= 0) worker_steps_[steps.worker] += steps.steps;
  if (progress_.empty() || steps.epoch > progress_["epoch"].get<int>() ||
      (steps.epoch == progress_["epoch"].get<int>() &&
       steps.epoch_step >= progress_["epoch_step"].get<int64_t>())) {
    progress_ = {{"epoch", steps.epoch},
                 {"epoch_step", steps.epoch_step},
                 {"epoch_steps", steps.epoch_steps},
                 {"elapsed_seconds", Seconds(steps.epoch_elapsed)},
                 {"loss", steps.epoch_loss},
                 {"accuracy", steps.epoch_accuracy}};
  }
  if (last_point_ == absl::InfinitePast()) {
    last_point_ = now;  // the clock starts with the first report
    return;
  }
  samples_since_point_ += steps.samples;
  if (now - last_point_ < absl::Milliseconds(250)) return;
  const double window_seconds = Seconds(now - last_point_);
  step_points_.push_back({static_cast<double>(steps.global_step), steps.loss,
                          samples_since_point_ / window_seconds, window_seconds});
  last_point_ = now;
  samples_since_point_ = 0;
  if (step_points_.size() >= kMaxStepPoints) {
    // Keep every other point: the chart keeps its shape over the whole run.
    size_t kept = 0;
    for (size_t i = 0; i < step_points_.size(); i += 2) step_points_[kept++] = step_points_[i];
    step_points_.resize(kept);
  }
}

void Dashboard::OnEpoch(const EpochSummary& s) {
  nlohmann::json epoch = {{"epoch", s.epoch},       {"loss", s.loss},
                          {"accuracy", s.accuracy}, {"steps", s.steps},
                          {"samples", s.samples},   {"seconds", Seconds(s.elapsed)}};
  if (s.has_validation) {
    epoch["val_loss"] = s.val_loss;
    epoch["val_accuracy"] = s.val_accuracy;
  }
  absl::MutexLock lock(&mu_);
  epochs_.push_back(std::move(epoch));
  epoch_ = std::max(epoch_, s.epoch);
  epochs_total_ = s.epochs;
}

void Dashboard::OnCheckpoint(const CheckpointEvent& c) {
  nlohmann::json checkpoint = {
      {"ok", c.ok},
      {"path", c.path},
      {"error", c.error},
      {"step", c.step},
      {"epoch", c.epoch},
      {"seconds", Seconds(c.took)},
      {"time", absl::FormatTime("%H:%M:%S", absl::Now(), absl::LocalTimeZone())}};
  absl::MutexLock lock(&mu_);
  checkpoints_.push_back(std::move(checkpoint));
}

nlohmann::json Dashboard::Data() const {
  nlohmann::json status =
      options_.status ? options_.status() : nlohmann::json(nlohmann::json::object());
  absl::MutexLock lock(&mu_);
  nlohmann::json workers = nlohmann::json::object();
  int64_t furthest = 0;
  for (const auto& [w, steps] : worker_steps_) furthest = std::max(furthest, steps);
  for (const auto& [w, steps] : worker_steps_) {
    // Staleness as the dashboard shows it: how many steps a worker is behind the one that
    // has run the most (a slow or lost worker stands out).
    workers[std::to_string(w)] = {{"steps", steps}, {"behind", furthest - steps}};
  }
  return {{"title", options_.title},
          {"epoch", epoch_},
          {"epochs", epochs_total_},
          {"global_step", global_step_},
          {"epochs_history", epochs_},
          {"steps", step_points_},
          {"checkpoints", checkpoints_},
          {"workers", std::move(workers)},
          {"progress", progress_},
          {"status", std::move(status)}};
}

std::optional<HttpPage> Dashboard::Handle(const std::string& path, const std::string&) const {
  if (path == "/" || path == "/index.html") {
    return HttpPage{200, "text/html; charset=utf-8", std::string(kDashboardPage)};
  }
  if (path == "/api/dashboard") {
    return HttpPage{200, "application/json",
                    Data().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)};
  }
  return std::nullopt;
}

}  // namespace pstrain
