#include "common/data/input_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "common/unprivileged.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

TEST(InputFileTest, MissingDeviceDirectoryAndTooLargeAreToldApart) {
  EXPECT_EQ(OpenInputFile(TempPath("absent"), "CSV file", 100).status().code(),
            absl::StatusCode::kNotFound);
  absl::StatusOr<InputFile> zero = OpenInputFile("/dev/zero", "CSV file", 100);
  EXPECT_EQ(zero.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(zero.status().message(), "CSV file /dev/zero is not a regular file (a device)");
  EXPECT_EQ(OpenInputFile(::testing::TempDir(), "CSV file", 100).status().code(),
            absl::StatusCode::kInvalidArgument);
  const std::string path = TempPath("ten_bytes");
  std::ofstream(path) << "0123456789";
  EXPECT_EQ(OpenInputFile(path, "CSV file", 9).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<InputFile> ok = OpenInputFile(path, "CSV file", 10);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->size, 10);
  int64_t size = 0;
  EXPECT_TRUE(CheckInputFile(path, "IDX file", 10, &size).ok());
  EXPECT_EQ(CheckInputFile("/dev/zero", "IDX file", 10, &size).code(),
            absl::StatusCode::kInvalidArgument);
}

// Run without root (root reads anything): as `nobody` when the test runs as root.
TEST(InputFileTest, AnUnreadableFileIsSaidToBeUnreadable) {
  char dir[] = "/tmp/pstrain-unreadable-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  ::chmod(dir, 0755);
  const std::string path = std::string(dir) + "/secret.csv";
  std::ofstream(path) << "1,2\n";
  ::chmod(path.c_str(), 0);
  const int code = RunUnprivileged([&] {
    absl::StatusOr<InputFile> file = OpenInputFile(path, "CSV file", 100);
    if (file.status().code() != absl::StatusCode::kPermissionDenied) return 1;
    if (file.status().message() != "CSV file " + path + " is unreadable: Permission denied") {
      return 2;
    }
    int64_t size;
    return CheckInputFile(path, "IDX file", 100, &size).code() ==
                   absl::StatusCode::kPermissionDenied
               ? 0
               : 3;
  });
  std::remove(path.c_str());
  ::rmdir(dir);
  EXPECT_EQ(code, 0);
}

}  // namespace
}  // namespace pstrain
