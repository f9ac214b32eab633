#include "common/data/idx_reader.h"

#include <sys/stat.h>
#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "common/memory_budget.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

void AppendBigEndian(std::string* out, uint32_t v) {
  out->push_back(static_cast<char>(v >> 24));
  out->push_back(static_cast<char>(v >> 16));
  out->push_back(static_cast<char>(v >> 8));
  out->push_back(static_cast<char>(v));
}

std::string IdxBytes(uint32_t magic, const std::vector<uint32_t>& dims,
                     const std::vector<uint8_t>& values) {
  std::string out;
  AppendBigEndian(&out, magic);
  for (uint32_t d : dims) AppendBigEndian(&out, d);
  out.append(values.begin(), values.end());
  return out;
}

std::string WriteRaw(const std::string& name, const std::string& bytes) {
  const std::string path = TempPath(name);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  EXPECT_NE(f, nullptr);
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  return path;
}

std::string WriteGzip(const std::string& name, const std::string& bytes) {
  const std::string path = TempPath(name);
  gzFile f = gzopen(path.c_str(), "wb");
  EXPECT_NE(f, nullptr);
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
  return path;
}

// 3 images of 2x2: image i holds 4i .. 4i+3 (times 20); labels 2, 0, 1.
std::string Images() {
  std::vector<uint8_t> pixels;
  for (int i = 0; i < 12; ++i) pixels.push_back(static_cast<uint8_t>(i * 20));
  return IdxBytes(0x803, {3, 2, 2}, pixels);
}
std::string Labels() { return IdxBytes(0x801, {3}, {2, 0, 1}); }

TEST(IdxReaderTest, ReadsRawFiles) {
  const std::string images = WriteRaw("raw-images", Images());
  const std::string labels = WriteRaw("raw-labels", Labels());
  absl::StatusOr<Tensor> x = ReadIdxImages(images);
  ASSERT_TRUE(x.ok()) << x.status();
  EXPECT_EQ(x->ShapeString(), "[3,4]");
  EXPECT_EQ(x->values()[5], 100.0f);
  absl::StatusOr<Tensor> y = ReadIdxLabels(labels);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_THAT(y->values(), ElementsAre(2, 0, 1));
}

// A gzip header that declares more than the memory budget is refused before anything is
// read or allocated, naming the file and its dimensions.
TEST(IdxReaderTest, AHeaderOverTheMemoryBudgetIsRefused) {
  const std::string images = WriteGzip("budget.gz", IdxBytes(0x803, {60000, 28, 28}, {1, 2, 3}));
  SetMemoryBudgetForTesting(int64_t{64} << 20);  // 60000 x 784 floats are 179 MiB
  absl::Status status = ReadIdxImages(images).status();
  SetMemoryBudgetForTesting(0);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_NE(status.message().find(images + " (60000x28x28 values as floats) needs 179.4 MiB"),
            std::string::npos)
      << status;
}

TEST(IdxReaderTest, ReadsGzipFilesWithScale) {
  const std::string images = WriteGzip("gz-images.gz", Images());
  const std::string labels = WriteGzip("gz-labels", Labels());  // detected by magic
  absl::StatusOr<Dataset> data = ReadIdxDataset(images, labels, 1.0f / 255.0f);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->x.ShapeString(), "[3,4]");
  EXPECT_FLOAT_EQ(data->x.values()[11], 220.0f / 255.0f);
  EXPECT_EQ(data->num_classes, 3);
  EXPECT_THAT(data->y.values(), ElementsAre(2, 0, 1));
}

void ExpectInvalid(const absl::Status& status, const std::string& path, const std::string& what) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(path));
  EXPECT_THAT(std::string(status.message()), HasSubstr(what));
}

TEST(IdxReaderTest, TruncatedFiles) {
  std::string bytes = Images();
  bytes.resize(bytes.size() - 1);
  const std::string raw = WriteRaw("trunc-raw", bytes);
  ExpectInvalid(ReadIdxImages(raw).status(), raw, "truncated");
  const std::string gz = WriteGzip("trunc.gz", bytes);
  ExpectInvalid(ReadIdxImages(gz).status(), gz, "truncated");
  const std::string header = WriteRaw("trunc-header", Images().substr(0, 9));
  ExpectInvalid(ReadIdxImages(header).status(), header, "truncated");
  const std::string empty = WriteRaw("empty", "");
  ExpectInvalid(ReadIdxLabels(empty).status(), empty, "truncated");
  // A gzip stream cut in the middle.
  std::string compressed;
  {
    const std::string whole = WriteGzip("whole.gz", Images());
    std::FILE* f = std::fopen(whole.c_str(), "rb");
    char buffer[4096];
    compressed.assign(buffer, std::fread(buffer, 1, sizeof(buffer), f));
    std::fclose(f);
  }
  const std::string cut = WriteRaw("cut.gz", compressed.substr(0, compressed.size() - 12));
  EXPECT_EQ(ReadIdxImages(cut).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(IdxReaderTest, TrailingData) {
  const std::string raw = WriteRaw("trailing", Labels() + "x");
  ExpectInvalid(ReadIdxLabels(raw).status(), raw, "trailing data");
  const std::string gz = WriteGzip("trailing.gz", Labels() + "x");
  ExpectInvalid(ReadIdxLabels(gz).status(), gz, "trailing data");
}

TEST(IdxReaderTest, WrongMagic) {
  const std::string labels = WriteRaw("labels-as-images", Labels());
  ExpectInvalid(ReadIdxImages(labels).status(), labels, "wrong magic 0x00000801");
  const std::string images = WriteGzip("images-as-labels.gz", Images());
  ExpectInvalid(ReadIdxLabels(images).status(), images, "wrong magic 0x00000803");
  const std::string floats = WriteRaw("floats", IdxBytes(0x0D01, {0}, {}));
  ExpectInvalid(ReadIdxLabels(floats).status(), floats, "unsupported IDX data type 0x0D");
  const std::string text = WriteRaw("text", "hello world, not idx");
  ExpectInvalid(ReadIdxImages(text).status(), text, "wrong magic");
}

TEST(IdxReaderTest, AbsurdDimensionsAreNotAllocated) {
  // Claims 2^32-1 x 2^32-1 x 1 images with 4 bytes of data.
  const std::string huge =
      WriteGzip("huge.gz", IdxBytes(0x803, {0xFFFFFFFF, 0xFFFFFFFF, 1}, {1, 2, 3, 4}));
  ExpectInvalid(ReadIdxImages(huge).status(), huge, "too large");
  // Within the caps but far more than the data: fails at the real end of the data.
  const std::string liar = WriteGzip("liar.gz", IdxBytes(0x803, {1000, 1000, 100}, {1, 2}));
  ExpectInvalid(ReadIdxImages(liar).status(), liar, "truncated");
  const std::string raw_liar = WriteRaw("liar", IdxBytes(0x803, {1000, 1000, 100}, {1, 2}));
  ExpectInvalid(ReadIdxImages(raw_liar).status(), raw_liar, "truncated");
}

TEST(IdxReaderTest, CountMismatch) {
  const std::string images = WriteRaw("mm-images", Images());
  const std::string labels = WriteRaw("mm-labels", IdxBytes(0x801, {2}, {0, 1}));
  absl::Status status = ReadIdxDataset(images, labels).status();
  ExpectInvalid(status, images, "3 images");
  EXPECT_THAT(std::string(status.message()), HasSubstr("2 labels"));
}

TEST(IdxReaderTest, MissingFile) {
  EXPECT_EQ(ReadIdxImages(TempPath("no-such-file")).status().code(), absl::StatusCode::kNotFound);
}

TEST(IdxReaderTest, FashionMnistTestSet) {
  const std::string dir = "/usr/share/datasets/fashion-mnist/";
  const std::string images = dir + "t10k-images-idx3-ubyte.gz";
  const std::string labels = dir + "t10k-labels-idx1-ubyte.gz";
  struct stat st;
  if (stat(images.c_str(), &st) != 0 || stat(labels.c_str(), &st) != 0) {
    GTEST_SKIP() << "Fashion-MNIST is not installed (" << images
                 << "); install the Debian package dataset-fashion-mnist";
  }
  absl::StatusOr<Dataset> data = ReadIdxDataset(images, labels, 1.0f / 255.0f);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->x.ShapeString(), "[10000,784]");
  EXPECT_EQ(data->y.ShapeString(), "[10000]");
  EXPECT_EQ(data->num_classes, 10);
  float lo = 1, hi = 0;
  for (float v : data->x.values()) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  EXPECT_EQ(lo, 0.0f);
  EXPECT_EQ(hi, 1.0f);
  std::vector<int> counts(10);
  for (float v : data->y.values()) {
    ASSERT_GE(v, 0);
    ASSERT_LE(v, 9);
    ++counts[static_cast<int>(v)];
  }
  // The test set is balanced: 1000 of each class.
  for (int c : counts) EXPECT_EQ(c, 1000);
}

}  // namespace
}  // namespace pstrain
