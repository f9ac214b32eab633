// Format v2's shard files and manifest: written in pieces by two writers, committed, read
// back whole (CheckpointReader) and by row ranges that cross files and blocks.

#include "common/checkpoint/shard_files.h"

#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint.h"
#include "gtest/gtest.h"

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

// Rows [begin, end) of a [10, 3] table whose element (r, c) is r * 10 + c.
Tensor Rows(int64_t begin, int64_t end) {
  std::vector<float> values;
  for (int64_t r = begin; r < end; ++r) {
    for (int c = 0; c < 3; ++c) values.push_back(static_cast<float>(r * 10 + c));
  }
  return Tensor({end - begin, 3}, values);
}

TEST(ShardFilesTest, NamesOfCheckpointFolders) {
  EXPECT_TRUE(IsCommittedCheckpointName("ckpt-12"));
  EXPECT_TRUE(IsTempCheckpointName(".tmp-ckpt-12-345-0"));
  for (const char* bad : {"ckpt-", "ckpt-1/..", "../ckpt-1", "ckpt-1a", "latest", ""}) {
    EXPECT_FALSE(IsCommittedCheckpointName(bad)) << bad;
  }
  for (const char* bad : {".tmp-ckpt-1-2", ".tmp-ckpt-1-2-3/..", ".tmp-latest", ".tmp-ckpt-1-2-x"}) {
    EXPECT_FALSE(IsTempCheckpointName(bad)) << bad;
  }
}

TEST(ShardFilesTest, PiecesOfTwoFilesReadBackWholeAndByRows) {
  const std::string root = FreshRoot("shard_files_round_trip");
  CheckpointWriter writer(root, CheckpointWriter::Options());
  auto temp = writer.BeginSharded(7);
  ASSERT_TRUE(temp.ok()) << temp.status();
  const std::string dir = absl::StrCat(root, "/", *temp);
  std::vector<ShardFile> files;
  // ps 1 holds rows [6, 10) and the scalar; ps 0 rows [0, 6); blocks of two rows.
  for (int ps : {1, 0}) {
    auto file = ShardFileWriter::Create(dir, ShardFileName(ps), 24);
    ASSERT_TRUE(file.ok()) << file.status();
    const int64_t begin = ps == 0 ? 0 : 6;
    const int64_t end = ps == 0 ? 6 : 10;
    ASSERT_TRUE((*file)->Add("table", {10, 3}, begin, end, Rows(begin, end)).ok());
    if (ps == 1) ASSERT_TRUE((*file)->Add("scale", {}, 0, 1, Tensor({}, {2.5f})).ok());
    auto done = (*file)->Finish({});
    ASSERT_TRUE(done.ok()) << done.status();
    files.push_back(*done);
  }
  CheckpointContents header;
  header.step = 7;
  header.epoch = 1;
  auto path = writer.CommitSharded(*temp, header, files);
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_FALSE(fs::exists(dir));

  auto reader = CheckpointReader::Open(root);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->version(), 2);
  EXPECT_EQ((*reader)->step(), 7);
  auto table = (*reader)->Get("table");
  ASSERT_TRUE(table.ok());
  const Tensor whole = Rows(0, 10);
  EXPECT_EQ(std::vector<float>((*table)->values().begin(), (*table)->values().end()),
            std::vector<float>(whole.values().begin(), whole.values().end()));
  auto scale = (*reader)->Get("scale");
  ASSERT_TRUE(scale.ok());
  EXPECT_EQ((*scale)->values()[0], 2.5f);

  CheckpointReader::OpenOptions header_only;
  header_only.load_sharded_tensors = false;
  auto light = CheckpointReader::Open(root, header_only);
  ASSERT_TRUE(light.ok()) << light.status();
  EXPECT_FALSE((*light)->tensors_loaded());
  EXPECT_TRUE((*light)->tensors().empty());

  // Rows [3, 9): across both files and several blocks.
  auto manifest = ReadShardedManifest(*path);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  const StoredTensor& stored = manifest->tensors[manifest->index.at("table")];
  std::vector<float> rows(6 * 3);
  ASSERT_TRUE(ReadTensorRows(*path, *manifest, stored, 3, 9, rows.data()).ok());
  const Tensor want = Rows(3, 9);
  EXPECT_EQ(rows, std::vector<float>(want.values().begin(), want.values().end()));
  EXPECT_FALSE(ReadTensorRows(*path, *manifest, stored, 3, 11, rows.data()).ok());
}

}  // namespace
}  // namespace pstrain
