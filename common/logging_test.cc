#include "common/logging.h"

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

using ::testing::MatchesRegex;

TEST(LoggingTest, TextRecordsCarryLevelTimeTagMessageAndFields) {
  const std::string line =
      FormatLogRecord(LogFormat::kText, 'W', "worker1", "a ps failed",
                      {{"ps", 1}, {"address", "localhost:4001"}, {"reason", "deadline exceeded"}});
  EXPECT_THAT(line, MatchesRegex("W [0-9][0-9]:[0-9][0-9]:[0-9][0-9]\\.[0-9][0-9][0-9] worker1\\] "
                                 "a ps failed address=localhost:4001 ps=1 "
                                 "reason=\"deadline exceeded\""));
  EXPECT_EQ(LogRecordLevel(line), 'W');
}

TEST(LoggingTest, JsonRecordsAreOneObjectWithDateTaskLevelMessageFields) {
  const std::string line = FormatLogRecord(LogFormat::kJson, 'I', "chief", "epoch 3 done",
                                           {{"epoch", 3}, {"loss", 0.25}});
  EXPECT_EQ(line.find('\n'), std::string::npos);
  const nlohmann::json record = nlohmann::json::parse(line);
  EXPECT_THAT(record["time"].get<std::string>(),
              MatchesRegex("20[0-9][0-9]-[01][0-9]-[0-3][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9]"
                           "\\.[0-9][0-9][0-9][+-][0-9][0-9]:[0-9][0-9]"));
  EXPECT_EQ(record["task"], "chief");
  EXPECT_EQ(record["level"], "info");
  EXPECT_EQ(record["message"], "epoch 3 done");
  EXPECT_EQ(record["fields"]["epoch"], 3);
  EXPECT_DOUBLE_EQ(record["fields"]["loss"].get<double>(), 0.25);
  EXPECT_EQ(LogRecordLevel(line), 'I');
  // No fields: no "fields" key.
  EXPECT_FALSE(nlohmann::json::parse(FormatLogRecord(LogFormat::kJson, 'E', "ps0", "x", nullptr))
                   .contains("fields"));
}

TEST(LoggingTest, InvalidUtf8InAMessageIsReplacedNotThrown) {
  const std::string line =
      FormatLogRecord(LogFormat::kJson, 'E', "ps0", "bad name \xff\xfe", nullptr);
  EXPECT_EQ(LogRecordLevel(line), 'E');
}

TEST(LoggingTest, TheFlagSetsTheFormatAndRejectsOtherValues) {
  std::string error;
  ASSERT_TRUE(absl::FindCommandLineFlag("log_format")->ParseFrom("json", &error)) << error;
  EXPECT_EQ(GetLogFormat(), LogFormat::kJson);
  EXPECT_FALSE(absl::FindCommandLineFlag("log_format")->ParseFrom("xml", &error));
  EXPECT_EQ(error, "Illegal value 'xml' specified for flag 'log_format'; must be text or json");
  ASSERT_TRUE(absl::FindCommandLineFlag("log_format")->ParseFrom("text", &error));
  EXPECT_EQ(GetLogFormat(), LogFormat::kText);
}

TEST(LoggingTest, OtherLinesHaveNoLevel) {
  EXPECT_EQ(LogRecordLevel("Epoch 1/10 - loss: 0.5"), 0);
  EXPECT_EQ(LogRecordLevel("{not json"), 0);
  EXPECT_EQ(LogRecordLevel(""), 0);
}

}  // namespace
}  // namespace pstrain
