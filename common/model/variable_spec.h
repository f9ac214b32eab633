#ifndef PSTRAIN_COMMON_MODEL_VARIABLE_SPEC_H_
#define PSTRAIN_COMMON_MODEL_VARIABLE_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

namespace pstrain {

// One of a model's variables, as the training loops, the ps and checkpoints see it.
struct VariableSpec {
  std::string name;            // "dense/kernel", "dense/bias", "dense_1/kernel", ...
  std::vector<int64_t> shape;  // kernel [in, out], bias [out]
  // False for state a layer updates itself (BatchNormalization's moving statistics): its
  // "gradient" from Model::TrainStep is an observation, folded in as
  //   value = moving_average_momentum * value + (1 - moving_average_momentum) * observation
  // wherever the optimizer would apply a gradient (on the ps and in Fit: see
  // AddMovingAverageRules in common/model/optimizer.h).
  bool trainable = true;
  float moving_average_momentum = 0.0f;
  int layer = -1;  // index into Model::layers()
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_MODEL_VARIABLE_SPEC_H_
