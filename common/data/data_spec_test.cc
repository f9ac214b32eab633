#include "common/data/data_spec.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

Json Parse(const char* text) {
  Json j = Json::parse(text, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << text;
  return j;
}

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

TEST(DataSpecTest, Synthetic) {
  absl::StatusOr<Dataset> data = LoadDataset(
      Parse(R"({"type":"synthetic","samples":20,"features":3,"classes":4,"seed":1})"), "");
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->x.ShapeString(), "[20,3]");
  EXPECT_EQ(data->num_classes, 4);
  absl::StatusOr<Dataset> defaults = LoadDataset(Parse(R"({"type":"synthetic"})"), "");
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->x.ShapeString(), "[1000,784]");
}

TEST(DataSpecTest, CsvRelativeToBaseDir) {
  std::FILE* f = std::fopen((TempDir() + "/spec.csv").c_str(), "wb");
  std::fputs("a,b\n1,0\n2,1\n", f);
  std::fclose(f);
  absl::StatusOr<Dataset> data = LoadDataset(
      Parse(R"({"type":"csv","path":"spec.csv","label_column":-1,"header":true})"), TempDir());
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->num_examples(), 2);
}

TEST(DataSpecTest, BadSources) {
  auto error = [](const char* text) {
    absl::Status status = LoadDataset(Parse(text), "/tmp").status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << text;
    return std::string(status.message());
  };
  EXPECT_THAT(error(R"({"type":"parquet"})"), HasSubstr("unknown data source type \"parquet\""));
  EXPECT_THAT(error(R"({"samples":3})"), HasSubstr("needs a string \"type\""));
  EXPECT_THAT(error(R"([1])"), HasSubstr("must be a JSON object"));
  EXPECT_THAT(error(R"({"type":"synthetic","sample":3})"), HasSubstr("unknown field \"sample\""));
  EXPECT_THAT(error(R"({"type":"synthetic","samples":"3"})"),
              HasSubstr("\"samples\" must be an integer"));
  EXPECT_THAT(error(R"({"type":"synthetic","samples":0})"), HasSubstr(">= 1"));
  EXPECT_THAT(error(R"({"type":"idx","images":"a"})"), HasSubstr("missing \"labels\""));
  EXPECT_THAT(error(R"({"type":"idx","images":"a","labels":"b","scale":"x"})"),
              HasSubstr("\"scale\" must be a number"));
  EXPECT_THAT(error(R"({"type":"fashion_mnist","split":"validation"})"),
              HasSubstr("\"split\" must be \"train\" or \"test\""));
  EXPECT_THAT(error(R"({"type":"fashion_mnist"})"), HasSubstr("missing \"split\""));
  EXPECT_THAT(error(R"({"type":"csv","path":"x","header":1})"),
              HasSubstr("\"header\" must be true or false"));
  EXPECT_THAT(error(R"({"type":"npy","x":"a.npy"})"), HasSubstr("missing \"y\""));
}

TEST(DataSpecTest, MissingFashionMnistSaysWhatToInstall) {
  absl::Status status =
      LoadDataset(Parse(R"({"type":"fashion_mnist","split":"test","dir":"/nonexistent"})"), "")
          .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("install the Debian package dataset-fashion-mnist"));
  EXPECT_EQ(LoadDataset(Parse(R"({"type":"idx","images":"nope","labels":"nope"})"), TempDir())
                .status()
                .code(),
            absl::StatusCode::kNotFound);
}

TEST(DataSpecTest, FashionMnistTest) {
  struct stat st;
  if (stat((std::string(kFashionMnistDir) + "/t10k-images-idx3-ubyte.gz").c_str(), &st) != 0) {
    GTEST_SKIP() << "Fashion-MNIST is not installed in " << kFashionMnistDir
                 << "; install the Debian package dataset-fashion-mnist";
  }
  absl::StatusOr<Dataset> data =
      LoadDataset(Parse(R"({"type":"fashion_mnist","split":"test"})"), "");
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->x.ShapeString(), "[10000,784]");
  EXPECT_EQ(data->num_classes, 10);
  float hi = 0;
  for (float v : data->x.values()) hi = std::max(hi, v);
  EXPECT_FLOAT_EQ(hi, 1.0f);
  // The explicit idx form of the same files.
  absl::StatusOr<Dataset> idx =
      LoadDataset(Parse(R"({"type":"idx","images":"t10k-images-idx3-ubyte.gz",)"
                        R"("labels":"t10k-labels-idx1-ubyte.gz","scale":0.00392156862745098})"),
                  kFashionMnistDir);
  ASSERT_TRUE(idx.ok()) << idx.status();
  EXPECT_EQ(idx->y.values()[0], data->y.values()[0]);
}

}  // namespace
}  // namespace pstrain
