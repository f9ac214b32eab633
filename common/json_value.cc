#include "common/json_value.h"

#include <utility>

#include "nlohmann/json.hpp"

namespace pstrain {

JsonValue::JsonValue() : value_(std::make_unique<nlohmann::json>()) {}

JsonValue::JsonValue(nlohmann::json value)
    : value_(std::make_unique<nlohmann::json>(std::move(value))) {}

JsonValue::JsonValue(const JsonValue& other)
    : value_(std::make_unique<nlohmann::json>(*other.value_)) {}

JsonValue::JsonValue(JsonValue&& other) noexcept : value_(std::move(other.value_)) {
  // Keep the moved-from one usable (never null); a failed allocation here ends the process
  // as any other would.
  other.value_ = std::make_unique<nlohmann::json>();
}

JsonValue& JsonValue::operator=(const JsonValue& other) {
  if (this != &other) *value_ = *other.value_;
  return *this;
}

JsonValue& JsonValue::operator=(JsonValue&& other) noexcept {
  if (this != &other) std::swap(value_, other.value_);
  return *this;
}

JsonValue::~JsonValue() = default;

}  // namespace pstrain
