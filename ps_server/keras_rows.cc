#include "ps_server/keras_rows.h"

#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pstrain {

absl::Status CreateVariablesFromKeras(VariableStore* store, const KerasWeightsFile& file,
                                      absl::Span<const KerasRowsRequest> shards,
                                      const OptimizerConfig& optimizer,
                                      const ConsistencyConfig& consistency) {
  // Before the file is read: a repeated name would be refused by the store only after
  // every shard's rows were read.
  absl::flat_hash_set<std::string> names;
  for (const KerasRowsRequest& shard : shards) {
    if (shard.name.empty() || !names.insert(shard.name).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shard name \"", shard.name.substr(0, 256), "\" is empty or repeated"));
    }
  }
  PS_ASSIGN_OR_RETURN(std::vector<Tensor> values, ReadKerasWeightRows(file, shards));
  std::vector<NamedTensor> variables;
  variables.reserve(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    variables.push_back({shards[i].name, std::move(values[i])});
  }
  return store->CreateVariables(std::move(variables), optimizer, consistency);
}

}  // namespace pstrain
