#ifndef PSTRAIN_CHIEF_DATA_POSITION_H_
#define PSTRAIN_CHIEF_DATA_POSITION_H_

// Where an epoch in progress stands, as a mid-epoch checkpoint records it (the metadata's
// "data_position"), so that a restore continues the epoch rather than starting it over:
//   {"epoch": E (0-based), "batch_size": B, "num_shards": N,
//    "next_step": [each shard's next step], "finished": [whether each shard is done],
//    "loss_sum", "correct", "samples", "steps": the epoch's figures so far}

#include <cstdint>

#include "absl/status/status.h"
#include "chief/shard_queue.h"
#include "common/checkpoint/checkpoint.h"
#include "nlohmann/json_fwd.hpp"
#include "proto/worker.pb.h"

namespace pstrain {

// Epoch `epoch` (0-based, in progress): each shard's position in `queue` and the
// epoch's `figures` so far.
nlohmann::json DataPosition(int epoch, int32_t batch_size, const ShardQueue& queue,
                            const RunStepsResponse& figures);

// The position `checkpoint` recorded for epoch `epoch` (0-based), or null when it has
// none for that epoch (it was written at an epoch's end). Points into the checkpoint.
const nlohmann::json* SavedDataPosition(const CheckpointReader& checkpoint, int epoch);

// Puts `queue` and `figures` where `position` (DataPosition's) says. All or nothing.
// Errors: INVALID_ARGUMENT a malformed position, or one of another batch size or number
//         of shards (it would name other batches).
absl::Status ResumeFrom(const nlohmann::json& position, int32_t batch_size, ShardQueue* queue,
                        RunStepsResponse* figures);

}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_DATA_POSITION_H_
