// A ps's part of sharded checkpoints against a real VariableStore and real files: a round
// trip, and hostile folder names, links, corrupt or truncated shard files, lying
// manifests and misfit slices refused with one line and nothing changed.

#include "ps_server/checkpoint_shards.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint.h"
#include "common/checkpoint/crc32c.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

namespace fs = std::filesystem;

std::string FreshRoot(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string root = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name);
  fs::remove_all(root);
  fs::create_directories(root);
  return root;
}

std::vector<float> Values(const Tensor& t) { return {t.values().begin(), t.values().end()}; }

// A "Key:   N kB" line of /proc/self/status, in KiB (-1 when missing).
int64_t StatusKib(const std::string& key) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(key + ":", 0) == 0) return std::stoll(line.substr(key.size() + 1));
  }
  return -1;
}

OptimizerConfig Adam() {
  OptimizerConfig config;
  config.set_name("adam");
  return config;
}

// One ps holding "emb" whole ([4, 2]) under Adam, and a committed checkpoint ckpt-5 of it
// in `root`, written through CheckpointShards and a CheckpointWriter as the chief does.
class CheckpointShardsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = FreshRoot(::testing::UnitTest::GetInstance()->current_test_info()->name());
    ASSERT_TRUE(store_.CreateVariables({{"emb", Tensor({4, 2}, {1, 2, 3, 4, 5, 6, 7, 8})}}, Adam())
                    .ok());
    ASSERT_TRUE(store_.Push({{"emb", Tensor({4, 2}, {1, 1, 1, 1, 1, 1, 1, 1})}}).ok());
    CheckpointShards::Options options;
    options.block_bytes = 16;  // two rows a block
    shards_ = std::make_unique<CheckpointShards>(&store_, root_, options);
    slices_ = {{"emb", "emb", {4, 2}, 0, 4}};
    saved_ = *store_.ReadState({"emb"});

    CheckpointWriter writer(root_, CheckpointWriter::Options());
    auto temp = writer.BeginSharded(5);
    ASSERT_TRUE(temp.ok());
    auto file = shards_->Write(*temp, 0, slices_);
    ASSERT_TRUE(file.ok()) << file.status();
    EXPECT_EQ(file->pieces.size(), 3u);  // the value and Adam's two slots
    EXPECT_EQ(file->pieces[0].blocks.size(), 2u);
    CheckpointContents header;
    header.step = 5;
    *header.metadata = {{"variables",
                        {{"emb",
                          {{"shape", {4, 2}},
                           {"iterations", saved_[0].iterations},
                           {"version", saved_[0].version},
                           {"slots", file->counts[0].slots}}}}}};
    auto path = writer.CommitSharded(*temp, header, {*file});
    ASSERT_TRUE(path.ok()) << path.status();
    dir_ = *path;

    // Then the ps moves on: a restore must bring the saved state back.
    ASSERT_TRUE(store_.Push({{"emb", Tensor({4, 2}, {2, 2, 2, 2, 2, 2, 2, 2})}}).ok());
    moved_ = *store_.ReadState({"emb"});
  }

  // The store still holds what it held before the refused call.
  void ExpectUnchanged() {
    auto now = store_.ReadState({"emb"});
    ASSERT_TRUE(now.ok());
    EXPECT_EQ(Values((*now)[0].value), Values(moved_[0].value));
    EXPECT_EQ((*now)[0].version, moved_[0].version);
  }

  void Corrupt(const std::string& file, long offset) {
    std::fstream f(absl::StrCat(dir_, "/", file), std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(offset);
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x40);
    f.seekp(offset);
    f.write(&c, 1);
  }

  std::string root_;
  std::string dir_;
  VariableStore store_;
  std::unique_ptr<CheckpointShards> shards_;
  std::vector<ShardSlice> slices_;
  std::vector<VariableSnapshot> saved_;
  std::vector<VariableSnapshot> moved_;
};

TEST_F(CheckpointShardsTest, RestoresTheValueSlotsAndCountsItWrote) {
  ASSERT_TRUE(shards_->Restore("ckpt-5", slices_).ok());
  auto now = store_.ReadState({"emb"});
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(Values((*now)[0].value), Values(saved_[0].value));
  EXPECT_EQ((*now)[0].iterations, saved_[0].iterations);
  EXPECT_EQ((*now)[0].version, saved_[0].version);
  ASSERT_EQ((*now)[0].slots.size(), saved_[0].slots.size());
  for (size_t i = 0; i < saved_[0].slots.size(); ++i) {
    EXPECT_EQ(Values((*now)[0].slots[i].tensor), Values(saved_[0].slots[i].tensor));
  }
}

TEST_F(CheckpointShardsTest, HostileFolderNamesAreRefusedWithOneLine) {
  fs::create_directories(absl::StrCat(root_, "/../outside/ckpt-5"));
  for (const char* name : {"../outside/ckpt-5", "ckpt-5/..", "/etc", "ckpt-", "ckpt-5/",
                           "ckpt-5x", ".tmp-ckpt-1-2", "..", "", "latest", "ckpt-5\n"}) {
    SCOPED_TRACE(name);
    absl::Status restored = shards_->Restore(name, slices_);
    EXPECT_EQ(restored.code(), absl::StatusCode::kInvalidArgument) << restored;
    EXPECT_EQ(std::string(restored.message()).find('\n'), std::string::npos);
    absl::StatusOr<ShardFile> written = shards_->Write(name, 0, slices_);
    EXPECT_EQ(written.status().code(), absl::StatusCode::kInvalidArgument);
  }
  // A committed name may not be written into, a temporary one not restored from.
  EXPECT_EQ(shards_->Write("ckpt-5", 0, slices_).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(shards_->Restore(".tmp-ckpt-5-1-1", slices_).code(),
            absl::StatusCode::kInvalidArgument);
  ExpectUnchanged();
}

TEST_F(CheckpointShardsTest, ALinkOrAMissingFolderIsNotFollowed) {
  const std::string outside = FreshRoot("checkpoint_shards_outside");
  ASSERT_EQ(::symlink(outside.c_str(), absl::StrCat(root_, "/ckpt-9").c_str()), 0);
  ASSERT_EQ(::symlink(outside.c_str(), absl::StrCat(root_, "/.tmp-ckpt-9-1-1").c_str()), 0);
  EXPECT_EQ(shards_->Restore("ckpt-9", slices_).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(shards_->Write(".tmp-ckpt-9-1-1", 0, slices_).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(fs::is_empty(outside));
  EXPECT_EQ(shards_->Restore("ckpt-6", slices_).code(), absl::StatusCode::kFailedPrecondition);
  ExpectUnchanged();
}

TEST_F(CheckpointShardsTest, ACorruptOrTruncatedShardFileChangesNothing) {
  Corrupt("shard-00000", 20);  // inside the value's second block
  absl::Status restored = shards_->Restore("ckpt-5", slices_);
  EXPECT_EQ(restored.code(), absl::StatusCode::kDataLoss) << restored;
  EXPECT_NE(restored.message().find("CRC-32C"), absl::string_view::npos) << restored;
  ExpectUnchanged();
  Corrupt("shard-00000", 20);  // repaired
  ASSERT_EQ(::truncate(absl::StrCat(dir_, "/shard-00000").c_str(), 40), 0);
  restored = shards_->Restore("ckpt-5", slices_);
  EXPECT_EQ(restored.code(), absl::StatusCode::kDataLoss) << restored;
  ExpectUnchanged();
}

TEST_F(CheckpointShardsTest, ALyingManifestIsRefused) {
  const std::string manifest_path = absl::StrCat(dir_, "/manifest.json");
  std::ifstream in(manifest_path);
  const nlohmann::json good = nlohmann::json::parse(in);
  const auto refused_with = [&](const nlohmann::json& manifest, absl::StatusCode code) {
    std::ofstream(manifest_path, std::ios::trunc) << manifest.dump();
    absl::Status restored = shards_->Restore("ckpt-5", slices_);
    EXPECT_EQ(restored.code(), code) << restored;
    ExpectUnchanged();
  };
  nlohmann::json m = good;
  m["tensors"][0]["pieces"][0]["blocks"][0]["length"] = uint64_t{1} << 63;
  refused_with(m, absl::StatusCode::kDataLoss);
  m = good;
  m["tensors"][0]["pieces"][0]["blocks"][1]["offset"] = int64_t{9223372036854775800};
  refused_with(m, absl::StatusCode::kDataLoss);
  m = good;
  m["tensors"][0]["pieces"][0]["row_end"] = 3;  // a gap
  refused_with(m, absl::StatusCode::kDataLoss);
  m = good;
  m["files"][0]["name"] = "../shard-00000";
  refused_with(m, absl::StatusCode::kDataLoss);
  m = good;
  m["tensors"][0]["shape"] = {4, 3};
  refused_with(m, absl::StatusCode::kDataLoss);
  m = good;
  m["version"] = 3;
  std::ofstream(manifest_path, std::ios::trunc) << m.dump();
  absl::Status restored = shards_->Restore("ckpt-5", slices_);
  EXPECT_EQ(restored.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(restored.message().find("unsupported checkpoint format version 3"),
            absl::string_view::npos)
      << restored;
  auto reader = CheckpointReader::Open(dir_);
  EXPECT_FALSE(reader.ok());
  EXPECT_NE(reader.status().message().find("unsupported checkpoint format version 3"),
            absl::string_view::npos);
  ExpectUnchanged();
}

TEST_F(CheckpointShardsTest, ANonFiniteValueWithAValidChecksumChangesNothing) {
  // A checkpoint whose bytes match their CRC-32C but hold a NaN (a hostile or buggy
  // writer): the value's second block gets one, and the manifest the block's new CRC.
  const std::string shard = absl::StrCat(dir_, "/shard-00000");
  const float nan = std::numeric_limits<float>::quiet_NaN();
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(20);
    f.write(reinterpret_cast<const char*>(&nan), sizeof(nan));
  }
  std::string block(16, '\0');
  {
    std::ifstream f(shard, std::ios::binary);
    f.seekg(16);
    f.read(block.data(), 16);
  }
  const std::string manifest_path = absl::StrCat(dir_, "/manifest.json");
  nlohmann::json m = nlohmann::json::parse(std::ifstream(manifest_path));
  m["tensors"][0]["pieces"][0]["blocks"][1]["crc32c"] = Crc32c(block);
  std::ofstream(manifest_path, std::ios::trunc) << m.dump();

  absl::Status restored = shards_->Restore("ckpt-5", slices_);
  EXPECT_EQ(restored.code(), absl::StatusCode::kInvalidArgument) << restored;
  EXPECT_NE(restored.message().find("non-finite value (nan)"), absl::string_view::npos) << restored;
  EXPECT_EQ(std::string(restored.message()).find('\n'), std::string::npos);
  ExpectUnchanged();
}

// The ps's peak resident memory (VmHWM, reset just before) while it restores a 64 MiB
// shard: the rows go straight into the variable, so the restore adds about one block
// read at a time, not a second copy of the shard (which doubled a ps's memory before).
TEST(CheckpointShardsMemoryTest, ARestoreHoldsNoSecondCopyOfTheShard) {
  const std::string root = FreshRoot("checkpoint_shards_memory");
  constexpr int64_t kRows = 65536, kCols = 256;  // 64 MiB of floats
  VariableStore store;
  OptimizerConfig sgd;
  sgd.set_name("sgd");
  {
    std::vector<float> values(kRows * kCols);
    for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 1000) / 1000;
    ASSERT_TRUE(
        store.CreateVariables({{"table", Tensor({kRows, kCols}, std::move(values))}}, sgd).ok());
  }
  CheckpointShards::Options options;
  options.block_bytes = 1 << 20;
  CheckpointShards shards(&store, root, options);
  const std::vector<ShardSlice> slices = {{"table", "table", {kRows, kCols}, 0, kRows}};
  CheckpointWriter writer(root, CheckpointWriter::Options());
  auto temp = writer.BeginSharded(1);
  ASSERT_TRUE(temp.ok());
  auto file = shards.Write(*temp, 0, slices);
  ASSERT_TRUE(file.ok()) << file.status();
  CheckpointContents header;
  header.step = 1;
  *header.metadata = {{"variables", {{"table", {{"shape", {kRows, kCols}}, {"version", 7}}}}}};
  ASSERT_TRUE(writer.CommitSharded(*temp, header, {*file}).ok());
  ASSERT_TRUE(
      store.Push({{"table", Tensor({kRows, kCols}, std::vector<float>(kRows * kCols, 1))}}).ok());

  // Linux: writing 5 to clear_refs resets the peak to the current resident size.
  std::ofstream("/proc/self/clear_refs") << "5";
  const int64_t before_kib = StatusKib("VmHWM");
  ASSERT_TRUE(shards.Restore("ckpt-1", slices).ok());
  const int64_t growth_kib = StatusKib("VmHWM") - before_kib;
  EXPECT_LT(growth_kib, 16 * 1024)
      << "a 64 MiB restore raised the peak by " << growth_kib << " KiB";
  auto restored = store.ReadState({"table"});
  ASSERT_TRUE(restored.ok());
  EXPECT_EQ((*restored)[0].version, 7);
  EXPECT_EQ((*restored)[0].value.values()[kCols + 3], static_cast<float>(kCols + 3) / 1000);
  fs::remove_all(root);
}

TEST_F(CheckpointShardsTest, SlicesThatDoNotFitAreRefused) {
  const std::vector<std::vector<ShardSlice>> bad = {
      {{"emb", "emb", {4, 3}, 0, 4}},                                 // another shape
      {{"emb", "emb", {8, 2}, 2, 6}},                                 // rows of another table
      {{"nope", "nope", {4, 2}, 0, 4}},                               // not held here
      {{"emb", "emb", {4, 2}, 0, 5}},                                 // rows past the end
      {{"emb", "emb", {4, 2}, 0, 4}, {"emb", "emb", {4, 2}, 0, 4}},   // twice
      {{"emb", "emb", {int64_t{1} << 62, 1 << 30}, 0, 4}},            // overflowing shape
  };
  for (const auto& slices : bad) {
    EXPECT_FALSE(shards_->Restore("ckpt-5", slices).ok());
    EXPECT_FALSE(shards_->Write(".tmp-ckpt-5-1-1", 0, slices).ok());
  }
  ExpectUnchanged();
}

}  // namespace
}  // namespace pstrain
