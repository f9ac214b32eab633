#include "common/daemon/task_agent.h"

#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/process_memory.h"

namespace pstrain {
namespace {

int64_t NewIncarnation() {
  std::random_device device;
  return (static_cast<int64_t>(device()) << 31) ^ device();
}

}  // namespace

TaskAgent::TaskAgent(Options options, ChiefClient* chief, ShutdownSignal* shutdown)
    : options_(std::move(options)),
      chief_(chief),
      shutdown_(shutdown),
      incarnation_(NewIncarnation()) {}

TaskAgent::~TaskAgent() {
  stop_heartbeats_.Request(0, "agent destroyed");
  if (heartbeat_thread_.joinable()) heartbeat_thread_.join();
}

RegisterTaskRequest TaskAgent::RegisterRequest() const {
  RegisterTaskRequest request;
  request.set_task_type(std::string(RoleName(options_.role)));
  request.set_task_index(options_.task_index);
  request.set_address(options_.address);
  request.set_incarnation(incarnation_);
  return request;
}

absl::StatusOr<RegisterTaskResponse> TaskAgent::Register() {
  const RegisterTaskRequest request = RegisterRequest();
  const absl::Time give_up = absl::Now() + options_.register_timeout;
  absl::Status last_error;
  while (true) {
    absl::StatusOr<RegisterTaskResponse> response = chief_->RegisterTask(request);
    if (response.ok()) return response;
    last_error = response.status();
    if (last_error.code() == absl::StatusCode::kInvalidArgument) return last_error;
    if (absl::Now() >= give_up) break;
    if (shutdown_->WaitFor(absl::Milliseconds(200))) {
      return absl::CancelledError("shut down before registering with the chief");
    }
  }
  return absl::DeadlineExceededError(
      absl::StrCat("could not register with ", chief_->name(), " within ",
                   absl::FormatDuration(options_.register_timeout), "; last error: ",
                   last_error.message()));
}

void TaskAgent::StartHeartbeats() {
  heartbeat_thread_ = std::thread([this] { HeartbeatLoop(); });
}

void TaskAgent::HeartbeatLoop() {
  HeartbeatRequest request;
  request.set_task_type(std::string(RoleName(options_.role)));
  request.set_task_index(options_.task_index);
  request.set_incarnation(incarnation_);
  absl::Time last_answer = absl::Now();
  while (!stop_heartbeats_.WaitFor(options_.heartbeat_interval)) {
    if (shutdown_->requested()) return;
    // What this task holds, for psctl status (zeros when /proc cannot be read).
    const ProcessMemory memory = ReadProcessMemory().value_or(ProcessMemory());
    request.set_resident_memory_bytes(memory.resident_bytes);
    request.set_peak_resident_memory_bytes(memory.peak_resident_bytes);
    absl::StatusOr<HeartbeatResponse> response = chief_->Heartbeat(request);
    if (absl::IsNotFound(response.status())) {
      // The chief does not know this task: it was restarted (Kubernetes, the launcher)
      // and is waiting for every task to register again. Re-attach rather than die.
      absl::StatusOr<RegisterTaskResponse> registered = chief_->RegisterTask(RegisterRequest());
      if (registered.ok()) {
        last_answer = absl::Now();
        LogWarning(absl::StrCat("registered again with ", chief_->name(),
                             " (it was restarted)"));
        continue;
      }
      response = registered.status();
    }
    if (response.ok()) {
      last_answer = absl::Now();
      if (response->shutdown()) {
        shutdown_->Request(0, "the chief says the job is over");
        return;
      }
      continue;
    }
    if (absl::Now() - last_answer > options_.chief_timeout) {
      shutdown_->Request(1, absl::StrCat("lost the chief: no answer for ",
                                         absl::FormatDuration(options_.chief_timeout),
                                         "; last error: ", response.status().message()));
      return;
    }
  }
}

}  // namespace pstrain
