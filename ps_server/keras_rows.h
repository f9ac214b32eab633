#ifndef PSTRAIN_PS_SERVER_KERAS_ROWS_H_
#define PSTRAIN_PS_SERVER_KERAS_ROWS_H_

// A ps creating its shards of a model that starts from a .keras file's weights by reading
// only its own rows of the file (common/checkpoint/keras_weights_h5.h
// ReadKerasWeightRows), so that no task, the chief included, holds a whole variable. The
// chief names the file and each shard's dataset and rows (CreateVariablesRequest's
// keras_file and KerasRows); when this ps cannot reach the file (FAILED_PRECONDITION) the
// chief sends the values instead (ps_server/client/sharded_variables.h).
//
// Thread-safety: as VariableStore::CreateVariables.

#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/checkpoint/keras_weights_h5.h"
#include "proto/ps.pb.h"
#include "ps_server/variable_store.h"

namespace pstrain {

// Reads `shards`' rows of `file` (each request's name is the shard's) and creates them in
// `store` with `optimizer` and `consistency`, all or nothing: nothing is created unless
// every shard was read. The request is checked before the file is opened (the shard
// names non-empty and distinct; the rest as ReadKerasWeightRows checks it).
// Errors: INVALID_ARGUMENT an empty or repeated shard name, or ReadKerasWeightRows'
//         (naming the shard or dataset); FAILED_PRECONDITION this ps cannot reach the file
//         or sees another one under its path; VariableStore::CreateVariables'.
absl::Status CreateVariablesFromKeras(VariableStore* store, const KerasWeightsFile& file,
                                      absl::Span<const KerasRowsRequest> shards,
                                      const OptimizerConfig& optimizer,
                                      const ConsistencyConfig& consistency);

}  // namespace pstrain

#endif  // PSTRAIN_PS_SERVER_KERAS_ROWS_H_
