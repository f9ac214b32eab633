#include "chief/rpc/chief_service.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/process_memory.h"
#include "common/rpc/call_authorizer.h"
#include "common/rpc/grpc_util.h"

namespace pstrain {
namespace {

// The task a request names, its type parsed once here at the wire.
// Errors: INVALID_ARGUMENT a type TF_CONFIG does not know.
absl::StatusOr<TaskId> TaskOf(const std::string& type, int index) {
  absl::StatusOr<Role> role = RoleFromTaskType(type);
  if (!role.ok()) return role.status();
  return TaskId{*role, index};
}

}  // namespace

ChiefServiceImpl::ChiefServiceImpl(Membership* membership, std::string job_json,
                                   std::string job_base_dir,
                                   std::function<void(ChiefStatusResponse*)> describe,
                                   std::function<absl::StatusOr<SaveCheckpointResponse>(
                                       absl::Duration)> save_checkpoint)
    : membership_(membership),
      job_json_(std::move(job_json)),
      job_base_dir_(std::move(job_base_dir)),
      describe_(std::move(describe)),
      save_checkpoint_(std::move(save_checkpoint)) {}

grpc::Status ChiefServiceImpl::RegisterTask(grpc::ServerContext* context,
                                            const RegisterTaskRequest* request,
                                            RegisterTaskResponse* response) {
  // A task registers as itself only: a worker's certificate or claim cannot take ps 0's
  // place (and be answered with the job).
  if (grpc::Status caller =
          CheckCallerIsTask(*context, request->task_type(), request->task_index());
      !caller.ok()) {
    return caller;
  }
  absl::StatusOr<TaskId> task = TaskOf(request->task_type(), request->task_index());
  if (!task.ok()) return ToGrpcStatus(task.status());
  absl::Status status = membership_->Register(*task, request->address(), request->incarnation());
  if (!status.ok()) return ToGrpcStatus(status);
  LogInfo(absl::StrCat(request->task_type(), " ", request->task_index(), " registered from ",
                       request->address()));
  response->set_job_json(job_json_);
  response->set_job_base_dir(job_base_dir_);
  return grpc::Status::OK;
}

grpc::Status ChiefServiceImpl::Heartbeat(grpc::ServerContext* context,
                                         const HeartbeatRequest* request,
                                         HeartbeatResponse* response) {
  if (grpc::Status caller =
          CheckCallerIsTask(*context, request->task_type(), request->task_index());
      !caller.ok()) {
    return caller;
  }
  ProcessMemory memory;
  memory.resident_bytes = request->resident_memory_bytes();
  memory.peak_resident_bytes = request->peak_resident_memory_bytes();
  absl::StatusOr<TaskId> task = TaskOf(request->task_type(), request->task_index());
  if (!task.ok()) return ToGrpcStatus(task.status());
  absl::StatusOr<bool> over = membership_->Heartbeat(*task, request->incarnation(), memory);
  if (!over.ok()) return ToGrpcStatus(over.status());
  response->set_shutdown(*over);
  return grpc::Status::OK;
}

grpc::Status ChiefServiceImpl::Report(grpc::ServerContext* context, const ReportRequest* request,
                                      ReportResponse*) {
  if (grpc::Status caller =
          CheckCallerIsTask(*context, request->task_type(), request->task_index());
      !caller.ok()) {
    return caller;
  }
  // Only members may write to the chief's log, and only one line each.
  absl::StatusOr<TaskId> task = TaskOf(request->task_type(), request->task_index());
  if (!task.ok()) return ToGrpcStatus(task.status());
  if (absl::Status known = membership_->CheckKnown(*task); !known.ok()) {
    return ToGrpcStatus(known);
  }
  std::string message = request->message().substr(0, 1000);
  for (char& c : message) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  LogInfo(absl::StrCat(request->task_type(), " ", request->task_index(), " reports: ", message));
  return grpc::Status::OK;
}

grpc::Status ChiefServiceImpl::GetStatus(grpc::ServerContext*, const ChiefStatusRequest*,
                                         ChiefStatusResponse* response) {
  *response = Status();
  return grpc::Status::OK;
}

ChiefStatusResponse ChiefServiceImpl::Status() const {
  ChiefStatusResponse status;
  describe_(&status);
  for (TaskState& state : TaskStates(*membership_)) *status.add_tasks() = std::move(state);
  // The chief's own, read now (the tasks' come with their heartbeats).
  if (absl::StatusOr<ProcessMemory> memory = ReadProcessMemory(); memory.ok()) {
    status.set_chief_resident_memory_bytes(memory->resident_bytes);
    status.set_chief_peak_resident_memory_bytes(memory->peak_resident_bytes);
  }
  return status;
}

grpc::Status ChiefServiceImpl::SaveCheckpoint(grpc::ServerContext* context,
                                              const SaveCheckpointRequest*,
                                              SaveCheckpointResponse* response) {
  if (!save_checkpoint_) {
    return ToGrpcStatus(absl::UnimplementedError("this chief does not write checkpoints"));
  }
  // Answer a little before the caller's deadline so it gets our reason, not its own
  // DEADLINE_EXCEEDED; without a deadline, wait at most 10 minutes (nothing waits forever).
  absl::Duration wait = absl::Minutes(10);
  const auto deadline = context->deadline();
  if (deadline != std::chrono::system_clock::time_point::max()) {
    wait = std::min(wait, absl::FromChrono(deadline - std::chrono::system_clock::now()) * 0.9);
  }
  absl::StatusOr<SaveCheckpointResponse> saved = save_checkpoint_(wait);
  if (!saved.ok()) return ToGrpcStatus(saved.status());
  LogInfo(absl::StrCat("checkpoint ", saved->path(), " written on request"));
  *response = *std::move(saved);
  return grpc::Status::OK;
}

}  // namespace pstrain
