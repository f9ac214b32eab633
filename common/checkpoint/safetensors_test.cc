#include "common/checkpoint/safetensors.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

std::string FreshDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::string Header(const std::string& json) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(json.size() >> (8 * i));
  return out + json;
}

TEST(SafetensorsTest, WhatIsWrittenReadsBackWithItsMetadata) {
  const std::string dir = FreshDir("roundtrip");
  CheckpointContents contents;
  contents.step = 7;
  contents.tensors = {{"dense/kernel", Tensor({2, 3}, {1, 2, 3, 4, 5, 6})},
                      {"dense/kernel/optimizer/momentum", Tensor({2, 3})},
                      {"dense/bias", Tensor({3}, {-1, 0.5f, 7})},
                      {"empty", Tensor({0, 4})}};
  ASSERT_TRUE(CheckpointWriter(dir + "/ckpt", {}).Write(contents).ok());
  auto checkpoint = CheckpointReader::Open(dir + "/ckpt");
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  ASSERT_TRUE(WriteSafetensors(**checkpoint, {"dense/kernel", "dense/bias", "empty"},
                               {{"format", "pt"}}, dir + "/model.safetensors")
                  .ok());
  absl::StatusOr<SafetensorsFile> file = ReadSafetensors(dir + "/model.safetensors");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->metadata.at("format"), "pt");
  ASSERT_EQ(file->tensors.size(), 3u);
  // Data order is the written order; the empty tensor takes no bytes.
  std::map<std::string, const Tensor*> by_name;
  for (const NamedTensor& t : file->tensors) by_name[t.name] = &t.tensor;
  EXPECT_EQ(by_name.at("dense/kernel")->shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(by_name.at("dense/kernel")->values()[5], 6);
  EXPECT_EQ(by_name.at("dense/bias")->values()[1], 0.5f);
  EXPECT_EQ(by_name.at("empty")->shape(), (std::vector<int64_t>{0, 4}));
}

TEST(SafetensorsTest, AHostileFileIsDataLossNeverAnOverrun) {
  const std::string four_floats(16, '\0');
  for (const auto& [what, bytes] : std::vector<std::pair<std::string, std::string>>{
           {"short", "abc"},
           {"header past the end", std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8) + "{}"},
           {"not json", Header("{oops") },
           {"offsets past the data", Header(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,32]}})") + four_floats},
           {"offsets huge", Header(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[18446744073709551600,18446744073709551615]}})") + four_floats},
           {"shape mismatch", Header(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})") + four_floats},
           {"shape overflow", Header(R"({"w":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,0]}})")},
           {"other dtype", Header(R"({"w":{"dtype":"F16","shape":[8],"data_offsets":[0,16]}})") + four_floats},
           {"overlap", Header(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})") + four_floats},
           {"trailing bytes", Header(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})") + four_floats},
           {"metadata not strings", Header(R"({"__metadata__":{"a":1}})")}}) {
    absl::StatusOr<SafetensorsFile> file = ParseSafetensors(bytes);
    EXPECT_EQ(file.status().code(), absl::StatusCode::kDataLoss) << what << ": " << file.status();
  }
  EXPECT_TRUE(ParseSafetensors(Header(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})") +
                               four_floats)
                  .ok());
}

}  // namespace
}  // namespace pstrain
