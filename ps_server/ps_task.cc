#include "ps_server/ps_task.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/time/time.h"
#include "absl/strings/str_cat.h"
#include "common/memory_budget.h"
#include "common/daemon/exit_codes.h"
#include "common/daemon/task_runtime.h"
#include "common/logging.h"
#include "nlohmann/json.hpp"
#include "ps_server/ps_instance.h"

ABSL_FLAG(std::string, ps_request_memory, "",
          "Memory a ps may hold for requests in flight (push-pull streams' gradients and "
          "answers, PullRows answers), charged before it is allocated; a request that does "
          "not fit what is free is refused at once (RESOURCE_EXHAUSTED). Bytes with a "
          "K/M/G/T suffix or a share of the machine's memory (\"10%\"); empty: a quarter "
          "of --max_memory");

ABSL_FLAG(std::string, checkpoint_dir, "",
          "The job's checkpoint folder, shared with the chief (the same folder, not merely "
          "the same path: a shared volume): the ps writes and restores its own shards of "
          "sharded checkpoints there. Empty: the chief reads every shard and writes the "
          "checkpoints itself (format 1)");
ABSL_FLAG(absl::Duration, testing_checkpoint_shard_delay, absl::ZeroDuration(),
          "Fault injection for tests: pause after writing a checkpoint shard, before "
          "syncing it and answering");

namespace pstrain {
namespace {

// --ps_request_memory in bytes; 0 when empty (the service then takes a quarter of
// --max_memory). Errors: INVALID_ARGUMENT as ParseMemorySize.
absl::StatusOr<int64_t> RequestMemoryBytes() {
  const std::string text = absl::GetFlag(FLAGS_ps_request_memory);
  if (text.empty()) return 0;
  absl::StatusOr<MemorySize> size = ParseMemorySize(text);
  if (!size.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--ps_request_memory: ", size.status().message()));
  }
  if (size->percent <= 0) return size->bytes;
  return static_cast<int64_t>(static_cast<double>(MachineMemoryBytes()) * size->percent / 100.0);
}

}  // namespace

int RunPsTask(DaemonRuntime* runtime) {
  ShutdownSignal* shutdown = runtime->shutdown();
  absl::StatusOr<int64_t> request_memory = RequestMemoryBytes();
  if (!request_memory.ok()) {
    LogError(request_memory.status().message());
    return ExitCodeFor(request_memory.status());
  }
  PsInstance::Options options;
  options.on_shutdown = [shutdown](const std::string& reason) {
    shutdown->Request(kExitOk, absl::StrCat("Shutdown RPC: ", reason));
  };
  options.registry = runtime->metrics()->registry();
  options.num_workers = runtime->options().config.cluster.num_tasks(Role::kWorker);
  options.request_memory_bytes = *request_memory;
  options.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  options.checkpoint_shard_delay = absl::GetFlag(FLAGS_testing_checkpoint_shard_delay);
  absl::StatusOr<std::unique_ptr<PsInstance>> ps = PsInstance::Create(std::move(options));
  if (!ps.ok()) {
    LogError(ps.status().message());
    return ExitCodeFor(ps.status());
  }
  absl::StatusOr<std::unique_ptr<TaskRuntime>> task =
      TaskRuntime::Start(runtime, {(*ps)->service()});
  if (!task.ok()) {
    LogError(task.status().message());
    return ExitCodeFor(task.status());
  }
  // A ps has nothing to build: it serves whatever the chief creates on it.
  if ((*task)->Register().ok()) (*task)->StartHeartbeats();
  const int exit_code = (*task)->WaitAndStop();
  LogWithFields('I', "served the job",
                {{"pushes", (*ps)->num_pushes()}, {"pulls", (*ps)->num_pulls()}});
  (*ps)->LogFinalStatus(runtime->options().config.task.index);
  runtime->metrics()->Linger();
  return exit_code;
}

}  // namespace pstrain
