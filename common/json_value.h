#ifndef PSTRAIN_COMMON_JSON_VALUE_H_
#define PSTRAIN_COMMON_JSON_VALUE_H_

// A JSON value held by a struct whose header should not include nlohmann/json.hpp.
//
// Why: json.hpp is the most expensive header in the build (about 2.5 s of a compile, gcc or
// clang, before any code of the file's own), and a struct with an nlohmann::json member
// (JobSpec, CheckpointContents) made every file that includes its header pay it: about 50
// files that never touch the JSON. JsonValue is a value type (copies copy the JSON) whose
// special members live in json_value.cc, so its header needs only json_fwd.hpp; a file that
// reads or writes the JSON includes json.hpp itself and uses `*value` or `value->...`.
//
// Thread-safety: as nlohmann::json (a const one may be read from any thread).

#include <memory>

#include "nlohmann/json_fwd.hpp"

namespace pstrain {

class JsonValue {
 public:
  JsonValue();  // null
  // Explicit: `value = {{"key", v}}` would build the JsonValue from the inner braces (a
  // JSON array); write `*value = {{"key", v}}`, which is nlohmann's object.
  explicit JsonValue(nlohmann::json value);
  JsonValue(const JsonValue& other);
  JsonValue(JsonValue&& other) noexcept;
  JsonValue& operator=(const JsonValue& other);
  JsonValue& operator=(JsonValue&& other) noexcept;
  ~JsonValue();

  nlohmann::json& operator*() { return *value_; }
  const nlohmann::json& operator*() const { return *value_; }
  nlohmann::json* operator->() { return value_.get(); }
  const nlohmann::json* operator->() const { return value_.get(); }
  // Where a `const nlohmann::json&` is wanted (a parser's argument), the value itself.
  operator const nlohmann::json&() const { return *value_; }  // NOLINT: implicit by design

 private:
  // Never null (a moved-from JsonValue holds a fresh null).
  std::unique_ptr<nlohmann::json> value_;
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_JSON_VALUE_H_
