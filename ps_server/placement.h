#ifndef PSTRAIN_PS_SERVER_PLACEMENT_H_
#define PSTRAIN_PS_SERVER_PLACEMENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/chief.pb.h"

namespace pstrain {

struct VariableShape {
  std::string name;
  std::vector<int64_t> shape;
};

// Which ps task owns each variable. Round-robin in the model's variable order, as
// TensorFlow's default ParameterServerStrategy placement does: variable i goes to ps
// i % num_ps. Errors: INVALID_ARGUMENT num_ps < 1.
absl::StatusOr<std::vector<VariablePlacementEntry>> PlaceRoundRobin(
    const std::vector<VariableShape>& variables, int num_ps);

}  // namespace pstrain

#endif  // PSTRAIN_PS_SERVER_PLACEMENT_H_
