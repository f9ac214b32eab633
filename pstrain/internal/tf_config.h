#ifndef PSTRAIN_PSTRAIN_INTERNAL_TF_CONFIG_H_
#define PSTRAIN_PSTRAIN_INTERNAL_TF_CONFIG_H_

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/cluster_spec.h"
#include "pstrain/strategy.h"

namespace pstrain::distribute::internal {

// The cluster and this task: options.tf_config when given, else the TF_CONFIG
// environment variable. Errors: INVALID_ARGUMENT a malformed one, or none at all (the
// message says the strategy needs it).
inline absl::StatusOr<TfConfig> ReadTfConfig(const StrategyOptions& options) {
  absl::StatusOr<TfConfig> config = options.tf_config.empty()
                                        ? TfConfigFromEnvironment()
                                        : ParseTfConfig(options.tf_config);
  if (absl::IsNotFound(config.status())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "strategy ", StrategyKindName(options.strategy), " needs TF_CONFIG (the cluster and this task), ",
        "which is not set"));
  }
  return config;
}

}  // namespace pstrain::distribute::internal

#endif  // PSTRAIN_PSTRAIN_INTERNAL_TF_CONFIG_H_
