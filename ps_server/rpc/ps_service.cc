#include "ps_server/rpc/ps_service.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/rpc/grpc_util.h"

namespace pstrain {
namespace {

absl::StatusOr<std::vector<NamedTensor>> UnpackGradients(const PushRequest& request) {
  std::vector<NamedTensor> gradients;
  gradients.reserve(request.gradients_size());
  for (const Gradient& g : request.gradients()) {
    absl::StatusOr<Tensor> tensor = Tensor::FromProto(g.gradient());
    if (!tensor.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("gradient for \"", g.name(), "\": ", tensor.status().message()));
    }
    gradients.push_back({g.name(), *std::move(tensor)});
  }
  return gradients;
}

PushContext ContextOf(const PushRequest& request) {
  PushContext context;
  context.worker = request.worker();
  context.epoch = request.epoch();
  context.step = request.step();
  context.versions.assign(request.versions().begin(), request.versions().end());
  return context;
}

absl::Status PullInto(const VariableStore& store, std::vector<std::string> names,
                      PullResponse* response) {
  std::vector<int64_t> versions;
  absl::StatusOr<std::vector<Tensor>> values = store.Pull(names, &versions);
  if (!values.ok()) return values.status();
  for (size_t i = 0; i < values->size(); ++i) {
    (*values)[i].ToProto(response->add_values());
    response->add_versions(versions[i]);
  }
  return absl::OkStatus();
}

}  // namespace

PsServiceImpl::PsServiceImpl(VariableStore* store,
                             std::function<void(const std::string&)> on_shutdown)
    : store_(store), on_shutdown_(std::move(on_shutdown)) {}

grpc::Status PsServiceImpl::CreateVariables(grpc::ServerContext*,
                                            const CreateVariablesRequest* request,
                                            CreateVariablesResponse*) {
  std::vector<NamedTensor> variables;
  for (const VariableDef& def : request->variables()) {
    absl::StatusOr<Tensor> value = Tensor::FromProto(def.initial_value());
    if (!value.ok()) {
      return ToGrpcStatus(absl::InvalidArgumentError(
          absl::StrCat("variable \"", def.name(), "\": ", value.status().message())));
    }
    variables.push_back({def.name(), *std::move(value)});
  }
  return ToGrpcStatus(store_->CreateVariables(std::move(variables), request->optimizer(),
                                              request->consistency()));
}

grpc::Status PsServiceImpl::Pull(grpc::ServerContext*, const PullRequest* request,
                                 PullResponse* response) {
  return ToGrpcStatus(PullInto(
      *store_, std::vector<std::string>(request->names().begin(), request->names().end()),
      response));
}

grpc::Status PsServiceImpl::Push(grpc::ServerContext*, const PushRequest* request,
                                 PushResponse*) {
  absl::StatusOr<std::vector<NamedTensor>> gradients = UnpackGradients(*request);
  if (!gradients.ok()) return ToGrpcStatus(gradients.status());
  return ToGrpcStatus(store_->Push(*gradients, ContextOf(*request)));
}

grpc::Status PsServiceImpl::PushPull(grpc::ServerContext*, const PushPullRequest* request,
                                     PushPullResponse* response) {
  absl::StatusOr<std::vector<NamedTensor>> gradients = UnpackGradients(request->push());
  if (!gradients.ok()) return ToGrpcStatus(gradients.status());
  if (absl::Status pushed = store_->Push(*gradients, ContextOf(request->push())); !pushed.ok()) {
    return ToGrpcStatus(pushed);
  }
  std::vector<std::string> names;
  for (const NamedTensor& g : *gradients) names.push_back(g.name);
  return ToGrpcStatus(PullInto(*store_, std::move(names), response->mutable_pull()));
}

grpc::Status PsServiceImpl::GetStatus(grpc::ServerContext*, const PsStatusRequest*,
                                      PsStatusResponse* response) {
  *response = DescribeStore(*store_);
  return grpc::Status::OK;
}

grpc::Status PsServiceImpl::ReadState(grpc::ServerContext*, const ReadStateRequest* request,
                                      ReadStateResponse* response) {
  absl::StatusOr<std::vector<VariableSnapshot>> state = store_->ReadState(
      std::vector<std::string>(request->names().begin(), request->names().end()));
  if (!state.ok()) return ToGrpcStatus(state.status());
  for (const VariableSnapshot& s : *state) SnapshotToProto(s, response->add_variables());
  return grpc::Status::OK;
}

grpc::Status PsServiceImpl::RestoreState(grpc::ServerContext*,
                                         const RestoreStateRequest* request,
                                         RestoreStateResponse*) {
  std::vector<VariableSnapshot> snapshots;
  snapshots.reserve(request->variables_size());
  for (const VariableState& v : request->variables()) {
    absl::StatusOr<VariableSnapshot> s = SnapshotFromProto(v);
    if (!s.ok()) return ToGrpcStatus(s.status());
    snapshots.push_back(*std::move(s));
  }
  return ToGrpcStatus(store_->RestoreState(std::move(snapshots)));
}

grpc::Status PsServiceImpl::Shutdown(grpc::ServerContext*, const ShutdownRequest* request,
                                     ShutdownResponse*) {
  on_shutdown_(request->reason());
  return grpc::Status::OK;
}

}  // namespace pstrain
