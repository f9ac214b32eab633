#include "common/checkpoint/checkpoint.h"

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <limits>
#include <fstream>
#include <string>

#include "common/unprivileged.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

namespace fs = std::filesystem;

std::string FreshDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
  fs::remove_all(dir);
  return dir;
}

CheckpointContents Contents(int64_t step, float base) {
  CheckpointContents c;
  c.step = step;
  c.epoch = static_cast<int>(step / 10);
  *c.job_spec = {{"fit", {{"epochs", 4}}}};
  *c.metadata = {{"note", "test"}};
  c.tensors.push_back({"dense/kernel", Tensor({2, 3}, {base, 1, 2, 3, 4, 5})});
  c.tensors.push_back({"dense/kernel/optimizer/momentum", Tensor({2, 3}, {base, 0, 0, 0, 0, 1})});
  c.tensors.push_back({"dense/bias", Tensor({3}, {base, -1, -2})});
  c.tensors.push_back({"scalar", Tensor(std::vector<int64_t>{}, {base})});
  return c;
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s;
}

TEST(CheckpointTest, RoundTrip) {
  const std::string root = FreshDir("round_trip");
  CheckpointWriter writer(root, {});
  absl::StatusOr<std::string> path = writer.Write(Contents(20, 7));
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, root + "/ckpt-20");
  EXPECT_EQ(ReadText(root + "/latest"), "ckpt-20");
  for (const std::string& p : {root, *path}) {
    absl::StatusOr<std::unique_ptr<CheckpointReader>> reader = CheckpointReader::Open(p);
    ASSERT_TRUE(reader.ok()) << reader.status();
    EXPECT_EQ((*reader)->path(), root + "/ckpt-20");
    EXPECT_EQ((*reader)->step(), 20);
    EXPECT_EQ((*reader)->epoch(), 2);
    EXPECT_EQ((*reader)->job_spec()["fit"]["epochs"], 4);
    EXPECT_EQ((*reader)->metadata()["note"], "test");
    ASSERT_EQ((*reader)->tensors().size(), 4u);
    const CheckpointContents expected = Contents(20, 7);
    for (const NamedTensor& t : expected.tensors) {
      absl::StatusOr<const Tensor*> got = (*reader)->Get(t.name);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ((*got)->shape(), t.tensor.shape()) << t.name;
      EXPECT_EQ(std::vector<float>((*got)->values().begin(), (*got)->values().end()),
                std::vector<float>(t.tensor.values().begin(), t.tensor.values().end()));
    }
    EXPECT_EQ((*reader)->Get("nope").status().code(), absl::StatusCode::kNotFound);
  }
}

TEST(CheckpointTest, SplitsDataFilesAtTheLimit) {
  const std::string root = FreshDir("split");
  CheckpointWriter writer(root, {/*keep=*/3, /*max_data_file_bytes=*/30});
  ASSERT_TRUE(writer.Write(Contents(1, 0)).ok());
  EXPECT_TRUE(fs::exists(root + "/ckpt-1/data-00000"));
  EXPECT_TRUE(fs::exists(root + "/ckpt-1/data-00001"));
  absl::StatusOr<std::unique_ptr<CheckpointReader>> reader = CheckpointReader::Open(root);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*(*reader)->Get("dense/bias"))->values()[2], -2);
}

TEST(CheckpointTest, RejectsDuplicateNames) {
  CheckpointContents c = Contents(1, 0);
  c.tensors.push_back(c.tensors[0]);
  CheckpointWriter writer(FreshDir("dup"), {});
  EXPECT_EQ(writer.Write(c).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CheckpointTest, KeepsTheLastK) {
  const std::string root = FreshDir("keep");
  CheckpointWriter writer(root, {/*keep=*/2});
  for (int64_t step : {10, 20, 30, 40}) ASSERT_TRUE(writer.Write(Contents(step, 0)).ok());
  EXPECT_FALSE(fs::exists(root + "/ckpt-10"));
  EXPECT_FALSE(fs::exists(root + "/ckpt-20"));
  EXPECT_TRUE(fs::exists(root + "/ckpt-30"));
  EXPECT_TRUE(fs::exists(root + "/ckpt-40"));
  EXPECT_EQ(ReadText(root + "/latest"), "ckpt-40");
}

TEST(CheckpointTest, NoCheckpointIsNotFound) {
  EXPECT_EQ(FindLatestGoodCheckpoint(FreshDir("none")).status().code(),
            absl::StatusCode::kNotFound);
  const std::string empty = FreshDir("empty");
  fs::create_directories(empty);
  EXPECT_EQ(FindLatestGoodCheckpoint(empty).status().code(), absl::StatusCode::kNotFound);
}

// Two good checkpoints; `damage` spoils the newest; the older must be chosen.
void ExpectFallback(const std::string& name,
                    const std::function<void(const std::string& newest)>& damage,
                    const std::string& expected_error) {
  const std::string root = FreshDir(name);
  CheckpointWriter writer(root, {});
  ASSERT_TRUE(writer.Write(Contents(10, 1)).ok());
  ASSERT_TRUE(writer.Write(Contents(20, 2)).ok());
  damage(root + "/ckpt-20");
  absl::StatusOr<std::unique_ptr<CheckpointReader>> direct =
      CheckpointReader::Open(root + "/ckpt-20");
  ASSERT_FALSE(direct.ok());
  EXPECT_EQ(direct.status().code(), absl::StatusCode::kDataLoss) << direct.status();
  EXPECT_NE(direct.status().message().find(expected_error), std::string::npos)
      << direct.status();
  absl::StatusOr<std::string> found = FindLatestGoodCheckpoint(root);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, root + "/ckpt-10");
  absl::StatusOr<std::unique_ptr<CheckpointReader>> reader = CheckpointReader::Open(root);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->step(), 10);
  EXPECT_EQ((*(*reader)->Get("dense/bias"))->values()[0], 1);
}

TEST(CheckpointTest, TruncatedDataFileFallsBack) {
  ExpectFallback("truncated", [](const std::string& dir) {
    fs::resize_file(dir + "/data-00000", 20);
  }, "truncated");
}

TEST(CheckpointTest, FlippedByteFallsBack) {
  ExpectFallback("flipped", [](const std::string& dir) {
    std::fstream f(dir + "/data-00000", std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(5);
    char c;
    f.get(c);
    f.seekp(5);
    f.put(static_cast<char>(c ^ 0x10));
  }, "CRC-32C");
}

TEST(CheckpointTest, MissingManifestFallsBack) {
  ExpectFallback("no_manifest", [](const std::string& dir) {
    fs::remove(dir + "/manifest.json");
  }, "manifest.json is missing");
}

TEST(CheckpointTest, TruncatedManifestFallsBack) {
  ExpectFallback("short_manifest", [](const std::string& dir) {
    fs::resize_file(dir + "/manifest.json", 40);
  }, "not valid JSON");
}

// Rewrites the first tensor entry of `dir`'s manifest with `edit`.
void EditManifest(const std::string& dir, const std::function<void(nlohmann::json*)>& edit) {
  std::ifstream in(dir + "/manifest.json");
  nlohmann::json manifest = nlohmann::json::parse(in);
  edit(&manifest);
  std::ofstream(dir + "/manifest.json", std::ios::trunc) << manifest.dump();
}

// offset + length past 2^63 - 1 overflowed to a negative sum that passed the size check,
// and the CRC read far outside the file: train and the chief segfaulted at every start.
TEST(CheckpointTest, OffsetPlusLengthPastInt64FallsBack) {
  ExpectFallback("offset_overflow", [](const std::string& dir) {
    EditManifest(dir, [](nlohmann::json* m) {
      (*m)["tensors"][0]["offset"] = std::numeric_limits<int64_t>::max() - 8;
    });
  }, "truncated");
  ExpectFallback("offset_unsigned", [](const std::string& dir) {
    EditManifest(dir, [](nlohmann::json* m) {
      (*m)["tensors"][0]["offset"] = std::numeric_limits<uint64_t>::max();
    });
  }, "malformed tensor entry");
  ExpectFallback("length_huge", [](const std::string& dir) {
    EditManifest(dir, [](nlohmann::json* m) {
      (*m)["tensors"][0]["shape"] = {int64_t{1} << 62, 4};
      (*m)["tensors"][0]["length"] = 0;
    });
  }, "does not match shape");
  ExpectFallback("crc_wide", [](const std::string& dir) {
    EditManifest(dir, [](nlohmann::json* m) { (*m)["tensors"][0]["crc32c"] = int64_t{1} << 40; });
  }, "malformed tensor entry");
}

// An epoch of 2^40 was read as 0 (a narrowing get<int>); it is refused and the previous
// good checkpoint used.
TEST(CheckpointTest, EpochBeyondAnIntFallsBack) {
  ExpectFallback("epoch_huge", [](const std::string& dir) {
    EditManifest(dir, [](nlohmann::json* m) { (*m)["epoch"] = int64_t{1} << 40; });
  }, "epoch 1099511627776 is not a count of epochs");
  ExpectFallback("step_unsigned", [](const std::string& dir) {
    EditManifest(dir, [](nlohmann::json* m) { (*m)["step"] = std::numeric_limits<uint64_t>::max(); });
  }, "lacks step");
}

// A field of another type than the format's (a number where a string belongs) is a
// corrupt manifest, not a crash: json::value() threw on these and aborted the reader.
TEST(CheckpointTest, AManifestFieldOfTheWrongTypeFallsBack) {
  ExpectFallback("format_number", [](const std::string& dir) {
    EditManifest(dir, [](nlohmann::json* m) { (*m)["format"] = 7; });
  }, "not a pstrain checkpoint manifest");
  ExpectFallback("dtype_number", [](const std::string& dir) {
    EditManifest(dir, [](nlohmann::json* m) { (*m)["tensors"][0]["dtype"] = 5; });
  }, "unsupported dtype");
}

TEST(CheckpointTest, AnUnreadableManifestIsSaidToBeUnreadable) {
  ExpectFallback("manifest_dir", [](const std::string& dir) {
    fs::remove(dir + "/manifest.json");
    fs::create_directories(dir + "/manifest.json");  // exists, but cannot be read as a file
  }, "cannot read");
}

TEST(CheckpointTest, CheckWritableFindsADirectoryItCannotWriteAtOnce) {
  const std::string root = FreshDir("writable");
  EXPECT_TRUE(CheckpointWriter(root + "/a/b", {}).CheckWritable().ok());
  EXPECT_TRUE(fs::is_directory(root + "/a/b"));
  EXPECT_TRUE(fs::is_empty(root + "/a/b"));  // the probe is gone
  // Under a regular file nothing can be made, whoever runs the test.
  std::ofstream(root + "/file") << "x";
  absl::Status under_file = CheckpointWriter(root + "/file/ckpt", {}).CheckWritable();
  EXPECT_FALSE(under_file.ok());
  EXPECT_NE(under_file.message().find(root + "/file/ckpt"), std::string::npos) << under_file;
  // A read-only directory (without root's power to write anywhere).
  fs::create_directories(root + "/ro");
  fs::permissions(root + "/ro", fs::perms::owner_read | fs::perms::owner_exec);
  const int code = RunUnprivileged([&] {
    absl::Status read_only = CheckpointWriter(root + "/ro", {}).CheckWritable();
    return read_only.code() == absl::StatusCode::kPermissionDenied &&
                   read_only.message().find("is not writable") != std::string::npos
               ? 0
               : 1;
  });
  fs::permissions(root + "/ro", fs::perms::owner_all);
  EXPECT_EQ(code, 0);
}

TEST(CheckpointTest, NothingVerifiesIsDataLoss) {
  const std::string root = FreshDir("all_bad");
  CheckpointWriter writer(root, {});
  ASSERT_TRUE(writer.Write(Contents(10, 1)).ok());
  fs::remove(root + "/ckpt-10/manifest.json");
  EXPECT_EQ(FindLatestGoodCheckpoint(root).status().code(), absl::StatusCode::kDataLoss);
}

// A writer that died before its rename leaves a temp directory (and maybe a complete
// ckpt-N that `latest` never named): neither is read.
TEST(CheckpointTest, HalfWrittenCheckpointIsIgnored) {
  const std::string root = FreshDir("half");
  CheckpointWriter writer(root, {});
  ASSERT_TRUE(writer.Write(Contents(10, 1)).ok());
  fs::create_directories(root + "/.tmp-ckpt-20-123-0");
  std::ofstream(root + "/.tmp-ckpt-20-123-0/data-00000") << "partial";
  absl::StatusOr<std::string> found = FindLatestGoodCheckpoint(root);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, root + "/ckpt-10");
  // The next write clears the stale temp directory.
  ASSERT_TRUE(writer.Write(Contents(30, 3)).ok());
  EXPECT_FALSE(fs::exists(root + "/.tmp-ckpt-20-123-0"));
  EXPECT_EQ(*FindLatestGoodCheckpoint(root), root + "/ckpt-30");
}

TEST(CheckpointTest, WithoutLatestTheNewestGoodOneIsUsed) {
  const std::string root = FreshDir("no_latest");
  CheckpointWriter writer(root, {});
  ASSERT_TRUE(writer.Write(Contents(10, 1)).ok());
  ASSERT_TRUE(writer.Write(Contents(20, 2)).ok());
  fs::remove(root + "/latest");
  EXPECT_EQ(*FindLatestGoodCheckpoint(root), root + "/ckpt-20");
}

}  // namespace
}  // namespace pstrain
