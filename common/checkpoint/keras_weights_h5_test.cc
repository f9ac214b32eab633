#include "common/checkpoint/keras_weights_h5.h"

#include <string>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(KerasSnakeCaseTest, NamesGroupsAsKerasNamingDoes) {
  // keras/src/utils/naming.py to_snake_case on Keras's own layer classes.
  EXPECT_EQ(KerasSnakeCase("Dense"), "dense");
  EXPECT_EQ(KerasSnakeCase("BatchNormalization"), "batch_normalization");
  EXPECT_EQ(KerasSnakeCase("Conv2D"), "conv2d");
  EXPECT_EQ(KerasSnakeCase("MaxPooling2D"), "max_pooling2d");
  EXPECT_EQ(KerasSnakeCase("GlobalAveragePooling1D"), "global_average_pooling1d");
  EXPECT_EQ(KerasSnakeCase("Embedding"), "embedding");
}

TEST(WriteKerasWeightsH5Test, AnHdf5ImageOrAClearRefusal) {
  const Tensor kernel({2, 3}, {1, 2, 3, 4, 5, 6});
  absl::StatusOr<std::string> image =
      WriteKerasWeightsH5({{"layers/dense", {&kernel}}, {"layers/dropout", {}}});
  ASSERT_TRUE(image.ok()) << image.status();
  // The HDF5 signature starts the file (tools/export_keras_test reads it with h5py).
  EXPECT_EQ(image->substr(0, 8), std::string("\x89HDF\r\n\x1a\n", 8));

  EXPECT_EQ(WriteKerasWeightsH5({{"layers/a", {}}, {"layers/a", {}}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteKerasWeightsH5({{"layers//a", {}}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteKerasWeightsH5({{"layers/a", {nullptr}}}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pstrain
