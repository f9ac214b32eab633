#include "common/training/consistency_config.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

// The modes a job spec may name, in the order the error message lists them.
constexpr ConsistencyMode kModes[] = {CONSISTENCY_ASYNC, CONSISTENCY_BOUNDED_STALENESS,
                                      CONSISTENCY_SYNC};

}  // namespace

std::string ConsistencyModeName(ConsistencyMode mode) {
  switch (mode) {
    case CONSISTENCY_ASYNC:
      return "async";
    case CONSISTENCY_BOUNDED_STALENESS:
      return "bounded_staleness";
    case CONSISTENCY_SYNC:
      return "sync";
    default:
      return absl::StrCat("unknown mode ", static_cast<int>(mode));
  }
}

absl::StatusOr<ConsistencyMode> ParseConsistencyMode(const std::string& name) {
  for (ConsistencyMode mode : kModes) {
    if (name == ConsistencyModeName(mode)) return mode;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "consistency.mode must be \"async\", \"bounded_staleness\" or \"sync\", got \"", name,
      "\""));
}

absl::StatusOr<ConsistencyConfig> ConsistencyConfigFromJson(const nlohmann::json& value) {
  ConsistencyConfig config;
  config.set_mode(CONSISTENCY_ASYNC);
  config.set_staleness(kDefaultStaleness);
  config.set_replicas_to_aggregate(0);
  config.set_timeout_ms(kDefaultConsistencyTimeoutMs);
  if (value.is_null()) return config;
  if (!value.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("consistency must be an object, got ", value.dump()));
  }
  auto read_int = [&](const std::string& key, int64_t min, int64_t max,
                      int64_t* out) -> absl::Status {
    const nlohmann::json& v = value[key];
    if (!v.is_number_integer() || v.get<int64_t>() < min || v.get<int64_t>() > max) {
      return absl::InvalidArgumentError(absl::StrCat("consistency.", key, " must be an integer in [",
                                                     min, ", ", max, "], got ", v.dump()));
    }
    *out = v.get<int64_t>();
    return absl::OkStatus();
  };
  for (auto it = value.begin(); it != value.end(); ++it) {
    const std::string& key = it.key();
    int64_t n = 0;
    absl::Status status;
    if (key == "mode") {
      absl::StatusOr<ConsistencyMode> mode = ParseConsistencyMode(
          it->is_string() ? it->get<std::string>() : it->dump());
      if (!mode.ok()) return mode.status();
      config.set_mode(*mode);
    } else if (key == "staleness") {
      status = read_int(key, 0, 1 << 30, &n);
      config.set_staleness(static_cast<int32_t>(n));
    } else if (key == "replicas_to_aggregate") {
      status = read_int(key, 1, 1 << 30, &n);
      config.set_replicas_to_aggregate(static_cast<int32_t>(n));
    } else if (key == "timeout_ms") {
      // A day is far beyond any sane wait and keeps the deadline arithmetic safe.
      status = read_int(key, 1, int64_t{24} * 3600 * 1000, &n);
      config.set_timeout_ms(n);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "consistency has unknown key \"", key,
          "\" (known: mode, staleness, replicas_to_aggregate, timeout_ms)"));
    }
    if (!status.ok()) return status;
  }
  return config;
}

nlohmann::json ConsistencyConfigToJson(const ConsistencyConfig& config) {
  nlohmann::json json = {{"mode", ConsistencyModeName(config.mode())},
                         {"staleness", config.staleness()},
                         {"timeout_ms", config.timeout_ms()}};
  // 0 (= every worker) is the default and not a value the reader accepts.
  if (config.replicas_to_aggregate() > 0) {
    json["replicas_to_aggregate"] = config.replicas_to_aggregate();
  }
  return json;
}

absl::StatusOr<ConsistencyConfig> ResolveConsistency(const ConsistencyConfig& config,
                                                     int num_workers) {
  ConsistencyConfig resolved = config;
  if (resolved.replicas_to_aggregate() == 0) {
    resolved.set_replicas_to_aggregate(num_workers);
  } else if (resolved.replicas_to_aggregate() > std::max(1, num_workers)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "consistency.replicas_to_aggregate must be an integer in [1, ", std::max(1, num_workers),
        "], got ", resolved.replicas_to_aggregate()));
  }
  return resolved;
}

std::string DescribeConsistency(const ConsistencyConfig& config) {
  switch (config.mode()) {
    case CONSISTENCY_ASYNC:
      return "async";
    case CONSISTENCY_SYNC:
      return absl::StrCat("sync, aggregating ", config.replicas_to_aggregate(),
                          " gradients, timeout ", config.timeout_ms(), " ms");
    default:
      return absl::StrCat(ConsistencyModeName(config.mode()), ", staleness ",
                          config.staleness(), ", timeout ", config.timeout_ms(), " ms");
  }
}

}  // namespace pstrain
