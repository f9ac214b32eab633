#include "ps_server/rpc/grpc_ps_client.h"

#include <algorithm>
#include <atomic>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/model/row_initializer.h"
#include "common/rpc/grpc_util.h"
#include "common/wire_precision.h"
#include "grpcpp/impl/rpc_method.h"
#include "grpcpp/support/sync_stream.h"
#include "proto/ps.grpc.pb.h"
#include "ps_server/rpc/checkpoint_shard_proto.h"

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
    absl::StatusOr<Tensor> t = TensorFromWireProto(proto);
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
  request->set_request_id(context.request_id);
  request->set_worker(context.worker);
  request->set_epoch(context.epoch);
  request->set_step(context.step);
  for (int64_t v : context.versions) request->add_versions(v);
  if (context.precision != WirePrecision::kFloat32) {
    request->set_pull_dtype(WireDataType(context.precision));
  }
  for (const NamedTensor& g : gradients) {
    Gradient* out = request->add_gradients();
    out->set_name(g.name);
    TensorToWireProto(g.tensor, context.precision, out->mutable_gradient());
  }
}

// `shard` as CreateVariables carries it (the ps's InitialShardOf reads it back).
void ToInitializerSpec(const InitialShard& shard, InitializerSpec* spec) {
  const RowInitializer& init = shard.init;
  switch (init.distribution) {
    case InitialDistribution::kConstant:
      spec->set_kind(INITIALIZER_CONSTANT);
      spec->set_value(init.a);
      break;
    case InitialDistribution::kNormal:
    case InitialDistribution::kTruncatedNormal:
      spec->set_kind(init.distribution == InitialDistribution::kNormal
                         ? INITIALIZER_NORMAL
                         : INITIALIZER_TRUNCATED_NORMAL);
      spec->set_mean(init.a);
      spec->set_stddev(init.b);
      break;
    case InitialDistribution::kUniform:
      spec->set_kind(INITIALIZER_UNIFORM);
      spec->set_minval(init.a);
      spec->set_maxval(init.b);
      break;
  }
  spec->set_seed(init.seed);
  for (int64_t d : init.shape) spec->add_variable_shape(d);
  spec->set_row_begin(shard.row_begin);
  spec->set_row_end(shard.row_end);
}

// A start for a client's request ids: distinct clients (workers, restarts) never share ids.
uint64_t RandomStart() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

class GrpcPsClient final : public PsClient {
 public:
  GrpcPsClient(int ps_index, const std::string& address, absl::Duration timeout,
               const GrpcPsClientOptions& options)
      : name_(absl::StrCat("ps task ", ps_index, " (", address, ")")),
        channel_(CreateChannel(address)),
        stub_(ParameterServer::NewStub(channel_)),
        push_pull_stream_(kPushPullStreamMethod, grpc::internal::RpcMethod::BIDI_STREAMING,
                          channel_),
        timeout_(timeout),
        options_(options),
        request_ids_(RandomStart()) {}

  using PsClient::CreateVariables;
  using PsClient::Pull;
  using PsClient::PushPull;

  std::string name() const override { return name_; }

  absl::Status CreateVariables(std::vector<NamedTensor> variables,
                               const OptimizerConfig& optimizer,
                               const ConsistencyConfig& consistency) override {
    return CreateVariables(std::move(variables), {}, optimizer, consistency);
  }

  absl::Status CreateVariables(std::vector<NamedTensor> variables,
                               std::vector<InitialShard> drawn, const OptimizerConfig& optimizer,
                               const ConsistencyConfig& consistency) override {
    CreateVariablesRequest request;
    *request.mutable_optimizer() = optimizer;
    *request.mutable_consistency() = consistency;
    for (const NamedTensor& v : variables) {
      VariableDef* def = request.add_variables();
      def->set_name(v.name);
      v.tensor.ToProto(def->mutable_initial_value());
    }
    for (const InitialShard& d : drawn) {
      VariableDef* def = request.add_variables();
      def->set_name(d.name);
      ToInitializerSpec(d, def->mutable_initializer());
    }
    CreateVariablesResponse response;
    grpc::ClientContext context;
    SetTimeout(&context, timeout_);
    return FromGrpcStatus(stub_->CreateVariables(&context, request, &response), name_);
  }

  absl::Status CreateVariablesFromKeras(const KerasWeightsFile& file,
                                        std::vector<KerasRowsRequest> shards,
                                        const OptimizerConfig& optimizer,
                                        const ConsistencyConfig& consistency) override {
    CreateVariablesRequest request;
    *request.mutable_optimizer() = optimizer;
    *request.mutable_consistency() = consistency;
    request.mutable_keras_file()->set_path(file.path);
    request.mutable_keras_file()->set_weights_bytes(file.member.size);
    request.mutable_keras_file()->set_weights_crc32(file.member.crc32);
    for (const KerasRowsRequest& shard : shards) {
      VariableDef* def = request.add_variables();
      def->set_name(shard.name);
      KerasRows* rows = def->mutable_keras_rows();
      rows->set_dataset(shard.dataset);
      for (int64_t d : shard.shape) rows->add_variable_shape(d);
      rows->set_row_begin(shard.row_begin);
      rows->set_row_end(shard.row_end);
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

  absl::StatusOr<std::vector<Tensor>> PullRows(absl::Span<const RowsRequest> requests,
                                               std::vector<int64_t>* versions) override {
    PullRowsRequest request;
    for (const RowsRequest& r : requests) {
      VariableRows* out = request.add_variables();
      out->set_name(r.name);
      out->mutable_rows()->Add(r.rows.begin(), r.rows.end());
    }
    PullRowsResponse response;
    grpc::ClientContext context;
    SetTimeout(&context, timeout_);
    absl::Status status = FromGrpcStatus(stub_->PullRows(&context, request, &response), name_);
    if (!status.ok()) return status;
    PullResponse values;
    values.mutable_values()->Swap(response.mutable_values());
    values.mutable_versions()->Swap(response.mutable_versions());
    return UnpackPull(values, requests.size(), name_, versions);
  }

  absl::Status PushRows(absl::Span<const SparseGradient> gradients,
                        const PushContext& push_context) override {
    PushRowsRequest request;
    request.set_worker(push_context.worker);
    request.set_epoch(push_context.epoch);
    request.set_step(push_context.step);
    request.set_request_id(push_context.request_id != 0 ? push_context.request_id
                                                        : NextRequestId());
    request.mutable_versions()->Add(push_context.versions.begin(), push_context.versions.end());
    for (const SparseGradient& g : gradients) {
      RowGradient* out = request.add_gradients();
      out->set_name(g.name);
      out->mutable_rows()->Add(g.rows.begin(), g.rows.end());
      g.values.ToProto(out->mutable_values());
    }
    // As PushPull: one retry when the ps was unreachable (the request id keeps a push that
    // did arrive from being applied twice).
    absl::Status status;
    for (int attempt = 0; attempt < 2; ++attempt) {
      PushRowsResponse response;
      grpc::ClientContext context;
      SetTimeout(&context, timeout_);
      status = FromGrpcStatus(stub_->PushRows(&context, request, &response), name_);
      if (!absl::IsUnavailable(status)) break;
    }
    return status;
  }

  absl::Status Push(absl::Span<const NamedTensor> gradients, int64_t step) override {
    PushRequest request;
    PushContext push_context;
    push_context.step = step;
    push_context.request_id = NextRequestId();
    PackPush(gradients, push_context, &request);
    PushResponse response;
    grpc::ClientContext context;
    SetTimeout(&context, timeout_);
    return FromGrpcStatus(stub_->Push(&context, request, &response), name_);
  }

  absl::StatusOr<std::vector<Tensor>> PushPull(absl::Span<const NamedTensor> gradients,
                                               const PushContext& push_context_in,
                                               std::vector<int64_t>* versions) override {
    PushContext push_context = push_context_in;
    if (push_context.request_id == 0) push_context.request_id = NextRequestId();
    absl::StatusOr<std::vector<Tensor>> values =
        PushPullOnce(gradients, push_context, versions);
    // Unreachable: most likely nothing arrived; if it did, the ps knows the id and does
    // not apply it twice.
    if (absl::IsUnavailable(values.status())) {
      values = PushPullOnce(gradients, push_context, versions);
    }
    return values;
  }

  absl::StatusOr<std::vector<Tensor>> PushPullOnce(absl::Span<const NamedTensor> gradients,
                                                   const PushContext& push_context,
                                                   std::vector<int64_t>* versions) {
    int64_t bytes = 0;
    for (const NamedTensor& g : gradients) {
      bytes += g.tensor.num_elements() * WireBytesPerElement(push_context.precision);
    }
    if (bytes >= options_.stream_threshold_bytes) {
      return PushPullStreamed(gradients, push_context, versions);
    }
    PushPullRequest request;
    PackPush(gradients, push_context, request.mutable_push());
    PushPullResponse response;
    grpc::ClientContext context;
    SetTimeout(&context, timeout_);
    absl::Status status = FromGrpcStatus(stub_->PushPull(&context, request, &response), name_);
    if (!status.ok()) return status;
    return UnpackPull(response.pull(), gradients.size(), name_, versions);
  }

  // PushPull over PushPullStream: the gradients go up in chunks, the values come back in
  // chunks; the ps applies the push once all of it arrived.
  absl::StatusOr<std::vector<Tensor>> PushPullStreamed(absl::Span<const NamedTensor> gradients,
                                                       const PushContext& push_context,
                                                       std::vector<int64_t>* versions) {
    grpc::ClientContext context;
    SetTimeout(&context, timeout_);
    std::unique_ptr<grpc::ClientReaderWriter<PushPullChunkIn, PushPullChunkOut>> stream(
        grpc::internal::ClientReaderWriterFactory<PushPullChunkIn, PushPullChunkOut>::Create(
            channel_.get(), push_pull_stream_, &context));

    PushPullChunkIn out;
    PushRequest* push = out.fields().mutable_push();
    push->set_request_id(push_context.request_id);
    push->set_worker(push_context.worker);
    push->set_epoch(push_context.epoch);
    push->set_step(push_context.step);
    for (int64_t v : push_context.versions) push->add_versions(v);
    const WirePrecision precision = push_context.precision;
    if (precision != WirePrecision::kFloat32) push->set_pull_dtype(WireDataType(precision));
    // In 16 bits the gradients go from an encoded copy; in float32 from the tensors.
    std::vector<std::string> encoded;
    std::vector<int64_t> bytes;
    for (const NamedTensor& g : gradients) {
      Gradient* header = push->add_gradients();
      header->set_name(g.name);
      TensorHeader(g.tensor, WireDataType(precision), header->mutable_gradient());
      if (precision != WirePrecision::kFloat32) {
        encoded.push_back(EncodeForWire(precision, g.tensor.values()));
        bytes.push_back(static_cast<int64_t>(encoded.back().size()));
      } else {
        bytes.push_back(g.tensor.num_elements() * 4);
      }
    }
    // The last message carries the commit and goes with the half-close (WriteLast): the
    // ps applies the push only then, so a stream cut short applies nothing.
    int last_tensor = -1;
    for (size_t t = 0; t < bytes.size(); ++t) {
      if (bytes[t] > 0) last_tensor = static_cast<int>(t);
    }
    bool header_sent = false;
    bool sent = true;
    ForEachChunk(bytes, options_.chunk_bytes, [&](int tensor, int64_t offset, int64_t size) {
      if (header_sent) out.fields().Clear();
      out.fields().set_tensor(tensor);
      out.fields().set_offset(offset);
      // One copy into a gRPC slice: the caller's tensor may be gone before gRPC lets go
      // of a slice borrowed from it (after an early error, say).
      const char* base = encoded.empty()
                             ? reinterpret_cast<const char*>(gradients[tensor].tensor.data())
                             : encoded[tensor].data();
      out.SetPayloadCopy(base + offset, size);
      header_sent = true;
      if (tensor == last_tensor && offset + size == bytes[tensor]) {
        out.fields().set_commit(true);
        sent = stream->Write(out, grpc::WriteOptions().set_last_message());
        return false;
      }
      sent = stream->Write(out);
      return sent;
    });
    if (!header_sent) {
      out.fields().set_commit(true);
      sent = stream->Write(out, grpc::WriteOptions().set_last_message());
    }
    // A failed write means the call is over: Finish says why.
    (void)sent;

    // The values: a header message, then chunks, as the push went up.
    absl::Status unpacked = absl::OkStatus();
    // The stream ended (a Read failed) before the values were whole: its status says
    // why (a ps that failed, or one that did not prove it is of the job, whose stream
    // the channel cancels at its first message).
    bool cut_short = false;
    std::vector<Tensor> values;
    PushPullChunkOut in;
    if (stream->Read(&in)) {
      TensorAssembler assembler;
      unpacked = StartValues(in.fields(), gradients.size(), versions, &assembler);
      while (unpacked.ok()) {
        if (in.payload_size() > 0) {
          unpacked = assembler.Add(in.fields().tensor(), in.fields().offset(), in);
        }
        if (!unpacked.ok()) break;
        if (!stream->Read(&in)) {
          cut_short = true;
          break;
        }
        if (in.fields().has_pull()) {
          unpacked = absl::InvalidArgumentError("a second pull header");
        }
      }
      if (unpacked.ok()) unpacked = assembler.Finish();
      if (unpacked.ok()) values = assembler.Take();
    }
    if (!unpacked.ok() && !cut_short) context.TryCancel();
    absl::Status status = FromGrpcStatus(stream->Finish(), name_);
    if (cut_short && !status.ok()) return status;
    if (!unpacked.ok()) {
      return absl::InternalError(absl::StrCat(name_, ": malformed pull: ", unpacked.message()));
    }
    if (!status.ok()) return status;
    if (values.size() != gradients.size()) {
      return absl::InternalError(absl::StrCat(name_, ": answered ", values.size(),
                                              " values for ", gradients.size(), " variables"));
    }
    return values;
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

  absl::StatusOr<ShardFile> WriteCheckpointShard(const std::string& checkpoint, int ps_index,
                                                 const std::vector<ShardSlice>& slices) override {
    WriteCheckpointShardRequest request;
    request.set_checkpoint(checkpoint);
    request.set_ps_index(ps_index);
    for (const ShardSlice& slice : slices) SliceToProto(slice, request.add_shards());
    WriteCheckpointShardResponse response;
    grpc::ClientContext context;
    // Writing a shard is disk-bound: a large one takes far longer than a pull.
    SetTimeout(&context, std::max(timeout_, absl::Minutes(30)));
    absl::Status status =
        FromGrpcStatus(stub_->WriteCheckpointShard(&context, request, &response), name_);
    if (!status.ok()) return status;
    return ShardFileFromProto(response);
  }

  absl::Status RestoreCheckpointShard(const std::string& checkpoint,
                                      const std::vector<ShardSlice>& slices) override {
    RestoreCheckpointShardRequest request;
    request.set_checkpoint(checkpoint);
    for (const ShardSlice& slice : slices) SliceToProto(slice, request.add_shards());
    RestoreCheckpointShardResponse response;
    grpc::ClientContext context;
    SetTimeout(&context, std::max(timeout_, absl::Minutes(30)));
    return FromGrpcStatus(stub_->RestoreCheckpointShard(&context, request, &response), name_);
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
  // Checks the pull header of a streamed push-pull and readies `assembler` for the values.
  static absl::Status StartValues(const PushPullChunkResponse& header, size_t expected,
                                  std::vector<int64_t>* versions, TensorAssembler* assembler) {
    if (!header.has_pull()) return absl::InvalidArgumentError("no pull header");
    const PullResponse& pull = header.pull();
    if (static_cast<size_t>(pull.values_size()) != expected ||
        static_cast<size_t>(pull.versions_size()) != expected) {
      return absl::InvalidArgumentError(absl::StrCat(pull.values_size(), " values and ",
                                                     pull.versions_size(), " versions for ",
                                                     expected, " variables"));
    }
    if (versions != nullptr) versions->assign(pull.versions().begin(), pull.versions().end());
    std::vector<const TensorProto*> headers;
    std::vector<std::string> labels;
    for (int i = 0; i < pull.values_size(); ++i) {
      headers.push_back(&pull.values(i));
      labels.push_back(absl::StrCat("value ", i));
    }
    return assembler->Start(headers, std::move(labels));
  }

  const std::string name_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<ParameterServer::Stub> stub_;
  // A fresh id per push: random from a per-client random start, never 0.
  uint64_t NextRequestId() {
    uint64_t id;
    do {
      id = request_ids_.fetch_add(1, std::memory_order_relaxed);
    } while (id == 0);
    return id;
  }

  const grpc::internal::RpcMethod push_pull_stream_;
  const absl::Duration timeout_;
  const GrpcPsClientOptions options_;
  std::atomic<uint64_t> request_ids_;
};

}  // namespace

std::unique_ptr<PsClient> CreateGrpcPsClient(int ps_index, const std::string& address,
                                             absl::Duration timeout,
                                             const GrpcPsClientOptions& options) {
  return std::make_unique<GrpcPsClient>(ps_index, address, timeout, options);
}

}  // namespace pstrain
