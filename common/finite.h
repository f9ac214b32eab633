#ifndef PSTRAIN_COMMON_FINITE_H_
#define PSTRAIN_COMMON_FINITE_H_

// Finding NaN and infinity in float data: a gradient, an initial value or a data file
// that holds one poisons every value it touches (a variable, then every optimizer slot),
// so such data is refused where it enters.

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace pstrain {

// Index of the first NaN or infinity in `values`, or -1 when every value is finite.
// One pass over the data that the compiler vectorises (an OR of exponent tests per
// block, no branch per element), so it costs about as much as reading the values.
int64_t FirstNonFinite(absl::Span<const float> values);

// OK when every value is finite; otherwise INVALID_ARGUMENT
// "<what> holds a non-finite value (nan) at element 17 of 1000".
absl::Status CheckFinite(absl::Span<const float> values, absl::string_view what);

// "nan", "inf" or "-inf" for a non-finite value; the number otherwise.
std::string DescribeFloat(float value);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_FINITE_H_
