#ifndef PSTRAIN_PSTRAIN_VALUE_CODEC_H_
#define PSTRAIN_PSTRAIN_VALUE_CODEC_H_

// How a per-replica or remote value becomes numbers and back: Strategy::Reduce adds
// values element by element (across worker processes too), and a function scheduled on a
// parameter-server worker returns its value to the chief as numbers. pstrain provides
// codecs for float, double, int, int64_t, std::vector<float> and StepResult; a user type
// gets one by specialising ValueCodec<T> with the same two functions.

#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "common/model/model.h"

namespace pstrain::distribute {

template <typename T>
struct ValueCodec;  // Flatten(const T&, std::vector<double>*); Unflatten(Span) -> StatusOr<T>

namespace internal {
inline absl::Status ExpectValues(absl::Span<const double> values, size_t n, const char* type) {
  if (values.size() == n) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("a ", type, " is ", n, " numbers, got ", values.size()));
}
}  // namespace internal

template <>
struct ValueCodec<double> {
  static void Flatten(double v, std::vector<double>* out) { out->push_back(v); }
  static absl::StatusOr<double> Unflatten(absl::Span<const double> v) {
    if (absl::Status s = internal::ExpectValues(v, 1, "double"); !s.ok()) return s;
    return v[0];
  }
};

template <>
struct ValueCodec<float> {
  static void Flatten(float v, std::vector<double>* out) { out->push_back(v); }
  static absl::StatusOr<float> Unflatten(absl::Span<const double> v) {
    if (absl::Status s = internal::ExpectValues(v, 1, "float"); !s.ok()) return s;
    return static_cast<float>(v[0]);
  }
};

template <>
struct ValueCodec<int64_t> {
  static void Flatten(int64_t v, std::vector<double>* out) {
    out->push_back(static_cast<double>(v));
  }
  // A mean of counts rounds to the nearest integer.
  static absl::StatusOr<int64_t> Unflatten(absl::Span<const double> v) {
    if (absl::Status s = internal::ExpectValues(v, 1, "int64"); !s.ok()) return s;
    return static_cast<int64_t>(std::llround(v[0]));
  }
};

template <>
struct ValueCodec<int> {
  static void Flatten(int v, std::vector<double>* out) { out->push_back(v); }
  static absl::StatusOr<int> Unflatten(absl::Span<const double> v) {
    if (absl::Status s = internal::ExpectValues(v, 1, "int"); !s.ok()) return s;
    return static_cast<int>(std::lround(v[0]));
  }
};

template <>
struct ValueCodec<std::vector<float>> {
  static void Flatten(const std::vector<float>& v, std::vector<double>* out) {
    out->insert(out->end(), v.begin(), v.end());
  }
  static absl::StatusOr<std::vector<float>> Unflatten(absl::Span<const double> v) {
    return std::vector<float>(v.begin(), v.end());
  }
};

// A step's figures: loss sum, correct predictions and samples (sum them over replicas
// and steps, then divide by samples, as Keras's metrics do).
template <>
struct ValueCodec<StepResult> {
  static void Flatten(const StepResult& v, std::vector<double>* out) {
    out->push_back(v.loss_sum);
    out->push_back(static_cast<double>(v.correct));
    out->push_back(static_cast<double>(v.samples));
  }
  static absl::StatusOr<StepResult> Unflatten(absl::Span<const double> v) {
    if (absl::Status s = internal::ExpectValues(v, 3, "StepResult"); !s.ok()) return s;
    StepResult r;
    r.loss_sum = v[0];
    r.correct = static_cast<int64_t>(std::llround(v[1]));
    r.samples = static_cast<int64_t>(std::llround(v[2]));
    return r;
  }
};

}  // namespace pstrain::distribute

#endif  // PSTRAIN_PSTRAIN_VALUE_CODEC_H_
