#include "ps_server/consistency.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace pstrain {

absl::StatusOr<ConsistencyConfig> ConsistencyConfigFromJson(const nlohmann::json& value,
                                                            int num_workers) {
  ConsistencyConfig config;
  config.set_mode("async");
  config.set_staleness(kDefaultStaleness);
  config.set_replicas_to_aggregate(num_workers);
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
      const std::string mode = it->is_string() ? it->get<std::string>() : it->dump();
      if (mode != "async" && mode != "bounded_staleness" && mode != "sync") {
        return absl::InvalidArgumentError(absl::StrCat(
            "consistency.mode must be \"async\", \"bounded_staleness\" or \"sync\", got ",
            it->dump()));
      }
      config.set_mode(mode);
    } else if (key == "staleness") {
      status = read_int(key, 0, 1 << 30, &n);
      config.set_staleness(static_cast<int32_t>(n));
    } else if (key == "replicas_to_aggregate") {
      status = read_int(key, 1, std::max(1, num_workers), &n);
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

absl::Status ValidateConsistency(const ConsistencyConfig& config) {
  const std::string& mode = config.mode();
  if (mode.empty() || mode == "async") return absl::OkStatus();
  if (mode != "bounded_staleness" && mode != "sync") {
    return absl::InvalidArgumentError(absl::StrCat("unknown consistency mode \"", mode, "\""));
  }
  if (config.timeout_ms() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("consistency timeout_ms must be >= 1, got ", config.timeout_ms()));
  }
  if (mode == "bounded_staleness" && config.staleness() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("consistency staleness must be >= 0, got ", config.staleness()));
  }
  if (mode == "sync" && config.replicas_to_aggregate() < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "consistency replicas_to_aggregate must be >= 1, got ", config.replicas_to_aggregate()));
  }
  return absl::OkStatus();
}

}  // namespace pstrain
