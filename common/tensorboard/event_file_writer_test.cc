#include "common/tensorboard/event_file_writer.h"

#include <dirent.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/checkpoint/crc32c.h"
#include "common/tensorboard/event.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

uint64_t ReadLittleEndian(const std::string& bytes, size_t at, int size) {
  uint64_t value = 0;
  for (int i = size - 1; i >= 0; --i) {
    value = (value << 8) | static_cast<uint8_t>(bytes[at + i]);
  }
  return value;
}

// Splits a TFRecord file into its records, checking both CRCs of each.
std::vector<std::string> ReadRecords(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string bytes = buffer.str();
  std::vector<std::string> records;
  size_t at = 0;
  while (at < bytes.size()) {
    EXPECT_LE(at + 12, bytes.size());
    const uint64_t length = ReadLittleEndian(bytes, at, 8);
    EXPECT_EQ(ReadLittleEndian(bytes, at + 8, 4), MaskCrc32c(Crc32c(bytes.data() + at, 8)));
    const std::string data = bytes.substr(at + 12, length);
    EXPECT_EQ(ReadLittleEndian(bytes, at + 12 + length, 4), MaskCrc32c(Crc32c(data)));
    records.push_back(data);
    at += 16 + length;
  }
  EXPECT_EQ(at, bytes.size());
  return records;
}

TEST(EventFileWriterTest, MaskedCrcIsTensorFlows) {
  // TensorFlow's crc32c::Mask of the CRC of "123456789" (0xE3069283).
  EXPECT_EQ(MaskCrc32c(0xE3069283u), ((0xE3069283u >> 15) | (0xE3069283u << 17)) + 0xa282ead8u);
  EXPECT_EQ(MaskCrc32c(0), 0xa282ead8u);
  // An empty record: 8 zero bytes of length, its masked CRC, no data, the empty CRC.
  const std::string empty = FrameTfRecord("");
  ASSERT_EQ(empty.size(), 16u);
  EXPECT_EQ(ReadLittleEndian(empty, 12, 4), 0xa282ead8u);
}

TEST(EventFileWriterTest, WritesAVersionEventThenScalarSummaries) {
  char dir_template[] = "/tmp/event_writer_test-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = std::string(dir_template) + "/run/train";  // parents are made
  absl::StatusOr<std::unique_ptr<EventFileWriter>> writer = EventFileWriter::Create(dir);
  ASSERT_TRUE(writer.ok()) << writer.status();
  EXPECT_THAT((*writer)->path(), StartsWith(dir + "/events.out.tfevents."));
  EXPECT_THAT((*writer)->path(), testing::EndsWith(".v2"));
  ASSERT_TRUE((*writer)->WriteScalars(0, {{"epoch_loss", 0.5}, {"epoch_accuracy", 0.75}}).ok());
  ASSERT_TRUE((*writer)->WriteScalars(7, {{"batch_loss", 1.25}}).ok());

  // Flushed as written: readable before the writer closes.
  const std::vector<std::string> records = ReadRecords((*writer)->path());
  ASSERT_EQ(records.size(), 3u);
  tensorboard::Event first, second, third;
  ASSERT_TRUE(first.ParseFromString(records[0]));
  EXPECT_EQ(first.file_version(), "brain.Event:2");
  ASSERT_TRUE(second.ParseFromString(records[1]));
  EXPECT_EQ(second.step(), 0);
  ASSERT_EQ(second.summary().value_size(), 2);
  EXPECT_EQ(second.summary().value(0).tag(), "epoch_loss");
  EXPECT_FLOAT_EQ(second.summary().value(0).simple_value(), 0.5f);
  EXPECT_EQ(second.summary().value(1).tag(), "epoch_accuracy");
  EXPECT_FLOAT_EQ(second.summary().value(1).simple_value(), 0.75f);
  EXPECT_GT(second.wall_time(), 1.6e9);
  ASSERT_TRUE(third.ParseFromString(records[2]));
  EXPECT_EQ(third.step(), 7);
  EXPECT_FLOAT_EQ(third.summary().value(0).simple_value(), 1.25f);
  writer->reset();
  std::system(("rm -rf " + std::string(dir_template)).c_str());
}

TEST(EventFileWriterTest, AFolderThatCannotBeMadeIsNamed) {
  absl::StatusOr<std::unique_ptr<EventFileWriter>> writer =
      EventFileWriter::Create("/proc/no-such-place/train");
  ASSERT_FALSE(writer.ok());
  EXPECT_THAT(std::string(writer.status().message()), HasSubstr("/proc/no-such-place"));
}

}  // namespace
}  // namespace pstrain
