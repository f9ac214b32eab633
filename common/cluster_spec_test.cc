#include "common/cluster_spec.h"

#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr char kTfExample[] =
    R"({"cluster":{"chief":["h:1"],"worker":["h:2","h:3"],"ps":["h:4"]},)"
    R"("task":{"type":"worker","index":0},"environment":"cloud","rpc_layer":"grpc"})";

// Parses `text`, expects InvalidArgument, returns the message.
std::string ParseError(const std::string& text) {
  absl::StatusOr<TfConfig> config = ParseTfConfig(text);
  EXPECT_FALSE(config.ok()) << text;
  if (config.ok()) return "";
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument) << text;
  const std::string message(config.status().message());
  EXPECT_THAT(message, StartsWith("TF_CONFIG: ")) << text;
  EXPECT_EQ(message.find('\n'), std::string::npos) << "one line: " << message;
  return message;
}

std::string WithTask(const std::string& cluster, const std::string& task) {
  return "{\"cluster\":" + cluster + ",\"task\":" + task + "}";
}

TEST(ParseTfConfigTest, TensorFlowExample) {
  absl::StatusOr<TfConfig> config = ParseTfConfig(kTfExample);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->task, (TaskId{Role::kWorker, 0}));
  EXPECT_EQ(config->environment, "cloud");
  EXPECT_EQ(config->rpc_layer, "grpc");
  const ClusterSpec& cluster = config->cluster;
  EXPECT_THAT(cluster.tasks(Role::kChief), ElementsAre("h:1"));
  EXPECT_THAT(cluster.tasks(Role::kWorker), ElementsAre("h:2", "h:3"));
  EXPECT_THAT(cluster.tasks(Role::kPs), ElementsAre("h:4"));
  EXPECT_TRUE(cluster.tasks(Role::kEvaluator).empty());
  EXPECT_TRUE(cluster.tasks(Role::kAdmin).empty());
  EXPECT_EQ(cluster.num_tasks(Role::kWorker), 2);
  EXPECT_EQ(cluster.total_tasks(), 4);
  EXPECT_TRUE(cluster.has_job(Role::kPs));
  EXPECT_FALSE(cluster.has_job(Role::kEvaluator));
  EXPECT_THAT(cluster.jobs(), ElementsAre("chief", "worker", "ps"));
  EXPECT_FALSE(cluster.chief_named_master());
}

TEST(ParseTfConfigTest, AddressLookup) {
  absl::StatusOr<TfConfig> config = ParseTfConfig(kTfExample);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(*config->cluster.address({Role::kWorker, 1}), "h:3");
  EXPECT_EQ(config->cluster.address({Role::kWorker, 2}).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_THAT(config->cluster.address({Role::kWorker, 2}).status().message(),
              HasSubstr("worker:2"));
  EXPECT_EQ(config->cluster.address({Role::kEvaluator, 0}).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(config->cluster.address({Role::kAdmin, 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(config->cluster.address({Role::kWorker, -1}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ParseTfConfigTest, ToJsonRoundTrips) {
  absl::StatusOr<TfConfig> config = ParseTfConfig(kTfExample);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->cluster.ToJson(), R"({"chief":["h:1"],"worker":["h:2","h:3"],"ps":["h:4"]})");
  absl::StatusOr<TfConfig> again = ParseTfConfig(TfConfigToJson(*config));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->cluster.ToJson(), config->cluster.ToJson());
  EXPECT_EQ(again->task, config->task);
  EXPECT_EQ(again->environment, "cloud");
  EXPECT_EQ(again->rpc_layer, "grpc");
}

TEST(ParseTfConfigTest, MalformedJsonNamesTheByte) {
  EXPECT_EQ(ParseError(R"({"cluster": {"ps" ["h:1"]}})"), "TF_CONFIG: not valid JSON at byte 18");
  EXPECT_THAT(ParseError(""), HasSubstr("not valid JSON at byte"));
  EXPECT_THAT(ParseError("{\"cluster\":"), HasSubstr("not valid JSON at byte"));
  EXPECT_THAT(ParseError("[1,2]"), HasSubstr("must be a JSON object"));
}

TEST(ParseTfConfigTest, MissingParts) {
  EXPECT_EQ(ParseError(R"({"task":{"type":"worker","index":0}})"),
            "TF_CONFIG: missing \"cluster\"");
  EXPECT_EQ(ParseError(R"({"cluster":{"worker":["h:1"]}})"), "TF_CONFIG: missing \"task\"");
  EXPECT_EQ(ParseError(WithTask(R"({"worker":["h:1"]})", R"({"index":0})")),
            "TF_CONFIG: missing task \"type\"");
  EXPECT_EQ(ParseError(WithTask("{}", R"({"type":"worker","index":0})")),
            "TF_CONFIG: cluster is empty");
  EXPECT_EQ(ParseError(WithTask(R"({"worker":[]})", R"({"type":"worker","index":0})")),
            "TF_CONFIG: cluster is empty");
  EXPECT_THAT(ParseError(R"({"cluster":["h:1"],"task":{"type":"worker"}})"),
              HasSubstr("\"cluster\" must be an object"));
}

TEST(ParseTfConfigTest, MissingIndexMeansZero) {
  absl::StatusOr<TfConfig> config =
      ParseTfConfig(WithTask(R"({"worker":["h:1"]})", R"({"type":"worker"})"));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->task.index, 0);
  EXPECT_EQ(config->environment, "");
  EXPECT_EQ(config->rpc_layer, "");
}

TEST(ParseTfConfigTest, BadIndex) {
  const std::string cluster = R"({"worker":["h:2","h:3"]})";
  EXPECT_EQ(ParseError(WithTask(cluster, R"({"type":"worker","index":3})")),
            "TF_CONFIG: task index 3 out of range for job \"worker\" (2 tasks)");
  EXPECT_EQ(ParseError(WithTask(cluster, R"({"type":"worker","index":-1})")),
            "TF_CONFIG: task index -1 is negative");
  EXPECT_THAT(ParseError(WithTask(cluster, R"({"type":"worker","index":1.5})")),
              HasSubstr("task index must be an integer"));
  EXPECT_THAT(ParseError(WithTask(cluster, R"({"type":"worker","index":true})")),
              HasSubstr("task index must be an integer"));
  EXPECT_THAT(ParseError(WithTask(cluster, R"({"type":"worker","index":[0]})")),
              HasSubstr("task index must be an integer"));
  EXPECT_THAT(ParseError(WithTask(cluster, R"({"type":"worker","index":"one"})")),
              HasSubstr("task index \"one\" is not a non-negative integer"));
  EXPECT_THAT(ParseError(WithTask(cluster, R"({"type":"worker","index":"-1"})")),
              HasSubstr("not a non-negative integer"));
  EXPECT_THAT(ParseError(WithTask(cluster, R"({"type":"worker","index":"7"})")),
              HasSubstr("task index 7 out of range"));
  EXPECT_THAT(ParseError(WithTask(cluster, R"({"type":"worker","index":99999999999})")),
              HasSubstr("too large"));
}

TEST(ParseTfConfigTest, StringIndex) {
  absl::StatusOr<TfConfig> config =
      ParseTfConfig(WithTask(R"({"worker":["h:2","h:3"]})", R"({"type":"worker","index":"1"})"));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->task, (TaskId{Role::kWorker, 1}));
}

TEST(ParseTfConfigTest, TaskTypeMustBeAJob) {
  EXPECT_THAT(ParseError(WithTask(R"({"worker":["h:1"]})", R"({"type":"ps","index":0})")),
              HasSubstr("task type \"ps\" is not a job of the cluster (jobs: worker)"));
  EXPECT_THAT(ParseError(WithTask(R"({"worker":["h:1"]})", R"({"type":"boss","index":0})")),
              HasSubstr("unknown task type \"boss\""));
  EXPECT_THAT(ParseError(WithTask(R"({"worker":["h:1"]})", R"({"type":3,"index":0})")),
              HasSubstr("task \"type\" must be a string"));
}

TEST(ParseTfConfigTest, UnknownJobKey) {
  EXPECT_EQ(ParseError(WithTask(R"({"worker":["h:1"],"trainer":["h:2"]})",
                                R"({"type":"worker","index":0})")),
            "TF_CONFIG: unknown job \"trainer\" in cluster (want chief, master, worker, ps or "
            "evaluator)");
}

TEST(ParseTfConfigTest, BadAddresses) {
  const std::string task = R"({"type":"worker","index":0})";
  EXPECT_THAT(ParseError(WithTask(R"({"worker":["nohost"]})", task)),
              HasSubstr("address \"nohost\" of task worker:0 is not host:port"));
  EXPECT_THAT(ParseError(WithTask(R"({"worker":["h:0"]})", task)), HasSubstr("port out of range"));
  EXPECT_THAT(ParseError(WithTask(R"({"worker":["h:65536"]})", task)),
              HasSubstr("port out of range"));
  EXPECT_THAT(ParseError(WithTask(R"({"worker":["h:80x"]})", task)), HasSubstr("no valid port"));
  EXPECT_THAT(ParseError(WithTask(R"({"worker":[":80"]})", task)), HasSubstr("empty host"));
  EXPECT_THAT(ParseError(WithTask(R"({"worker":["::1:80"]})", task)),
              HasSubstr("IPv6 hosts in brackets"));
  EXPECT_THAT(ParseError(WithTask(R"({"worker":["h h:80"]})", task)), HasSubstr("bad character"));
  EXPECT_THAT(ParseError(WithTask(R"({"worker":[80]})", task)),
              HasSubstr("task worker:0 address must be a string"));
  EXPECT_THAT(ParseError(WithTask(R"({"worker":"h:1"})", task)),
              HasSubstr("job \"worker\" must be a list"));
}

TEST(ParseTfConfigTest, GoodAddresses) {
  absl::StatusOr<TfConfig> config = ParseTfConfig(
      WithTask(R"({"worker":["[::1]:80","10.0.0.1:65535","worker-0.svc.cluster.local:2222",)"
               R"("[fe80::1%eth0]:1"]})",
               R"({"type":"worker","index":3})"));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(*config->cluster.address(config->task), "[fe80::1%eth0]:1");
}

TEST(ParseTfConfigTest, DuplicateAddress) {
  EXPECT_EQ(ParseError(WithTask(R"({"worker":["h:2","h:3"],"ps":["h:3"]})",
                                R"({"type":"worker","index":0})")),
            "TF_CONFIG: address \"h:3\" is used by both worker:1 and ps:0");
}

TEST(ParseTfConfigTest, MasterIsTheChief) {
  absl::StatusOr<TfConfig> config = ParseTfConfig(
      WithTask(R"({"master":["h:1"],"worker":["h:2"]})", R"({"type":"master","index":0})"));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->task, (TaskId{Role::kChief, 0}));
  EXPECT_TRUE(config->cluster.chief_named_master());
  EXPECT_TRUE(config->cluster.has_job(Role::kChief));
  EXPECT_THAT(config->cluster.tasks(Role::kChief), ElementsAre("h:1"));
  EXPECT_EQ(*config->cluster.address({Role::kChief, 0}), "h:1");
  EXPECT_EQ(config->cluster.ToJson(), R"({"master":["h:1"],"worker":["h:2"]})");

  EXPECT_THAT(ParseError(WithTask(R"({"master":["h:1"],"chief":["h:2"]})",
                                  R"({"type":"chief","index":0})")),
              HasSubstr("both \"chief\" and \"master\""));
  EXPECT_THAT(ParseError(WithTask(R"({"chief":["h:1","h:2"]})", R"({"type":"chief"})")),
              HasSubstr("at most one"));
}

TEST(ParseTfConfigTest, SparseDictForm) {
  absl::StatusOr<TfConfig> config = ParseTfConfig(
      WithTask(R"({"worker":{"1":"h:3","0":"h:2"},"ps":["h:4"]})", R"({"type":"ps"})"));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(config->cluster.tasks(Role::kWorker), ElementsAre("h:2", "h:3"));

  const std::string task = R"({"type":"worker","index":0})";
  EXPECT_THAT(ParseError(WithTask(R"({"worker":{"0":"h:2","2":"h:3"}})", task)),
              HasSubstr("job \"worker\" has no task 1 (indices must be 0..1)"));
  EXPECT_THAT(ParseError(WithTask(R"({"worker":{"x":"h:2"}})", task)),
              HasSubstr("key \"x\" is not a task index"));
  EXPECT_THAT(ParseError(WithTask(R"({"worker":{"0":2}})", task)),
              HasSubstr("task worker:0 address must be a string"));
}

TEST(ParseTfConfigTest, EnvironmentAndRpcLayer) {
  absl::StatusOr<TfConfig> config = ParseTfConfig(
      R"({"cluster":{"worker":["h:1"]},"task":{"type":"worker","index":0,"trial":"1"},)"
      R"("environment":"google","rpc_layer":"grpc+loas","extra":1})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->environment, "google");
  EXPECT_EQ(config->rpc_layer, "grpc+loas");
  EXPECT_THAT(ParseError(R"({"cluster":{"worker":["h:1"]},"task":{"type":"worker"},)"
                         R"("environment":5})"),
              HasSubstr("\"environment\" must be a string"));
}

TEST(ParseTfConfigTest, EvaluatorAlone) {
  // An evaluator beside the cluster, as TF runs it.
  absl::StatusOr<TfConfig> beside = ParseTfConfig(
      WithTask(R"({"chief":["h:1"],"worker":["h:2"]})", R"({"type":"evaluator","index":0})"));
  ASSERT_TRUE(beside.ok()) << beside.status();
  EXPECT_EQ(beside->task, (TaskId{Role::kEvaluator, 0}));
  EXPECT_FALSE(beside->cluster.has_job(Role::kEvaluator));
  // A cluster of only an evaluator.
  absl::StatusOr<TfConfig> only =
      ParseTfConfig(WithTask(R"({"evaluator":["h:9"]})", R"({"type":"evaluator"})"));
  ASSERT_TRUE(only.ok()) << only.status();
  EXPECT_EQ(*only->cluster.address(only->task), "h:9");
  EXPECT_THAT(ParseError(WithTask(R"({"worker":["h:2"]})", R"({"type":"evaluator","index":1})")),
              HasSubstr("out of range for job \"evaluator\""));
}

TEST(TfConfigFromFlagsTest, Good) {
  absl::StatusOr<TfConfig> config =
      TfConfigFromFlags("chief=h:1; worker=h:2,h:3 ;ps=h:4;", "worker", 1);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->cluster.ToJson(), R"({"chief":["h:1"],"worker":["h:2","h:3"],"ps":["h:4"]})");
  EXPECT_EQ(config->task, (TaskId{Role::kWorker, 1}));

  absl::StatusOr<TfConfig> master = TfConfigFromFlags("master=h:1;worker=h:2", "master", 0);
  ASSERT_TRUE(master.ok()) << master.status();
  EXPECT_EQ(master->task, (TaskId{Role::kChief, 0}));
}

// The role is parsed once, by the parser: "master" is the chief, an evaluator beside the
// cluster is one too, and the flags give the same roles as TF_CONFIG.
TEST(RoleTest, TheParsersSetTheTasksRole) {
  EXPECT_EQ(ParseTfConfig(kTfExample)->task.type, Role::kWorker);
  EXPECT_EQ(ParseTfConfig(WithTask(R"({"master":["h:1"],"ps":["h:2"]})", R"({"type":"master"})"))
                ->task.type,
            Role::kChief);
  EXPECT_EQ(ParseTfConfig(WithTask(R"({"chief":["h:1"]})", R"({"type":"evaluator"})"))->task.type,
            Role::kEvaluator);
  EXPECT_EQ(TfConfigFromFlags("chief=h:1;ps=h:4,h:5", "ps", 1)->task.type, Role::kPs);
  EXPECT_EQ(TfConfigFromFlags("master=h:1;worker=h:2", "master", 0)->task.type, Role::kChief);
  EXPECT_EQ(TfConfig().task.type, Role::kAdmin);  // a placeholder: no task
}

// Each role goes through TF_CONFIG text and back unchanged, under its own job name (the
// text a launcher writes is what it was before the role became an enum).
TEST(RoleTest, EachRoleRoundTripsThroughTfConfig) {
  const std::string cluster = R"({"chief":["h:1"],"worker":["h:2","h:3"],"ps":["h:4"]})";
  for (const auto& [type, role, index] :
       std::vector<std::tuple<std::string, Role, int>>{{"chief", Role::kChief, 0},
                                                       {"worker", Role::kWorker, 1},
                                                       {"ps", Role::kPs, 0},
                                                       {"evaluator", Role::kEvaluator, 0}}) {
    absl::StatusOr<TfConfig> config = ParseTfConfig(WithTask(
        cluster, absl::StrCat(R"({"type":")", type, R"(","index":)", index, "}")));
    ASSERT_TRUE(config.ok()) << type << ": " << config.status();
    EXPECT_EQ(config->task, (TaskId{role, index}));
    EXPECT_EQ(TaskIdToString(config->task), absl::StrCat(type, ":", index));
    const std::string text = TfConfigToJson(*config);
    EXPECT_THAT(text, HasSubstr(absl::StrCat(R"("type":")", type, R"(")"))) << text;
    absl::StatusOr<TfConfig> back = ParseTfConfig(text);
    ASSERT_TRUE(back.ok()) << text << ": " << back.status();
    EXPECT_EQ(back->task, config->task);
  }
  // A chief that came in as "master" goes back out as one.
  absl::StatusOr<TfConfig> master =
      ParseTfConfig(WithTask(R"({"master":["h:1"],"ps":["h:2"]})", R"({"type":"master"})"));
  ASSERT_TRUE(master.ok()) << master.status();
  EXPECT_THAT(TfConfigToJson(*master), HasSubstr(R"("type":"master")"));
}

// An unknown task type is refused where TF_CONFIG or the flags come in, in one line.
TEST(RoleTest, AnUnknownTaskTypeIsRefusedWhereTheConfigComesIn) {
  absl::StatusOr<TfConfig> parsed =
      ParseTfConfig(WithTask(R"({"chief":["h:1"],"worker":["h:2"]})", R"({"type":"trainer"})"));
  ASSERT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(parsed.status().message(),
            "TF_CONFIG: unknown task type \"trainer\" (want chief, master, worker, ps or "
            "evaluator)");
  absl::StatusOr<TfConfig> flags = TfConfigFromFlags("chief=h:1;worker=h:2", "admin", 0);
  ASSERT_EQ(flags.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(flags.status().message(),
            "cluster flags: unknown task type \"admin\" (want chief, master, worker, ps or "
            "evaluator)");
  // No task at all is no job of the cluster: it has no address.
  absl::StatusOr<TfConfig> config = ParseTfConfig(kTfExample);
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->cluster.address(TaskId{}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RoleTest, NamesGoBothWaysAndUnknownTypesAreRefused) {
  for (Role role : {Role::kChief, Role::kWorker, Role::kPs, Role::kEvaluator}) {
    absl::StatusOr<Role> back = RoleFromTaskType(RoleName(role));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, role);
  }
  EXPECT_EQ(*RoleFromTaskType("master"), Role::kChief);
  EXPECT_EQ(RoleName(Role::kAdmin), "admin");
  // admin is a caller (common/rpc/caller_identity.h), never a TF_CONFIG task.
  for (const char* bad : {"admin", "Worker", "", "trainer"}) {
    absl::StatusOr<Role> role = RoleFromTaskType(bad);
    EXPECT_EQ(role.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_THAT(std::string(RoleFromTaskType("trainer").status().message()),
              HasSubstr("\"trainer\""));
}

TEST(TfConfigFromFlagsTest, Bad) {
  auto expect_error = [](const std::string& cluster, const std::string& type, int index,
                         const std::string& want) {
    absl::StatusOr<TfConfig> config = TfConfigFromFlags(cluster, type, index);
    ASSERT_FALSE(config.ok()) << cluster;
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(config.status().message()), StartsWith("cluster flags: "));
    EXPECT_THAT(std::string(config.status().message()), HasSubstr(want));
  };
  expect_error("", "worker", 0, "cluster is empty");
  expect_error("worker", "worker", 0, "\"worker\" is not job=host:port");
  expect_error("=h:1", "worker", 0, "has no job name");
  expect_error("worker=h:1,,h:2", "worker", 0, "empty address");
  expect_error("worker=h:1;worker=h:2", "worker", 0, "given twice");
  expect_error("worker=h:1;gpu=h:2", "worker", 0, "unknown job \"gpu\"");
  expect_error("worker=h:1", "worker", 1, "task index 1 out of range for job \"worker\" (1 task)");
  expect_error("worker=h:1", "ps", 0, "not a job of the cluster");
  expect_error("worker=h:99999", "worker", 0, "port");
  expect_error("worker=h:1,h:1", "worker", 0, "used by both worker:0 and worker:1");
}

TEST(ClusterSpecTest, CreateValidates) {
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::Create({{"ps", {"a:1", "b:1"}}});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->num_tasks(Role::kPs), 2);
  absl::StatusOr<ClusterSpec> bad = ClusterSpec::Create({{"ps", {"a"}}});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), StartsWith("cluster spec: "));
}

TEST(TfConfigFromEnvironmentTest, ReadsVariable) {
  unsetenv("TF_CONFIG");
  absl::StatusOr<TfConfig> missing = TfConfigFromEnvironment();
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), "TF_CONFIG is not set");

  setenv("TF_CONFIG", kTfExample, 1);
  absl::StatusOr<TfConfig> config = TfConfigFromEnvironment();
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->task, (TaskId{Role::kWorker, 0}));

  setenv("TF_CONFIG", "{", 1);
  EXPECT_EQ(TfConfigFromEnvironment().status().code(), absl::StatusCode::kInvalidArgument);
  unsetenv("TF_CONFIG");
}

}  // namespace
}  // namespace pstrain
