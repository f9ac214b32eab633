#include "ps_server/rpc/grpc_ps_client.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/rpc/grpc_util.h"
#include "proto/ps.grpc.pb.h"

namespace pstrain {
namespace {

absl::StatusOr<std::vector<Tensor>> UnpackPull(const PullResponse& response, size_t expected,
                                               const std::string& peer,
                                               std::vector<int64_t>* versions) {
  if (static_cast<size_t>(response.values_size()) != expected) {
    return absl::InternalError(absl::StrCat(peer, ": answered ", response.values_size(),
                                            " values for ", expected, " variables"));
  }
  std::vector<Tensor> values;
  values.reserve(expected);
  for (const TensorProto& proto : response.values()) {
    absl::StatusOr<Tensor> t = Tensor::FromProto(proto);
    if (!t.ok()) return absl::InternalError(absl::StrCat(peer, ": ", t.status().message()));
    values.push_back(*std::move(t));
  }
  if (versions != nullptr) {
    if (static_cast<size_t>(response.versions_size()) != expected) {
      return absl::InternalError(absl::StrCat(peer, ": answered ", response.versions_size(),
                                              " versions for ", expected, " variables"));
    }
    versions->assign(response.versions().begin(), response.versions().end());
  }
  return values;
}

void PackPush(absl::Span<const NamedTensor> gradients, const PushContext& context,
              PushRequest* request) {
  request->set_worker(context.worker);
  request->set_epoch(context.epoch);
  request->set_step(context.step);
  for (int64_t v : context.versions) request->add_versions(v);
  for (const NamedTensor& g : gradients) {
    Gradient* out = request->add_gradients();
    out->set_name(g.name);
    g.tensor.ToProto(out->mutable_gradient());
  }
}

class GrpcPsClient final : public PsClient {
 public:
  GrpcPsClient(int ps_index, const std::string& address, absl::Duration timeout)
      : name_(absl::StrCat("ps task ", ps_index, " (", address, ")")),
        stub_(ParameterServer::NewStub(CreateChannel(address))),
        timeout_(timeout) {}

  using PsClient::CreateVariables;
  using PsClient::Pull;
  using PsClient::PushPull;

  std::string name() const override { return name_; }

  absl::Status CreateVariables(std::vector<NamedTensor> variables,
                               const OptimizerConfig& optimizer,
                               const ConsistencyConfig& consistency) override {
    CreateVariablesRequest request;
    *request.mutable_optimizer() = optimizer;
    *request.mutable_consistency() = consistency;
    for (const NamedTensor& v : variables) {
      VariableDef* def = request.add_variables();
      def->set_name(v.name);
      v.tensor.ToProto(def->mutable_initial_value());
    }
    CreateVariablesResponse response;
    grpc::ClientContext context;
    SetTimeout(&context, timeout_);
    return FromGrpcStatus(stub_->CreateVariables(&context, request, &response), name_);
  }

  absl::StatusOr<std::vector<Tensor>> Pull(absl::Span<const std::string> names,
                                           std::vector<int64_t>* versions) override {
    PullRequest request;
    for (const std::string& n : names) request.add_names(n);
    PullResponse response;
    grpc::ClientContext context;
    SetTimeout(&context, timeout_);
    absl::Status status = FromGrpcStatus(stub_->Pull(&context, request, &response), name_);
    if (!status.ok()) return status;
    return UnpackPull(response, names.size(), name_, versions);
  }

  absl::Status Push(absl::Span<const NamedTensor> gradients, int64_t step) override {
    PushRequest request;
    PushContext push_context;
    push_context.step = step;
    PackPush(gradients, push_context, &request);
    PushResponse response;
    grpc::ClientContext context;
    SetTimeout(&context, timeout_);
    return FromGrpcStatus(stub_->Push(&context, request, &response), name_);
  }

  absl::StatusOr<std::vector<Tensor>> PushPull(absl::Span<const NamedTensor> gradients,
                                               const PushContext& push_context,
                                               std::vector<int64_t>* versions) override {
    PushPullRequest request;
    PackPush(gradients, push_context, request.mutable_push());
    PushPullResponse response;
    grpc::ClientContext context;
    SetTimeout(&context, timeout_);
    absl::Status status = FromGrpcStatus(stub_->PushPull(&context, request, &response), name_);
    if (!status.ok()) return status;
    return UnpackPull(response.pull(), gradients.size(), name_, versions);
  }

  absl::StatusOr<PsStatusResponse> GetStatus() override {
    PsStatusRequest request;
    PsStatusResponse response;
    grpc::ClientContext context;
    SetTimeout(&context, timeout_);
    absl::Status status = FromGrpcStatus(stub_->GetStatus(&context, request, &response), name_);
    if (!status.ok()) return status;
    return response;
  }

  absl::StatusOr<std::vector<VariableSnapshot>> ReadState(
      absl::Span<const std::string> names) override {
    ReadStateRequest request;
    for (const std::string& n : names) request.add_names(n);
    ReadStateResponse response;
    grpc::ClientContext context;
    SetTimeout(&context, timeout_);
    absl::Status status = FromGrpcStatus(stub_->ReadState(&context, request, &response), name_);
    if (!status.ok()) return status;
    if (!names.empty() && static_cast<size_t>(response.variables_size()) != names.size()) {
      return absl::InternalError(absl::StrCat(name_, ": answered ", response.variables_size(),
                                              " states for ", names.size(), " variables"));
    }
    std::vector<VariableSnapshot> snapshots;
    for (const VariableState& v : response.variables()) {
      absl::StatusOr<VariableSnapshot> s = SnapshotFromProto(v);
      if (!s.ok()) return absl::InternalError(absl::StrCat(name_, ": ", s.status().message()));
      snapshots.push_back(*std::move(s));
    }
    return snapshots;
  }

  absl::Status RestoreState(const std::vector<VariableSnapshot>& snapshots) override {
    RestoreStateRequest request;
    for (const VariableSnapshot& s : snapshots) SnapshotToProto(s, request.add_variables());
    RestoreStateResponse response;
    grpc::ClientContext context;
    SetTimeout(&context, timeout_);
    return FromGrpcStatus(stub_->RestoreState(&context, request, &response), name_);
  }

  absl::Status Shutdown(const std::string& reason) override {
    ShutdownRequest request;
    request.set_reason(reason);
    ShutdownResponse response;
    grpc::ClientContext context;
    SetTimeout(&context, timeout_);
    return FromGrpcStatus(stub_->Shutdown(&context, request, &response), name_);
  }

 private:
  const std::string name_;
  std::unique_ptr<ParameterServer::Stub> stub_;
  const absl::Duration timeout_;
};

}  // namespace

std::unique_ptr<PsClient> CreateGrpcPsClient(int ps_index, const std::string& address,
                                             absl::Duration timeout) {
  return std::make_unique<GrpcPsClient>(ps_index, address, timeout);
}

}  // namespace pstrain
