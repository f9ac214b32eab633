#ifndef PSTRAIN_COMMON_TRAINING_TRAINING_OBSERVER_H_
#define PSTRAIN_COMMON_TRAINING_TRAINING_OBSERVER_H_

// What a training run reports as it goes, to whatever watches it: Prometheus metrics,
// TensorBoard event files, a terminal progress bar, the dashboard. The parameter-server
// chief (chief/coordinator.h) and the one-process trainers (pstrain/fit.h through train)
// report the same events, so every strategy is watched the same way.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/training/epoch_summary.h"

namespace pstrain {

// Steps just done: one step of Fit, or one chunk of steps a worker ran for the chief.
struct StepsDone {
  int epoch = 0;  // 1-based
  int epochs = 0;
  int64_t global_step = 0;  // optimizer steps of the whole run, after these
  int64_t epoch_step = 0;   // steps of this epoch done, after these
  int64_t epoch_steps = 0;  // steps this epoch takes; 0 when not known yet
  int64_t steps = 0;        // in this report
  int64_t samples = 0;      // in this report
  double loss = 0;          // mean over this report's samples
  double epoch_loss = 0;    // running means over the epoch so far
  double epoch_accuracy = 0;
  absl::Duration epoch_elapsed;  // since the epoch's start
  int worker = -1;               // the chief: the worker that ran them; else -1
};

struct CheckpointEvent {
  bool ok = true;
  std::string path;   // the checkpoint written (empty when it failed)
  std::string error;  // why it failed
  int64_t step = 0;
  int epoch = 0;      // epochs done when it was taken
  absl::Duration took;
};

// Every method has an empty default; an observer overrides what it needs. Called on the
// trainer's threads (the chief: one per worker for OnSteps), so implementations are
// thread-safe and quick: nothing here may hold training up.
class TrainingObserver {
 public:
  virtual ~TrainingObserver() = default;
  virtual void OnSteps(const StepsDone& steps) {}
  virtual void OnEpoch(const EpochSummary& summary) {}
  virtual void OnCheckpoint(const CheckpointEvent& checkpoint) {}
  // A task stopped answering and its work went to others ("worker 1 (host:port)").
  virtual void OnTaskLost(const std::string& task_type, const std::string& task) {}
  // A failed ps answered again and training resumed (its shards restored if it lost them).
  virtual void OnPsRecovered() {}
};

// Passes every event to each observer in order. Observers are not owned.
class TrainingObservers : public TrainingObserver {
 public:
  explicit TrainingObservers(std::vector<TrainingObserver*> observers = {})
      : observers_(std::move(observers)) {}
  // Not thread-safe: add them all before training starts. Null is ignored.
  void Add(TrainingObserver* observer) {
    if (observer != nullptr) observers_.push_back(observer);
  }

  void OnSteps(const StepsDone& steps) override {
    for (TrainingObserver* o : observers_) o->OnSteps(steps);
  }
  void OnEpoch(const EpochSummary& summary) override {
    for (TrainingObserver* o : observers_) o->OnEpoch(summary);
  }
  void OnCheckpoint(const CheckpointEvent& checkpoint) override {
    for (TrainingObserver* o : observers_) o->OnCheckpoint(checkpoint);
  }
  void OnTaskLost(const std::string& task_type, const std::string& task) override {
    for (TrainingObserver* o : observers_) o->OnTaskLost(task_type, task);
  }
  void OnPsRecovered() override {
    for (TrainingObserver* o : observers_) o->OnPsRecovered();
  }

 private:
  std::vector<TrainingObserver*> observers_;
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_TRAINING_TRAINING_OBSERVER_H_
