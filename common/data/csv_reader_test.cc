#include "common/data/csv_reader.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Write(const std::string& name, const std::string& text) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  std::fwrite(text.data(), 1, text.size(), f);
  std::fclose(f);
  return path;
}

TEST(CsvReaderTest, LabelLastWithHeader) {
  const std::string path = Write("a.csv", "f1,f2,label\r\n1,2,0\r\n\r\n3.5,-4,2\n");
  absl::StatusOr<Dataset> data = ReadCsvDataset(path, {});
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->x.ShapeString(), "[2,2]");
  EXPECT_THAT(data->x.values(), ElementsAre(1, 2, 3.5, -4));
  EXPECT_THAT(data->y.values(), ElementsAre(0, 2));
  EXPECT_EQ(data->num_classes, 3);
}

TEST(CsvReaderTest, LabelFirstNoHeaderScaled) {
  const std::string path = Write("b.csv", "1;10;20\n0;30;40\n");
  CsvOptions options;
  options.label_column = 0;
  options.header = false;
  options.delimiter = ';';
  options.scale = 0.1f;
  absl::StatusOr<Dataset> data = ReadCsvDataset(path, options);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_THAT(data->y.values(), ElementsAre(1, 0));
  EXPECT_FLOAT_EQ(data->x.values()[3], 4.0f);
}

TEST(CsvReaderTest, RegressionLabels) {
  absl::StatusOr<Dataset> data = ReadCsvDataset(Write("c.csv", "x,y\n1,0.5\n2,-1\n"), {});
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->num_classes, 0);
}

TEST(CsvReaderTest, Errors) {
  const std::string ragged = Write("ragged.csv", "a,b,c\n1,2,3\n1,2\n");
  absl::Status status = ReadCsvDataset(ragged, {}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr(ragged));
  EXPECT_THAT(std::string(status.message()), HasSubstr("line 3 has 2 fields, expected 3"));
  EXPECT_THAT(std::string(ReadCsvDataset(Write("nan.csv", "a,b\n1,x\n"), {}).status().message()),
              HasSubstr("line 2 column 2: \"x\" is not a number"));
  EXPECT_THAT(std::string(ReadCsvDataset(Write("empty.csv", "a,b\n"), {}).status().message()),
              HasSubstr("no data rows"));
  CsvOptions far;
  far.label_column = 5;
  EXPECT_THAT(std::string(ReadCsvDataset(Write("far.csv", "a,b\n1,2\n"), far).status().message()),
              HasSubstr("label column 5 is out of range"));
  CsvOptions few;
  few.num_classes = 2;
  EXPECT_FALSE(ReadCsvDataset(Write("few.csv", "a,b\n1,2\n"), few).ok());
  EXPECT_EQ(ReadCsvDataset("/nonexistent/x.csv", {}).status().code(), absl::StatusCode::kNotFound);
}

// NaN and Inf in a CSV trained to "loss: -nan": refused at load, naming the file, line
// and column.
TEST(CsvReaderTest, NonFiniteValuesAreRefusedNamingTheLine) {
  for (const char* bad : {"nan", "NaN", "inf", "-inf", "Infinity", "1e39"}) {
    const std::string path = Write("nonfinite.csv", std::string("a,b,y\n1,2,0\n3,") + bad + ",1\n");
    absl::Status status = ReadCsvDataset(path, {}).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(status.message()), HasSubstr(path));
    EXPECT_THAT(std::string(status.message()),
                HasSubstr(std::string("line 3 column 2: \"") + bad + "\" is not a finite number"));
  }
  // A bad label too, in its own column.
  EXPECT_THAT(std::string(ReadCsvDataset(Write("nanlabel.csv", "a,y\n1,0\n2,1\n3,nan\n"), {})
                              .status()
                              .message()),
              HasSubstr("line 4 column 2"));
  // A finite value that the scale takes past a float.
  CsvOptions scaled;
  scaled.scale = 1e30f;
  EXPECT_THAT(
      std::string(ReadCsvDataset(Write("scaled.csv", "a,y\n1e20,0\n"), scaled).status().message()),
      HasSubstr("line 2 column 1"));
}

// /dev/zero was read for 2 GiB before being refused.
TEST(CsvReaderTest, NotARegularFileIsRefusedBeforeReading) {
  absl::Status status = ReadCsvDataset("/dev/zero", {}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("/dev/zero is not a regular file"));
  EXPECT_THAT(std::string(ReadCsvDataset(::testing::TempDir(), {}).status().message()),
              HasSubstr("a directory"));
}

// A label the data's own class count allows but the model's outputs do not is named
// with its example in file order (it used to be found at its batch, shuffled).
TEST(CsvReaderTest, ExamplesStayInFileOrderForLabelChecks) {
  absl::StatusOr<Dataset> data =
      ReadCsvDataset(Write("labels.csv", "a,y\n1,0\n2,1\n3,12\n4,2\n"), {});
  ASSERT_TRUE(data.ok()) << data.status();
  absl::Status status = data->CheckClassIds(10);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("label 12 of example 2 (row 3 in file order) is not a class id in [0, 10)"));
  EXPECT_TRUE(data->CheckClassIds(13).ok());
}

}  // namespace
}  // namespace pstrain
