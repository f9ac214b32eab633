#include "deploy/local/process_group.h"

#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(ProcessGroupTest, CollectsLinesEnvironmentAndExitCodes) {
  ProcessGroup group;
  ASSERT_TRUE(group.Start({"a", "/bin/sh", {"-c", "echo out-$GREETING; echo err >&2; exit 3"},
                           {{"GREETING", "hi"}}}).ok());
  ASSERT_TRUE(group.Start({"b", "/bin/sh", {"-c", "echo done"}, {}}).ok());
  std::vector<std::string> lines;
  auto exits = group.Wait(absl::Seconds(30), absl::Seconds(5),
                          [&](int, const std::string& name, bool is_stderr, const std::string& line) {
                            lines.push_back(name + (is_stderr ? ":err:" : ":out:") + line);
                          },
                          nullptr);
  ASSERT_EQ(exits.size(), 2u);
  EXPECT_EQ(exits[0].exit_code, 3);
  EXPECT_EQ(exits[1].exit_code, 0);
  EXPECT_NE(std::find(lines.begin(), lines.end(), "a:out:out-hi"), lines.end());
  EXPECT_NE(std::find(lines.begin(), lines.end(), "a:err:err"), lines.end());
  EXPECT_NE(std::find(lines.begin(), lines.end(), "b:out:done"), lines.end());
}

TEST(ProcessGroupTest, ReportsEachChildsPeakResidentMemory) {
  ProcessGroup group;
  // The shell holds 64 MB of output in a variable; the other holds next to nothing.
  ASSERT_TRUE(group
                  .Start({"big",
                          "/bin/sh",
                          {"-c", "x=$(head -c 64000000 /dev/zero | tr '\\0' a); echo ${#x}"},
                          {}})
                  .ok());
  ASSERT_TRUE(group.Start({"small", "/bin/sh", {"-c", "exit 0"}, {}}).ok());
  std::string big_out;
  auto exits = group.Wait(
      absl::Seconds(60), absl::Seconds(5),
      [&](int, const std::string& name, bool is_stderr, const std::string& line) {
        if (name == "big" && !is_stderr) big_out = line;
      },
      nullptr);
  ASSERT_EQ(exits.size(), 2u);
  ASSERT_EQ(big_out, "64000000");
  EXPECT_GE(exits[0].peak_resident_bytes, 64000000);
  EXPECT_GT(exits[1].peak_resident_bytes, 0);
  EXPECT_LT(exits[1].peak_resident_bytes, 32 << 20);
}

TEST(ProcessGroupTest, AFailureStopsTheOthersAfterTheGracePeriod) {
  ProcessGroup group;
  ASSERT_TRUE(group.Start({"fails", "/bin/sh", {"-c", "exit 1"}, {}}).ok());
  ASSERT_TRUE(group.Start({"hangs", "/bin/sleep", {"600"}, {}}).ok());
  auto exits = group.Wait(absl::Minutes(5), absl::Milliseconds(200),
                          [](int, const std::string&, bool, const std::string&) {}, nullptr);
  EXPECT_EQ(exits[0].exit_code, 1);
  EXPECT_EQ(exits[1].signal, SIGTERM);
  EXPECT_EQ(DescribeExit(exits[1]), "killed by signal 15");
}

TEST(ProcessGroupTest, TimeoutStopsEverything) {
  ProcessGroup group;
  // Ignores SIGTERM, so only the SIGKILL that follows ends it.
  ASSERT_TRUE(group.Start({"stubborn", "/bin/sh", {"-c", "trap '' TERM; sleep 600 & wait; sleep 600"}, {}}).ok());
  auto exits = group.Wait(absl::Milliseconds(300), absl::Seconds(1),
                          [](int, const std::string&, bool, const std::string&) {}, nullptr);
  EXPECT_EQ(exits[0].signal, SIGKILL);
}

TEST(ProcessGroupTest, MissingBinaryExits127) {
  ProcessGroup group;
  ASSERT_TRUE(group.Start({"ghost", "/nonexistent/binary", {}, {}}).ok());
  auto exits = group.Wait(absl::Seconds(30), absl::Seconds(1),
                          [](int, const std::string&, bool, const std::string&) {}, nullptr);
  EXPECT_EQ(exits[0].exit_code, 127);
}

}  // namespace
}  // namespace pstrain

namespace pstrain {
namespace {

TEST(ProcessGroupTest, RestartPolicyStartsAFailedChildAgain) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string marker = std::string(tmp != nullptr ? tmp : "/tmp") + "/restart-marker";
  std::remove(marker.c_str());
  ProcessGroup group;
  group.SetRestartPolicy([](const ProcessGroup::Exit& exit) { return exit.restarts < 3; });
  // Fails the first time (leaving a marker), succeeds the second.
  ASSERT_TRUE(group.Start({"flaky", "/bin/sh",
                           {"-c", "if [ -e \"$M\" ]; then echo second; exit 0; fi; touch \"$M\"; exit 1"},
                           {{"M", marker}}}).ok());
  std::vector<std::string> lines;
  auto exits = group.Wait(absl::Seconds(30), absl::Seconds(5),
                          [&](int, const std::string&, bool, const std::string& line) {
                            lines.push_back(line);
                          },
                          nullptr);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].exit_code, 0);
  EXPECT_EQ(exits[0].restarts, 1);
  EXPECT_NE(std::find(lines.begin(), lines.end(), "second"), lines.end());
}

// With a delay, the dead child is started again only once the delay has passed, and the
// group keeps waiting for it meanwhile.
TEST(ProcessGroupTest, ADelayedRestartComesAfterTheDelay) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string marker = std::string(tmp != nullptr ? tmp : "/tmp") + "/delayed-marker";
  std::remove(marker.c_str());
  ProcessGroup group;
  group.SetRestartPolicy([](const ProcessGroup::Exit& exit) { return exit.restarts < 3; },
                         absl::Milliseconds(800));
  // Prints the time (ms since the epoch) it starts at; fails the first time.
  ASSERT_TRUE(group.Start({"flaky", "/bin/sh",
                           {"-c", "date +%s%3N; if [ -e \"$M\" ]; then exit 0; fi; "
                                  "touch \"$M\"; exit 1"},
                           {{"M", marker}}}).ok());
  std::vector<int64_t> starts;
  auto exits = group.Wait(absl::Seconds(30), absl::Seconds(5),
                          [&](int, const std::string&, bool is_stderr, const std::string& line) {
                            int64_t ms = 0;
                            if (!is_stderr && absl::SimpleAtoi(line, &ms)) starts.push_back(ms);
                          },
                          nullptr);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].exit_code, 0);
  EXPECT_EQ(exits[0].restarts, 1);
  ASSERT_EQ(starts.size(), 2u);
  // Both times are the children's own clock readings; the delay is a lower bound.
  EXPECT_GE(starts[1] - starts[0], 800);
}

// With an infinite delay the dead child waits, the group with it, until RestartNow: here
// five polls (half a second) after it died, and its second run's line comes only after.
TEST(ProcessGroupTest, AnIndefinitelyDelayedRestartWaitsForRestartNow) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string marker = std::string(tmp != nullptr ? tmp : "/tmp") + "/restart-now-marker";
  std::remove(marker.c_str());
  ProcessGroup group;
  group.SetRestartPolicy([](const ProcessGroup::Exit& exit) { return exit.restarts < 3; },
                         absl::InfiniteDuration());
  ASSERT_TRUE(group.Start({"flaky", "/bin/sh",
                           {"-c", "if [ -e \"$M\" ]; then echo second; exit 0; fi; "
                                  "touch \"$M\"; echo first; exit 1"},
                           {{"M", marker}}}).ok());
  EXPECT_FALSE(group.RestartNow("flaky").ok());  // running: nothing to restart
  std::vector<std::string> events;
  int polls_since_first = -1;
  auto exits = group.Wait(
      absl::Seconds(60), absl::Seconds(5),
      [&](int, const std::string&, bool is_stderr, const std::string& line) {
        if (!is_stderr) events.push_back(line);
        if (line == "first") polls_since_first = 0;
      },
      [&]() {
        if (polls_since_first < 0 || events.back() != "first") return false;
        // Dead (or about to be) and pending: the group goes on polling without it.
        if (++polls_since_first < 5) return false;
        if (group.RestartNow("flaky").ok()) events.push_back("RestartNow");
        return false;
      });
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].exit_code, 0);
  EXPECT_EQ(exits[0].restarts, 1);
  EXPECT_EQ(events, (std::vector<std::string>{"first", "RestartNow", "second"}));
  EXPECT_FALSE(group.RestartNow("nobody").ok());
}

// A signal sent at once after Start reaches the child, even before the child has run a
// line of its own (its process group is made by the parent too). Lost, it would leave the
// child to the timeout's SIGTERM.
TEST(ProcessGroupTest, ASignalRightAfterStartIsNotLost) {
  for (int i = 0; i < 20; ++i) {
    ProcessGroup group;
    ASSERT_TRUE(group.Start({"sleeper", "/bin/sleep", {"600"}, {}}).ok());
    ASSERT_TRUE(group.Signal("sleeper", SIGKILL).ok());
    auto exits = group.Wait(absl::Seconds(30), absl::Seconds(1),
                            [](int, const std::string&, bool, const std::string&) {}, nullptr);
    ASSERT_EQ(exits.size(), 1u);
    ASSERT_EQ(exits[0].signal, SIGKILL) << "run " << i << ": " << DescribeExit(exits[0]);
  }
}

TEST(ProcessGroupTest, RestartsAreBoundedByThePolicy) {
  ProcessGroup group;
  group.SetRestartPolicy([](const ProcessGroup::Exit& exit) { return exit.restarts < 2; });
  ASSERT_TRUE(group.Start({"broken", "/bin/sh", {"-c", "exit 3"}, {}}).ok());
  auto exits = group.Wait(absl::Seconds(30), absl::Seconds(1),
                          [](int, const std::string&, bool, const std::string&) {}, nullptr);
  EXPECT_EQ(exits[0].exit_code, 3);
  EXPECT_EQ(exits[0].restarts, 2);
}

}  // namespace
}  // namespace pstrain
