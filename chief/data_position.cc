#include "chief/data_position.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

// obj[key] when obj is an object holding a number there, else `fallback`: checkpoint
// metadata is read from disk, and json::value would throw on another type.
int64_t IntegerOr(const nlohmann::json& obj, const char* key, int64_t fallback) {
  if (!obj.is_object() || !obj.contains(key) || !obj[key].is_number_integer()) return fallback;
  return obj[key].get<int64_t>();
}
double NumberOr(const nlohmann::json& obj, const char* key, double fallback) {
  if (!obj.is_object() || !obj.contains(key) || !obj[key].is_number()) return fallback;
  return obj[key].get<double>();
}

}  // namespace

nlohmann::json DataPosition(int epoch, int32_t batch_size, const ShardQueue& queue,
                            const RunStepsResponse& figures) {
  nlohmann::json next = nlohmann::json::array();
  nlohmann::json finished = nlohmann::json::array();
  for (const ShardQueue::Position& p : queue.Positions()) {
    next.push_back(p.next_step);
    finished.push_back(p.finished);
  }
  return {{"epoch", epoch},
          {"batch_size", batch_size},
          {"num_shards", next.size()},
          {"next_step", std::move(next)},
          {"finished", std::move(finished)},
          {"loss_sum", figures.loss_sum()},
          {"correct", figures.correct()},
          {"samples", figures.samples()},
          {"steps", figures.steps()}};
}

const nlohmann::json* SavedDataPosition(const CheckpointReader& checkpoint, int epoch) {
  const nlohmann::json& metadata = checkpoint.metadata();
  if (!metadata.is_object() || !metadata.contains("data_position")) return nullptr;
  const nlohmann::json& position = metadata["data_position"];
  if (!position.is_object() || IntegerOr(position, "epoch", -1) != epoch) return nullptr;
  return &position;
}

absl::Status ResumeFrom(const nlohmann::json& position, int32_t batch_size, ShardQueue* queue,
                        RunStepsResponse* figures) {
  if (!position.is_object() || !position.contains("next_step") ||
      !position["next_step"].is_array() || !position.contains("finished") ||
      !position["finished"].is_array() ||
      position["next_step"].size() != position["finished"].size()) {
    return absl::InvalidArgumentError("malformed data position");
  }
  if (IntegerOr(position, "batch_size", -1) != batch_size) {
    return absl::InvalidArgumentError(absl::StrCat("saved with batch size ",
                                                   IntegerOr(position, "batch_size", -1),
                                                   ", the job now has ", batch_size));
  }
  std::vector<ShardQueue::Position> positions;
  for (size_t i = 0; i < position["next_step"].size(); ++i) {
    const nlohmann::json& next = position["next_step"][i];
    const nlohmann::json& done = position["finished"][i];
    if (!next.is_number_integer() || !done.is_boolean()) {
      return absl::InvalidArgumentError("malformed data position");
    }
    positions.push_back({next.get<int64_t>(), done.get<bool>()});
  }
  PS_RETURN_IF_ERROR(queue->Resume(positions));
  figures->set_loss_sum(NumberOr(position, "loss_sum", 0.0));
  figures->set_correct(IntegerOr(position, "correct", 0));
  figures->set_samples(IntegerOr(position, "samples", 0));
  figures->set_steps(IntegerOr(position, "steps", 0));
  return absl::OkStatus();
}

}  // namespace pstrain
