#include "common/checkpoint/zip_archive.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

TEST(ZipArchiveTest, MembersComeBackInOrderWithTheirBytes) {
  const std::string path = TempPath("round_trip.zip");
  std::string binary(70000, '\0');
  for (size_t i = 0; i < binary.size(); ++i) binary[i] = static_cast<char>(i * 7);
  ASSERT_TRUE(WriteZipArchive(path, {{"metadata.json", "{\"a\":1}"},
                                     {"config.json", ""},
                                     {"model.weights.h5", binary}})
                  .ok());
  absl::StatusOr<std::vector<ZipMember>> members = ReadZipArchive(path, 1 << 20);
  ASSERT_TRUE(members.ok()) << members.status();
  ASSERT_EQ(members->size(), 3u);
  EXPECT_EQ((*members)[0].name, "metadata.json");
  EXPECT_EQ((*members)[0].bytes, "{\"a\":1}");
  EXPECT_EQ((*members)[1].name, "config.json");
  EXPECT_EQ((*members)[1].bytes, "");
  EXPECT_EQ((*members)[2].name, "model.weights.h5");
  EXPECT_EQ((*members)[2].bytes, binary);
  // Stored, not compressed (as Keras writes): the bytes appear verbatim in the file.
  std::ifstream in(path, std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(file.find(binary), std::string::npos);
}

TEST(ZipArchiveTest, ALimitOnMemberSizeIsKept) {
  const std::string path = TempPath("limit.zip");
  ASSERT_TRUE(WriteZipArchive(path, {{"big", std::string(5000, 'x')}}).ok());
  absl::StatusOr<std::vector<ZipMember>> members = ReadZipArchive(path, 4999);
  EXPECT_EQ(members.status().code(), absl::StatusCode::kResourceExhausted) << members.status();
  EXPECT_NE(members.status().message().find("big"), std::string::npos);
}

TEST(ZipArchiveTest, BadNamesAndBadFilesAreRefused) {
  const std::string path = TempPath("bad.zip");
  EXPECT_EQ(WriteZipArchive(path, {{"a", "1"}, {"a", "2"}}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteZipArchive(path, {{"", "1"}}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadZipArchive(TempPath("missing.zip"), 100).status().code(),
            absl::StatusCode::kNotFound);
  std::ofstream(path) << "not a zip archive at all";
  EXPECT_EQ(ReadZipArchive(path, 100).status().code(), absl::StatusCode::kInvalidArgument);
  // A truncated archive.
  const std::string good = TempPath("good.zip");
  ASSERT_TRUE(WriteZipArchive(good, {{"a", std::string(1000, 'a')}}).ok());
  std::ifstream in(good, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream(path, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  EXPECT_EQ(ReadZipArchive(path, 1 << 20).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pstrain
