#include "pstrain/internal/start_role_task.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "deploy/local/free_port.h"
#include "gtest/gtest.h"
#include "pstrain/internal/chief_task.h"
#include "pstrain/internal/role_task.h"
#include "pstrain/internal/worker_task.h"

namespace pstrain::distribute::internal {
namespace {

TfConfig MustParse(const std::string& text) {
  absl::StatusOr<TfConfig> config = ParseTfConfig(text);
  EXPECT_TRUE(config.ok()) << config.status();
  return config.ok() ? *config : TfConfig();
}

StrategyOptions Options() {
  StrategyOptions options;
  options.strategy = StrategyKind::kParameterServer;
  options.startup_timeout = absl::Seconds(30);
  options.rpc_timeout = absl::Seconds(10);
  return options;
}

// Refused before any server starts or any channel is made: a cluster without one of the
// three roles, and a task of none of them.
TEST(StartRoleTaskTest, RefusesAClusterWithoutEveryRoleAndATaskOfNone) {
  absl::StatusOr<std::unique_ptr<RoleTask>> no_ps = StartRoleTask(
      Options(), MustParse(R"({"cluster":{"chief":["localhost:1"],"worker":["localhost:2"]},)"
                           R"("task":{"type":"chief"}})"));
  ASSERT_EQ(no_ps.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(no_ps.status().message(), "the cluster has no ps"))
      << no_ps.status();

  absl::StatusOr<std::unique_ptr<RoleTask>> evaluator = StartRoleTask(
      Options(), MustParse(R"({"cluster":{"chief":["localhost:1"],"worker":["localhost:2"],)"
                           R"("ps":["localhost:3"]},"task":{"type":"evaluator"}})"));
  ASSERT_EQ(evaluator.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(evaluator.status().message(),
                                "runs on chief, ps and worker tasks, not evaluator:0"))
      << evaluator.status();
}

// Each role is its own class: the chief has the scheduler's side, the worker the ps
// clients and the functions it serves, the ps neither; the ps and the worker serve until
// the chief, destroyed, tells them the job is done. Real servers on free ports, as three
// threads of this process.
TEST(StartRoleTaskTest, EachRoleIsItsClassAndTheChiefEndsTheOthers) {
  absl::StatusOr<std::vector<int>> ports = PickFreePorts(3);
  ASSERT_TRUE(ports.ok()) << ports.status();
  auto config = [&](const std::string& type) {
    return MustParse(absl::StrCat(
        R"({"cluster":{"chief":["localhost:)", (*ports)[0], R"("],"ps":["localhost:)",
        (*ports)[1], R"("],"worker":["localhost:)", (*ports)[2], R"("]},"task":{"type":")",
        type, R"(","index":0}})"));
  };
  absl::StatusOr<std::unique_ptr<RoleTask>> ps = StartRoleTask(Options(), config("ps"));
  ASSERT_TRUE(ps.ok()) << ps.status();
  absl::StatusOr<std::unique_ptr<RoleTask>> worker = StartRoleTask(Options(), config("worker"));
  ASSERT_TRUE(worker.ok()) << worker.status();
  EXPECT_EQ((*ps)->role(), Role::kPs);
  EXPECT_EQ((*ps)->chief(), nullptr);
  EXPECT_EQ((*ps)->worker(), nullptr);
  EXPECT_EQ((*worker)->role(), Role::kWorker);
  EXPECT_EQ((*worker)->chief(), nullptr);
  ASSERT_NE((*worker)->worker(), nullptr);
  EXPECT_EQ((*worker)->worker()->ps_clients().size(), 1u);
  EXPECT_EQ((*worker)->num_ps(), 1);
  EXPECT_EQ((*worker)->num_workers(), 1);

  absl::StatusOr<std::unique_ptr<RoleTask>> chief = StartRoleTask(Options(), config("chief"));
  ASSERT_TRUE(chief.ok()) << chief.status();
  EXPECT_EQ((*chief)->role(), Role::kChief);
  EXPECT_EQ((*chief)->worker(), nullptr);
  ChiefTask* chief_task = (*chief)->chief();
  ASSERT_NE(chief_task, nullptr);
  EXPECT_TRUE(absl::IsFailedPrecondition((*chief)->Serve()));
  EXPECT_EQ(chief_task->ps_clients().size(), 1u);
  EXPECT_EQ(chief_task->worker_clients().size(), 1u);
  // Every task registers the same functions in the same order, so their indices agree.
  FunctionRunner::Function none = [](DistributedIterator&) -> absl::StatusOr<std::vector<double>> {
    return std::vector<double>();
  };
  for (RoleTask* task : {chief->get(), worker->get(), ps->get()}) {
    EXPECT_EQ(task->function_runner()->RegisterFunction("f", none), 0) << RoleName(task->role());
  }

  absl::Status ps_served = absl::UnknownError("not run");
  absl::Status worker_served = absl::UnknownError("not run");
  std::thread ps_thread([&] { ps_served = (*ps)->Serve(); });
  std::thread worker_thread([&] { worker_served = (*worker)->Serve(); });
  absl::Status ps_up = chief_task->WaitForPs();
  EXPECT_TRUE(ps_up.ok()) << ps_up;
  chief->reset();  // tells the worker, then the ps, that the job is done
  worker_thread.join();
  ps_thread.join();
  EXPECT_TRUE(worker_served.ok()) << worker_served;
  EXPECT_TRUE(ps_served.ok()) << ps_served;
}

}  // namespace
}  // namespace pstrain::distribute::internal
