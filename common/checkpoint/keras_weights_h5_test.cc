#include "common/checkpoint/keras_weights_h5.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/checkpoint/zip_archive.h"
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


// The model of tests/fuzz/corpus/keras_file_fuzzer/dense.txt: Dense(3), Dropout, Dense(2)
// on 4 inputs.
const std::vector<KerasSaveableShapes> kDenseShapes = {
    {"layers/dense", {{4, 3}, {3}}}, {"layers/dense_1", {{3, 2}, {2}}}, {"layers/dropout", {}}};

std::string ReadTestFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// A refusal as the user sees it: one line, naming the file.
void ExpectOneLineRefusal(const absl::Status& status) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_TRUE(absl::StartsWith(status.message(), "model.weights.h5: ")) << status;
  EXPECT_FALSE(absl::StrContains(status.message(), "\n")) << status;
}

TEST(ReadKerasWeightsH5Test, ReadsBackWhatWasWrittenValueForValue) {
  const Tensor k0({4, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, -12.5f});
  const Tensor b0({3}, {0.25f, -0.5f, 1e-30f});
  const Tensor k1({3, 2}, {6, 5, 4, 3, 2, 1});
  const Tensor b1({2}, {-1, 1});
  absl::StatusOr<std::string> image = WriteKerasWeightsH5(
      {{"layers/dense", {&k0, &b0}}, {"layers/dense_1", {&k1, &b1}}, {"layers/dropout", {}}});
  ASSERT_TRUE(image.ok()) << image.status();
  absl::StatusOr<std::vector<std::vector<Tensor>>> back =
      ReadKerasWeightsH5(*image, kDenseShapes);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), 3u);
  ASSERT_EQ((*back)[0].size(), 2u);
  ASSERT_EQ((*back)[1].size(), 2u);
  EXPECT_TRUE((*back)[2].empty());
  EXPECT_EQ((*back)[0][0].shape(), k0.shape());
  EXPECT_EQ((*back)[0][0].values(), k0.values());
  EXPECT_EQ((*back)[0][1].values(), b0.values());
  EXPECT_EQ((*back)[1][0].values(), k1.values());
  EXPECT_EQ((*back)[1][1].values(), b1.values());

  // The same file against a model it does not fit: the dataset and both shapes named.
  std::vector<KerasSaveableShapes> other = kDenseShapes;
  other[1].shapes[0] = {2, 3};
  absl::Status wrong = ReadKerasWeightsH5(*image, other).status();
  ExpectOneLineRefusal(wrong);
  EXPECT_TRUE(absl::StrContains(wrong.message(), "layers/dense_1/vars/0 has shape [3,2]"))
      << wrong;
  // One variable fewer than the file holds.
  other = kDenseShapes;
  other[1].shapes.pop_back();
  wrong = ReadKerasWeightsH5(*image, other).status();
  ExpectOneLineRefusal(wrong);
  EXPECT_TRUE(absl::StrContains(wrong.message(), "layers/dense_1/vars/1 is one more variable"))
      << wrong;
  ExpectOneLineRefusal(ReadKerasWeightsH5("not hdf5", kDenseShapes).status());
  ExpectOneLineRefusal(ReadKerasWeightsH5(image->substr(0, image->size() / 2), kDenseShapes)
                           .status());
}

// A file that crashed Debian's libhdf5 1.10.8 in process (tests/fuzz/keras_file_fuzzer:
// a SEGV in H5F__accum_read under H5Lexists, writing a group's local heap to the NULL
// its malloc got) is now one clear error, and this process lives on to read the next file.
TEST(ReadKerasWeightsH5Test, AFileThatCrashesTheHdf5LibraryIsAClearError) {
  const std::string crashing = ReadTestFile("common/checkpoint/testdata/null_local_heap.h5");
  ASSERT_GT(crashing.size(), 8u);
  const absl::Status status = ReadKerasWeightsH5(crashing, kDenseShapes).status();
  ExpectOneLineRefusal(status);

  const Tensor k0({4, 3}), b0({3}), k1({3, 2}), b1({2});
  absl::StatusOr<std::string> image = WriteKerasWeightsH5(
      {{"layers/dense", {&k0, &b0}}, {"layers/dense_1", {&k1, &b1}}, {"layers/dropout", {}}});
  ASSERT_TRUE(image.ok()) << image.status();
  EXPECT_TRUE(ReadKerasWeightsH5(*image, kDenseShapes).ok());
}

// Bytes spread over a good file's first 4 KiB (superblock, object headers, B-trees,
// heaps) corrupted one at a time: each read is the weights of the model's shapes or one
// clear error, never a crash of this process. (Each read forks a child: a few dozen keep
// the test short; keras_file_fuzzer searches the rest.)
TEST(ReadKerasWeightsH5Test, CorruptedFilesGiveTheWeightsOrAClearError) {
  const Tensor k0({4, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  const Tensor b0({3}, {1, 2, 3});
  const Tensor k1({3, 2}, {1, 2, 3, 4, 5, 6});
  const Tensor b1({2}, {1, 2});
  absl::StatusOr<std::string> image = WriteKerasWeightsH5(
      {{"layers/dense", {&k0, &b0}}, {"layers/dense_1", {&k1, &b1}}, {"layers/dropout", {}}});
  ASSERT_TRUE(image.ok()) << image.status();
  int refused = 0;
  for (size_t offset = 8; offset < std::min<size_t>(image->size(), 4096); offset += 61) {
    std::string corrupt = *image;
    corrupt[offset] = static_cast<char>(corrupt[offset] ^ 0xff);
    absl::StatusOr<std::vector<std::vector<Tensor>>> read =
        ReadKerasWeightsH5(corrupt, kDenseShapes);
    if (!read.ok()) {
      ExpectOneLineRefusal(read.status());
      ++refused;
      continue;
    }
    ASSERT_EQ(read->size(), 3u);
    EXPECT_EQ((*read)[0][0].shape(), k0.shape()) << "byte " << offset;
    EXPECT_EQ((*read)[1][1].shape(), b1.shape()) << "byte " << offset;
  }
  EXPECT_GT(refused, 0);
}

// A .keras-shaped archive (only the weights member matters here) holding a 1000 x 3 table
// (row r, column c: r * 10 + c + 0.5) and a bias, with the table's weights member as the
// archive's directory describes it.
struct RowsFile {
  KerasWeightsFile file;
  Tensor table{{1000, 3}};
  Tensor bias{{3}, {7, 8, 9}};
};

// The test's temporary folder as a normalized path (TempDir ends in "/").
std::string TestDir() {
  std::string dir = std::filesystem::path(testing::TempDir()).lexically_normal().string();
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

RowsFile MakeRowsFile(const std::string& name) {
  RowsFile out;
  for (int64_t r = 0; r < 1000; ++r) {
    for (int64_t c = 0; c < 3; ++c) out.table.data()[r * 3 + c] = r * 10 + c + 0.5f;
  }
  absl::StatusOr<std::string> image =
      WriteKerasWeightsH5({{"layers/embedding", {&out.table}}, {"layers/dense", {&out.bias}}});
  EXPECT_TRUE(image.ok()) << image.status();
  out.file.path = absl::StrCat(TestDir(), "/", name, ".keras");
  EXPECT_TRUE(WriteZipArchive(out.file.path, {{"config.json", "{}"},
                                              {kKerasWeightsMember, image.value_or("")}})
                  .ok());
  absl::StatusOr<ZipMemberInfo> member = StatZipMember(out.file.path, kKerasWeightsMember);
  EXPECT_TRUE(member.ok()) << member.status();
  out.file.member = member.value_or(ZipMemberInfo());
  return out;
}

TEST(ReadKerasWeightRowsTest, ReadsExactlyTheRowsAskedForBitForBit) {
  const RowsFile f = MakeRowsFile("rows");
  absl::StatusOr<std::vector<Tensor>> rows = ReadKerasWeightRows(
      f.file, {{"table/part_1", "layers/embedding/vars/0", {1000, 3}, 333, 667},
               {"bias", "layers/dense/vars/0", {3}, 0, 3},
               {"table/part_0", "layers/embedding/vars/0", {1000, 3}, 0, 1}});
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 3u);
  EXPECT_EQ((*rows)[0].shape(), (std::vector<int64_t>{334, 3}));
  for (int64_t i = 0; i < 334 * 3; ++i) {
    ASSERT_EQ((*rows)[0].data()[i], f.table.data()[333 * 3 + i]) << i;
  }
  EXPECT_EQ((*rows)[1].shape(), (std::vector<int64_t>{3}));
  EXPECT_EQ((*rows)[1].data()[2], 9.0f);
  EXPECT_EQ((*rows)[2].shape(), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ((*rows)[2].data()[1], 1.5f);
}

TEST(ReadKerasWeightRowsTest, AWrongOrHostileRequestIsAOneLineRefusal) {
  const RowsFile f = MakeRowsFile("hostile");
  auto read = [&f](const KerasRowsRequest& request, const std::string& path = "") {
    KerasWeightsFile file = f.file;
    if (!path.empty()) file.path = path;
    return ReadKerasWeightRows(file, {request}).status();
  };
  const KerasRowsRequest good = {"t", "layers/embedding/vars/0", {1000, 3}, 0, 10};
  ASSERT_TRUE(read(good).ok()) << read(good);
  auto expect_refused = [](const absl::Status& status, absl::StatusCode code,
                           absl::string_view says) {
    EXPECT_EQ(status.code(), code) << status;
    EXPECT_TRUE(absl::StrContains(status.message(), says)) << status;
    EXPECT_FALSE(absl::StrContains(status.message(), "\n")) << status;
  };
  KerasRowsRequest r = good;
  r.row_end = 1001;
  expect_refused(read(r), absl::StatusCode::kInvalidArgument, "not within");
  r = good;
  r.row_begin = 10;
  expect_refused(read(r), absl::StatusCode::kInvalidArgument, "not within");
  r = good;
  r.dataset = "layers/nothing/vars/0";
  expect_refused(read(r), absl::StatusCode::kInvalidArgument, "no dataset layers/nothing/vars/0");
  r = good;
  r.dataset = "layers/../vars/0";
  expect_refused(read(r), absl::StatusCode::kInvalidArgument, "not a Keras weights dataset");
  r = good;
  r.shape = {1000, 4};
  expect_refused(read(r), absl::StatusCode::kInvalidArgument, "has shape [1000,3]");
  r = good;
  r.shape = {int64_t{1} << 40, int64_t{1} << 40};
  expect_refused(read(r), absl::StatusCode::kInvalidArgument, "rows of \"t\"");
  const std::string dir = TestDir();
  expect_refused(read(good, dir + "/../" + dir.substr(dir.rfind('/') + 1) + "/hostile.keras"),
                 absl::StatusCode::kInvalidArgument, "not a normalized path");
  expect_refused(read(good, "hostile.keras"), absl::StatusCode::kInvalidArgument,
                 "not an absolute path");
  expect_refused(read(good, "/etc/passwd"), absl::StatusCode::kInvalidArgument,
                 "does not end in .keras");
  // Not reachable from here, or another file under the name: the caller sends the rows.
  expect_refused(read(good, dir + "/missing.keras"), absl::StatusCode::kFailedPrecondition,
                 "No such file");
  KerasWeightsFile other = f.file;
  other.member.crc32 ^= 1;
  const absl::Status different = ReadKerasWeightRows(other, {good}).status();
  expect_refused(different, absl::StatusCode::kFailedPrecondition, "is another file");
}

}  // namespace
}  // namespace pstrain
