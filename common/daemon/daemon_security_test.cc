#include "common/daemon/daemon_security.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "common/cluster_spec.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

std::string WriteFile(const std::string& name, const std::string& contents) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
  std::ofstream(path) << contents;
  return path;
}

DaemonOptions WorkerOne() {
  DaemonOptions options;
  options.config = *ParseTfConfig(
      R"({"cluster":{"chief":["localhost:1"],"worker":["localhost:2","localhost:3"],)"
      R"("ps":["localhost:4"]},"task":{"type":"worker","index":1}})");
  return options;
}

class DaemonSecurityTest : public ::testing::Test {
 protected:
  void SetUp() override { unsetenv(kAuthTokenEnvironmentVariable); }
  void TearDown() override { unsetenv(kAuthTokenEnvironmentVariable); }
};

TEST_F(DaemonSecurityTest, ADaemonOfAClusterWithoutATokenDoesNotStart) {
  absl::StatusOr<DaemonSecurity> security = DaemonSecurityFor(WorkerOne(), {});
  ASSERT_FALSE(security.ok());
  EXPECT_NE(security.status().message().find("--auth_token_file"), std::string::npos);
  EXPECT_NE(security.status().message().find("--insecure"), std::string::npos);
}

TEST_F(DaemonSecurityTest, TheTokenFileGivesTheServerAnAuthorizerAndTheClientItsTask) {
  const std::string file = WriteFile("token", "  0123456789abcdef0123\n");
  absl::StatusOr<DaemonSecurity> security = DaemonSecurityFor(WorkerOne(), {file, false});
  ASSERT_TRUE(security.ok()) << security.status();
  EXPECT_NE(security->authorizer, nullptr);
  EXPECT_NE(security->server_credentials, nullptr);
  EXPECT_EQ(security->client.token, "0123456789abcdef0123");
  EXPECT_EQ(security->client.identity, (CallerIdentity{Role::kWorker, 1}));
}

TEST_F(DaemonSecurityTest, TheEnvironmentVariableServesWhenNoFileIsGiven) {
  setenv(kAuthTokenEnvironmentVariable, "abcdefabcdefabcdef", 1);
  absl::StatusOr<DaemonSecurity> security = DaemonSecurityFor(WorkerOne(), {});
  ASSERT_TRUE(security.ok()) << security.status();
  EXPECT_EQ(security->client.token, "abcdefabcdefabcdef");
}

TEST_F(DaemonSecurityTest, WeakUnreadableOrUnsendableTokensAreRefused) {
  EXPECT_FALSE(DaemonSecurityFor(WorkerOne(), {WriteFile("short", "abc\n"), false}).ok());
  EXPECT_FALSE(
      DaemonSecurityFor(WorkerOne(), {WriteFile("space", "0123456789 abcdef0123"), false}).ok());
  EXPECT_FALSE(DaemonSecurityFor(WorkerOne(), {"/nonexistent/token", false}).ok());
}

TEST_F(DaemonSecurityTest, InsecureTurnsItOff) {
  absl::StatusOr<DaemonSecurity> security = DaemonSecurityFor(WorkerOne(), {"", true});
  ASSERT_TRUE(security.ok()) << security.status();
  EXPECT_EQ(security->authorizer, nullptr);
  EXPECT_EQ(security->server_credentials, nullptr);
  EXPECT_TRUE(security->client.token.empty());
}

}  // namespace
}  // namespace pstrain
