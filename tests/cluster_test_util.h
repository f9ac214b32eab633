#ifndef PSTRAIN_TESTS_CLUSTER_TEST_UTIL_H_
#define PSTRAIN_TESTS_CLUSTER_TEST_UTIL_H_

#include <string>
#include <vector>

namespace pstrain {

// Losses read back from Keras-style lines "Epoch 3/10 - loss: 2.2871 - accuracy: ...",
// in order. Other lines are ignored.
std::vector<double> ParseEpochLosses(const std::string& output);

}  // namespace pstrain

#endif  // PSTRAIN_TESTS_CLUSTER_TEST_UTIL_H_
