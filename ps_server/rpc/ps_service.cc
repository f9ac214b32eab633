#include "ps_server/rpc/ps_service.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/rpc/grpc_util.h"
#include "common/status_macros.h"

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
  context.request_id = request.request_id();
  return context;
}

absl::Status PullInto(const VariableStore& store, std::vector<std::string> names,
                      int64_t max_bytes, PullResponse* response, PsMetrics* metrics) {
  std::vector<int64_t> versions;
  absl::StatusOr<std::vector<Tensor>> values = store.Pull(names, &versions, max_bytes);
  if (!values.ok()) return values.status();
  int64_t bytes = 0;
  for (size_t i = 0; i < values->size(); ++i) {
    (*values)[i].ToProto(response->add_values());
    response->add_versions(versions[i]);
    bytes += (*values)[i].num_elements() * static_cast<int64_t>(sizeof(float));
  }
  if (metrics != nullptr) metrics->RecordPull(bytes);
  return absl::OkStatus();
}

int64_t PayloadBytes(absl::Span<const NamedTensor> tensors) {
  int64_t bytes = 0;
  for (const NamedTensor& t : tensors) {
    bytes += t.tensor.num_elements() * static_cast<int64_t>(sizeof(float));
  }
  return bytes;
}

// A request's row gradients, each validated as a tensor (the store checks the rest).
absl::StatusOr<std::vector<SparseGradient>> UnpackRowGradients(
    const PushRowsRequest& request, int64_t* payload_bytes) {
  std::vector<SparseGradient> gradients;
  gradients.reserve(request.gradients_size());
  *payload_bytes = 0;
  for (const RowGradient& g : request.gradients()) {
    absl::StatusOr<Tensor> values = Tensor::FromProto(g.values());
    if (!values.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("row gradient for \"", g.name(),
                                                     "\": ", values.status().message()));
    }
    *payload_bytes += values->num_elements() * static_cast<int64_t>(sizeof(float)) +
                      g.rows_size() * static_cast<int64_t>(sizeof(int64_t));
    gradients.push_back(
        {g.name(), std::vector<int64_t>(g.rows().begin(), g.rows().end()), *std::move(values)});
  }
  return gradients;
}

}  // namespace

PsServiceImpl::PsServiceImpl(VariableStore* store,
                             std::function<void(const std::string&)> on_shutdown,
                             PsServiceOptions options)
    : store_(store),
      on_shutdown_(std::move(on_shutdown)),
      options_(options),
      streams_(options.stream_limits) {
  // Replaces the generated handler (protobuf messages, tensor bytes copied through
  // strings) with one whose messages keep the bytes in gRPC slices. The service owns it.
  MarkMethodStreamed(
      kPushPullStreamMethodIndex,
      new grpc::internal::BidiStreamingHandler<PsServiceImpl, PushPullChunkIn,
                                               PushPullChunkOut>(
          [](PsServiceImpl* self, grpc::ServerContext* context,
             grpc::ServerReaderWriter<PushPullChunkOut, PushPullChunkIn>* stream) {
            return self->PushPullChunks(context, stream);
          },
          this));
}

absl::Status PsServiceImpl::Push(absl::Span<const NamedTensor> gradients,
                                 const PushContext& context) {
  if (metrics_ == nullptr) return store_->Push(gradients, context);
  const int64_t start = absl::GetCurrentTimeNanos();
  absl::Status pushed = store_->Push(gradients, context);
  if (pushed.ok()) {
    metrics_->RecordPush(PayloadBytes(gradients),
                         absl::Nanoseconds(absl::GetCurrentTimeNanos() - start));
  }
  return pushed;
}

grpc::Status PsServiceImpl::Answer(const char* method, const absl::Status& status) {
  if (metrics_ != nullptr) metrics_->RecordResult(method, status);
  return ToGrpcStatus(status);
}

grpc::Status PsServiceImpl::CreateVariables(grpc::ServerContext*,
                                            const CreateVariablesRequest* request,
                                            CreateVariablesResponse*) {
  std::vector<NamedTensor> variables;
  for (const VariableDef& def : request->variables()) {
    absl::StatusOr<Tensor> value = Tensor::FromProto(def.initial_value());
    if (!value.ok()) {
      return Answer("CreateVariables", absl::InvalidArgumentError(absl::StrCat(
                                           "variable \"", def.name(), "\": ",
                                           value.status().message())));
    }
    variables.push_back({def.name(), *std::move(value)});
  }
  return Answer("CreateVariables", store_->CreateVariables(std::move(variables),
                                                           request->optimizer(),
                                                           request->consistency()));
}

grpc::Status PsServiceImpl::Pull(grpc::ServerContext*, const PullRequest* request,
                                 PullResponse* response) {
  absl::Status pulled = PullInto(
      *store_, std::vector<std::string>(request->names().begin(), request->names().end()),
      options_.max_pull_bytes, response, metrics_);
  if (absl::IsResourceExhausted(pulled)) ++pulls_refused_;
  return Answer("Pull", pulled);
}

grpc::Status PsServiceImpl::Push(grpc::ServerContext*, const PushRequest* request,
                                 PushResponse*) {
  absl::StatusOr<std::vector<NamedTensor>> gradients = UnpackGradients(*request);
  if (!gradients.ok()) return Answer("Push", gradients.status());
  return Answer("Push", Push(*gradients, ContextOf(*request)));
}

grpc::Status PsServiceImpl::PushPull(grpc::ServerContext*, const PushPullRequest* request,
                                     PushPullResponse* response) {
  absl::StatusOr<std::vector<NamedTensor>> gradients = UnpackGradients(request->push());
  if (!gradients.ok()) return Answer("PushPull", gradients.status());
  if (absl::Status pushed = Push(*gradients, ContextOf(request->push())); !pushed.ok()) {
    return Answer("PushPull", pushed);
  }
  std::vector<std::string> names;
  for (const NamedTensor& g : *gradients) names.push_back(g.name);
  return Answer("PushPull", PullInto(*store_, std::move(names), options_.max_pull_bytes,
                                     response->mutable_pull(), metrics_));
}

grpc::Status PsServiceImpl::PushPullChunks(
    grpc::ServerContext* context, grpc::ServerReaderWriter<PushPullChunkOut, PushPullChunkIn>* stream) {
  auto answer = [this](const absl::Status& status) { return Answer("PushPullStream", status); };
  absl::StatusOr<std::unique_ptr<StreamLimiter::Lease>> lease = streams_.Open(context);
  if (!lease.ok()) return answer(lease.status());
  PushRequest push;
  TensorAssembler assembler;
  if (absl::Status read = ReadPush(context, stream, lease->get(), &push, &assembler);
      !read.ok()) {
    return answer(read);
  }
  std::vector<NamedTensor> gradients;
  {
    std::vector<Tensor> tensors = assembler.Take();
    gradients.reserve(tensors.size());
    for (int i = 0; i < push.gradients_size(); ++i) {
      gradients.push_back({push.gradients(i).name(), std::move(tensors[i])});
    }
  }
  if (absl::Status pushed = Push(gradients, ContextOf(push)); !pushed.ok()) {
    return answer(pushed);
  }
  std::vector<std::string> names;
  names.reserve(gradients.size());
  for (NamedTensor& g : gradients) {
    names.push_back(std::move(g.name));
    g.tensor = Tensor();  // done with it: free it before the values are copied out
  }
  std::vector<int64_t> versions;
  absl::StatusOr<std::vector<Tensor>> pulled = store_->Pull(names, &versions);
  if (!pulled.ok()) return answer(pulled.status());
  // Shared with the slices that carry the values, which gRPC may release after this
  // handler returned.
  return answer(WriteValues(
      stream, std::make_shared<const std::vector<Tensor>>(*std::move(pulled)), versions));
}

absl::Status PsServiceImpl::ReadPush(
    grpc::ServerContext* context, grpc::ServerReaderWriter<PushPullChunkOut, PushPullChunkIn>* stream,
    StreamLimiter::Lease* lease, PushRequest* push, TensorAssembler* assembler) {
  PushPullChunkIn message;
  auto read = [&] {
    lease->StartRead();
    const bool got = stream->Read(&message);
    lease->EndRead();
    return got;
  };
  // Read returned false: says why, in the order that tells most. A client that gave up
  // (deadline, cancel) may have sent every byte: it was told the call failed, so nothing
  // is applied.
  auto ended = [&](absl::string_view where) -> absl::Status {
    std::string why;
    if (lease->cancelled(&why)) {
      return absl::CancelledError(absl::StrCat("the ps ended the push-pull stream (", why,
                                               "); nothing was applied"));
    }
    if (message.malformed()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a push-pull stream message ", where, " does not parse; nothing was applied"));
    }
    if (context->IsCancelled()) {
      return absl::CancelledError("the push-pull stream was cancelled; nothing was applied");
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "the push-pull stream ended ", where, " without a commit; nothing was applied"));
  };
  if (!read()) return ended("before its header");
  if (!message.fields().has_push()) {
    return absl::InvalidArgumentError("the first message of a push-pull stream carries no push");
  }
  *push = std::move(*message.fields().mutable_push());
  std::vector<const TensorProto*> headers;
  std::vector<std::string> labels;
  for (const Gradient& g : push->gradients()) {
    headers.push_back(&g.gradient());
    labels.push_back(absl::StrCat("gradient for \"", g.name(), "\""));
  }
  PS_RETURN_IF_ERROR(assembler->Start(headers, std::move(labels)));
  // The whole push is read before any of it is applied, so a pull (this stream's or
  // another's) never sees part of it, and a broken stream changes nothing.
  for (bool first = true;; first = false) {
    if (!first && message.fields().has_push()) {
      return absl::InvalidArgumentError(
          "a push-pull stream carries its push header in the first message only");
    }
    if (message.payload_size() > 0 || message.fields().tensor() != 0 ||
        message.fields().offset() != 0) {
      PS_RETURN_IF_ERROR(
          assembler->Add(message.fields().tensor(), message.fields().offset(), message));
    }
    message.ClearPayload();
    if (message.fields().commit()) break;
    if (!read()) return ended("before its commit");
  }
  // The commit comes with the half-close: anything after it is a broken client.
  if (read()) {
    return absl::InvalidArgumentError(
        "a push-pull stream sent a message after its commit; nothing was applied");
  }
  if (message.malformed()) return ended("after its commit");
  std::string why;
  if (lease->cancelled(&why) || context->IsCancelled()) return ended("after its commit");
  if (std::chrono::system_clock::now() > context->deadline()) {
    return absl::DeadlineExceededError(
        "the push-pull stream's deadline passed before it was applied; nothing was applied");
  }
  return assembler->Finish();
}

absl::Status PsServiceImpl::WriteValues(
    grpc::ServerReaderWriter<PushPullChunkOut, PushPullChunkIn>* stream,
    std::shared_ptr<const std::vector<Tensor>> values, const std::vector<int64_t>& versions) {
  PushPullChunkOut out;
  PullResponse* header = out.fields().mutable_pull();
  std::vector<int64_t> bytes;
  for (size_t i = 0; i < values->size(); ++i) {
    TensorHeader((*values)[i], header->add_values());
    header->add_versions(versions[i]);
    bytes.push_back((*values)[i].num_elements() * 4);
  }
  if (metrics_ != nullptr) {
    int64_t total = 0;
    for (int64_t b : bytes) total += b;
    metrics_->RecordPull(total);
  }
  bool header_sent = false;
  bool ok = true;
  ForEachChunk(bytes, chunk_bytes_, [&](int tensor, int64_t offset, int64_t size) {
    if (header_sent) out.fields().Clear();
    out.fields().set_tensor(tensor);
    out.fields().set_offset(offset);
    const char* base = reinterpret_cast<const char*>((*values)[tensor].data());
    out.SetPayload(SliceWithOwner(base + offset, size, values));
    ok = stream->Write(out);
    header_sent = true;
    return ok;
  });
  if (!header_sent) ok = stream->Write(out);  // no bytes at all: the header alone
  if (!ok) return absl::CancelledError("the client went away during the pull");
  return absl::OkStatus();
}

grpc::Status PsServiceImpl::PullRows(grpc::ServerContext*, const PullRowsRequest* request,
                                     PullRowsResponse* response) {
  auto answer = [&](absl::Status status) {
    if (!status.ok()) response->Clear();
    if (absl::IsResourceExhausted(status)) ++pulls_refused_;
    return Answer("PullRows", status);
  };
  absl::flat_hash_set<absl::string_view> seen;
  int64_t bytes = 0;
  for (const VariableRows& v : request->variables()) {
    if (!seen.insert(v.name()).second) {
      return answer(absl::InvalidArgumentError(
          absl::StrCat("variable \"", v.name(), "\" named twice in one pull")));
    }
    int64_t version = 0;
    absl::StatusOr<Tensor> rows =
        store_->PullRows(v.name(), v.rows(), &version, options_.max_pull_bytes - bytes);
    if (!rows.ok()) return answer(rows.status());
    bytes += rows->num_elements() * static_cast<int64_t>(sizeof(float));
    rows->ToProto(response->add_values());
    response->add_versions(version);
  }
  if (metrics_ != nullptr) metrics_->RecordPull(bytes);
  return answer(absl::OkStatus());
}

grpc::Status PsServiceImpl::PushRows(grpc::ServerContext*, const PushRowsRequest* request,
                                     PushRowsResponse*) {
  int64_t payload_bytes = 0;
  absl::StatusOr<std::vector<SparseGradient>> gradients =
      UnpackRowGradients(*request, &payload_bytes);
  if (!gradients.ok()) return Answer("PushRows", gradients.status());
  PushContext context;
  context.worker = request->worker();
  context.epoch = request->epoch();
  context.step = request->step();
  context.request_id = request->request_id();
  const int64_t start = absl::GetCurrentTimeNanos();
  absl::Status pushed = store_->PushRows(*gradients, context);
  if (pushed.ok() && metrics_ != nullptr) {
    metrics_->RecordPush(payload_bytes,
                         absl::Nanoseconds(absl::GetCurrentTimeNanos() - start));
  }
  return Answer("PushRows", pushed);
}

grpc::Status PsServiceImpl::GetStatus(grpc::ServerContext*, const PsStatusRequest*,
                                      PsStatusResponse* response) {
  *response = DescribeStore(*store_);
  response->set_limit_refusals(streams_.refused() + pulls_refused_.load());
  response->set_streams_cancelled(streams_.cancelled());
  return grpc::Status::OK;
}

grpc::Status PsServiceImpl::ReadState(grpc::ServerContext*, const ReadStateRequest* request,
                                      ReadStateResponse* response) {
  absl::StatusOr<std::vector<VariableSnapshot>> state = store_->ReadState(
      std::vector<std::string>(request->names().begin(), request->names().end()));
  if (!state.ok()) return Answer("ReadState", state.status());
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
    if (!s.ok()) return Answer("RestoreState", s.status());
    snapshots.push_back(*std::move(s));
  }
  return Answer("RestoreState", store_->RestoreState(std::move(snapshots)));
}

grpc::Status PsServiceImpl::Shutdown(grpc::ServerContext*, const ShutdownRequest* request,
                                     ShutdownResponse*) {
  on_shutdown_(request->reason());
  return grpc::Status::OK;
}

}  // namespace pstrain
