#include "ps_server/rpc/ps_service.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <utility>
#include <vector>

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
    : store_(store), on_shutdown_(std::move(on_shutdown)) {
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

grpc::Status PsServiceImpl::PushPullChunks(grpc::ServerContext* context, Stream* stream) {
  PushPullChunkIn message;
  if (!stream->Read(&message)) {
    return ToGrpcStatus(absl::InvalidArgumentError("push-pull stream ended before its header"));
  }
  if (!message.fields().has_push()) {
    return ToGrpcStatus(
        absl::InvalidArgumentError("the first message of a push-pull stream carries no push"));
  }
  PushRequest push = std::move(*message.fields().mutable_push());
  message.fields().clear_push();
  // Sync mode averages whole gradients from several workers: nothing to apply piecewise.
  // (Declared sizes only choose the path; each path checks them.)
  int64_t declared = 0;  // capped per tensor so the sum cannot overflow
  for (const Gradient& g : push.gradients()) {
    const int64_t n = NumElements(
        std::vector<int64_t>(g.gradient().shape().begin(), g.gradient().shape().end()));
    if (n > 0) declared += std::min<int64_t>(n, int64_t{1} << 40) * 4;
  }
  if (store_->consistency_mode() == "sync" || declared < overlap_min_bytes_) {
    return PushPullWhole(context, stream, push, std::move(message));
  }
  return PushPullPiecewise(context, stream, push, std::move(message));
}

namespace {

// A chunk is empty and carries no position: the header message without data.
bool IsHeaderOnly(const PushPullChunkIn& message) {
  return message.payload_size() == 0 && message.fields().tensor() == 0 &&
         message.fields().offset() == 0;
}

// Checks that a push's chunks come in order, none missing or past a tensor's end, as
// they are read (before they are applied), so bad input is refused at once.
class ChunkOrder {
 public:
  ChunkOrder(std::vector<int64_t> bytes, std::vector<std::string> labels)
      : bytes_(std::move(bytes)), received_(bytes_.size(), 0), labels_(std::move(labels)) {}

  // Errors: INVALID_ARGUMENT an unknown tensor, an offset other than the bytes received
  // so far for it, bytes past its end.
  absl::Status Add(int64_t tensor, int64_t offset, int64_t size) {
    if (tensor < 0 || tensor >= static_cast<int64_t>(bytes_.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("chunk for tensor ", tensor, " of ", bytes_.size()));
    }
    if (offset != received_[tensor]) {
      return absl::InvalidArgumentError(absl::StrCat(
          labels_[tensor], ": chunk at byte ", offset, " but ", received_[tensor],
          " bytes had arrived (chunks must come in order, none missing)"));
    }
    if (size > bytes_[tensor] - received_[tensor]) {
      return absl::InvalidArgumentError(absl::StrCat(labels_[tensor], ": chunk of ", size,
                                                     " bytes at byte ", offset,
                                                     " runs past its ", bytes_[tensor],
                                                     " bytes"));
    }
    received_[tensor] += size;
    return absl::OkStatus();
  }

  // Errors: INVALID_ARGUMENT a tensor that did not receive all its bytes.
  absl::Status Finish() const {
    for (size_t i = 0; i < bytes_.size(); ++i) {
      if (received_[i] != bytes_[i]) {
        return absl::InvalidArgumentError(absl::StrCat(labels_[i], ": got ", received_[i],
                                                       " of its ", bytes_[i], " bytes"));
      }
    }
    return absl::OkStatus();
  }

 private:
  const std::vector<int64_t> bytes_;
  std::vector<int64_t> received_;
  const std::vector<std::string> labels_;
};

// Feeds a streamed push's chunks (already checked by ChunkOrder) to a
// VariableStore::StreamedPush as whole floats, and sends each range's new values back.
// A chunk's bytes need not be whole floats, nor one contiguous run (gRPC may split a
// message across slices at any byte): such a chunk is gathered into a scratch buffer,
// with the bytes of a float it splits carried over to the tensor's next chunk.
class PiecewiseApplier {
 public:
  using Stream = grpc::ServerReaderWriter<PushPullChunkOut, PushPullChunkIn>;

  PiecewiseApplier(VariableStore::StreamedPush* push, Stream* stream, int64_t chunk_bytes,
                   const std::vector<std::vector<int64_t>>& shapes)
      : push_(push), stream_(stream), chunk_bytes_(std::max<int64_t>(1, chunk_bytes)),
        shapes_(shapes), tensors_(shapes.size()) {}

  // Applies `message` (push_->locked() must hold) and sends its new values. A write
  // returns once gRPC holds the message, also while the client's flow-control window is
  // closed (gRPC 1.51), so a client that reads only after writing its whole push does
  // not stall this one (ps_service_test checks it with a push of 16 MiB).
  // Errors: CANCELLED the client went away; as StreamedPush::ApplyChunk.
  absl::Status Apply(const PushPullChunkIn& message) {
    const int tensor = message.fields().tensor();
    PerTensor& t = tensors_[tensor];
    const int64_t size = static_cast<int64_t>(message.payload_size());
    const int64_t total = t.carried + size;
    const int64_t n = total / 4;
    if (n == 0) {
      message.CopyPayloadTo(t.carry + t.carried, 0, size);
      t.carried = total;
      return absl::OkStatus();
    }
    const float* gradient = nullptr;
    const std::vector<grpc::Slice>& slices = message.payload_slices();
    if (t.carried == 0 && slices.size() == 1 &&
        reinterpret_cast<uintptr_t>(slices[0].begin()) % alignof(float) == 0) {
      gradient = reinterpret_cast<const float*>(slices[0].begin());  // as it came
    } else {
      if (scratch_.size() < static_cast<size_t>(n)) scratch_.resize(n);
      char* dest = reinterpret_cast<char*>(scratch_.data());
      std::memcpy(dest, t.carry, t.carried);
      message.CopyPayloadTo(dest + t.carried, 0, n * 4 - t.carried);
      gradient = scratch_.data();
    }
    const int64_t first = t.applied;
    absl::StatusOr<VariableStore::StreamedPush::Values> values =
        push_->ApplyChunk(tensor, first, absl::MakeConstSpan(gradient, n));
    if (!values.ok()) return values.status();
    t.applied += n;
    // The bytes of a split float: at most 3, and all from this chunk's end (n >= 1).
    const int64_t rest = total - n * 4;
    message.CopyPayloadTo(t.carry, size - rest, rest);
    t.carried = rest;
    return Send(tensor, first * 4, *values);
  }

  // The pull header alone, if no values went out (a push of empty tensors).
  absl::Status Finish() {
    if (header_sent_) return absl::OkStatus();
    PushPullChunkOut out;
    AddHeader(&out);
    if (!stream_->Write(out)) return ClientGone();
    return absl::OkStatus();
  }

 private:
  struct PerTensor {
    int64_t applied = 0;  // elements
    char carry[4];
    int64_t carried = 0;  // bytes in carry
  };

  static absl::Status ClientGone() {
    return absl::CancelledError("the client went away during the push-and-pull");
  }

  // The first message carries the pull header: each value's shape and the version it has
  // once this push is committed (known: the push holds its variables' writer locks).
  void AddHeader(PushPullChunkOut* out) {
    PullResponse* header = out->fields().mutable_pull();
    const std::vector<int64_t> versions = push_->versions();
    for (size_t i = 0; i < shapes_.size(); ++i) {
      TensorHeader(shapes_[i], header->add_values());
      header->add_versions(versions[i]);
    }
    header_sent_ = true;
  }

  absl::Status Send(int tensor, int64_t offset, const VariableStore::StreamedPush::Values& v) {
    const char* base = reinterpret_cast<const char*>(v.values.data());
    const int64_t bytes = static_cast<int64_t>(v.values.size()) * 4;
    for (int64_t done = 0; done < bytes; done += chunk_bytes_) {
      PushPullChunkOut out;
      if (!header_sent_) AddHeader(&out);
      out.fields().set_tensor(tensor);
      out.fields().set_offset(offset + done);
      // The slice shares the new values' buffer, which gRPC may release after the
      // handler returned; nothing writes to it again (copy-on-write in the store).
      out.SetPayload(SliceWithOwner(base + done, std::min(chunk_bytes_, bytes - done), v.owner));
      if (!stream_->Write(out)) return ClientGone();
    }
    return absl::OkStatus();
  }

  VariableStore::StreamedPush* push_;  // Not owned.
  Stream* stream_;                     // Not owned.
  const int64_t chunk_bytes_;
  const std::vector<std::vector<int64_t>>& shapes_;
  std::vector<PerTensor> tensors_;
  std::vector<float> scratch_;
  bool header_sent_ = false;
};

}  // namespace

grpc::Status PsServiceImpl::PushPullPiecewise(grpc::ServerContext* context, Stream* stream,
                                              const PushRequest& push,
                                              PushPullChunkIn first) {
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<int64_t> bytes;
  std::vector<std::string> labels;
  for (const Gradient& g : push.gradients()) {
    labels.push_back(absl::StrCat("gradient for \"", g.name(), "\""));
    int64_t size = 0;
    absl::StatusOr<std::vector<int64_t>> shape =
        StreamedTensorShape(g.gradient(), labels.back(), &size);
    if (!shape.ok()) return ToGrpcStatus(shape.status());
    names.push_back(g.name());
    shapes.push_back(*std::move(shape));
    bytes.push_back(size);
  }
  absl::StatusOr<std::unique_ptr<VariableStore::StreamedPush>> begun =
      store_->BeginStreamedPush(std::move(names), shapes, ContextOf(push));
  if (!begun.ok()) return ToGrpcStatus(begun.status());
  VariableStore::StreamedPush& streamed = **begun;
  ChunkOrder order(std::move(bytes), std::move(labels));
  PiecewiseApplier applier(&streamed, stream, chunk_bytes_, shapes);

  // Chunks wait here while another writer holds a variable of this push: the stream
  // keeps reading (the client is never stalled by the lock) and tries the locks again
  // after each read; the backlog is applied as soon as they are held. Each chunk is
  // applied and its new values sent at once from then on, so the gradients going up and
  // the values coming down overlap.
  std::deque<PushPullChunkIn> backlog;
  auto accept = [&](PushPullChunkIn message) -> absl::Status {
    if (IsHeaderOnly(message)) return absl::OkStatus();
    PS_RETURN_IF_ERROR(order.Add(message.fields().tensor(), message.fields().offset(),
                                 static_cast<int64_t>(message.payload_size())));
    if (message.payload_size() > 0) backlog.push_back(std::move(message));
    return absl::OkStatus();
  };
  auto drain = [&]() -> absl::Status {
    for (; !backlog.empty(); backlog.pop_front()) {
      PS_RETURN_IF_ERROR(applier.Apply(backlog.front()));
    }
    return absl::OkStatus();
  };
  absl::Status status = accept(std::move(first));
  PushPullChunkIn message;
  while (status.ok()) {
    if (!backlog.empty() && streamed.TryLock()) status = drain();
    if (!status.ok() || !stream->Read(&message)) break;
    if (message.fields().has_push()) {
      status = absl::InvalidArgumentError(
          "a push-pull stream carries its push header in the first message only");
      break;
    }
    status = accept(std::move(message));
    message = PushPullChunkIn();
  }
  if (!status.ok()) return ToGrpcStatus(status);
  // A client that gave up (deadline, cancel) may have sent every byte: it was told the
  // call failed, so nothing is committed.
  if (context->IsCancelled()) {
    return ToGrpcStatus(absl::CancelledError("the push-pull stream was cancelled"));
  }
  if (absl::Status complete = order.Finish(); !complete.ok()) return ToGrpcStatus(complete);
  // Everything arrived: now wait for the locks if another writer still holds them.
  streamed.Lock();
  if (absl::Status drained = drain(); !drained.ok()) return ToGrpcStatus(drained);
  if (context->IsCancelled()) {
    return ToGrpcStatus(absl::CancelledError("the push-pull stream was cancelled"));
  }
  if (absl::Status committed = streamed.Commit(); !committed.ok()) {
    return ToGrpcStatus(committed);
  }
  return ToGrpcStatus(applier.Finish());
}

grpc::Status PsServiceImpl::PushPullWhole(grpc::ServerContext* context, Stream* stream,
                                          const PushRequest& push, PushPullChunkIn message) {
  std::vector<const TensorProto*> headers;
  std::vector<std::string> labels;
  for (const Gradient& g : push.gradients()) {
    headers.push_back(&g.gradient());
    labels.push_back(absl::StrCat("gradient for \"", g.name(), "\""));
  }
  TensorAssembler assembler;
  if (absl::Status started = assembler.Start(headers, std::move(labels)); !started.ok()) {
    return ToGrpcStatus(started);
  }
  // The whole push is read before any of it is applied, so a pull (this stream's or
  // another's) never sees part of it, and a broken stream changes nothing.
  bool first = true;
  do {
    if (!first && message.fields().has_push()) {
      return ToGrpcStatus(absl::InvalidArgumentError(
          "a push-pull stream carries its push header in the first message only"));
    }
    first = false;
    if (IsHeaderOnly(message)) continue;
    if (absl::Status added =
            assembler.Add(message.fields().tensor(), message.fields().offset(), message);
        !added.ok()) {
      return ToGrpcStatus(added);
    }
    message.ClearPayload();
  } while (stream->Read(&message));
  // A client that gave up (deadline, cancel) may have sent every byte: it was told the
  // call failed, so nothing is applied.
  if (context->IsCancelled()) {
    return ToGrpcStatus(absl::CancelledError("the push-pull stream was cancelled"));
  }
  if (absl::Status complete = assembler.Finish(); !complete.ok()) return ToGrpcStatus(complete);

  std::vector<NamedTensor> gradients;
  {
    std::vector<Tensor> tensors = assembler.Take();
    gradients.reserve(tensors.size());
    for (int i = 0; i < push.gradients_size(); ++i) {
      gradients.push_back({push.gradients(i).name(), std::move(tensors[i])});
    }
  }
  if (absl::Status pushed = store_->Push(gradients, ContextOf(push)); !pushed.ok()) {
    return ToGrpcStatus(pushed);
  }
  std::vector<std::string> names;
  names.reserve(gradients.size());
  for (NamedTensor& g : gradients) {
    names.push_back(std::move(g.name));
    g.tensor = Tensor();  // done with it: free it before the values are copied out
  }
  std::vector<int64_t> versions;
  absl::StatusOr<std::vector<Tensor>> pulled = store_->Pull(names, &versions);
  if (!pulled.ok()) return ToGrpcStatus(pulled.status());
  // Shared with the slices that carry the values, which gRPC may release after this
  // handler returned.
  auto values = std::make_shared<const std::vector<Tensor>>(*std::move(pulled));

  PushPullChunkOut out;
  PullResponse* header = out.fields().mutable_pull();
  std::vector<int64_t> bytes;
  for (size_t i = 0; i < values->size(); ++i) {
    TensorHeader((*values)[i], header->add_values());
    header->add_versions(versions[i]);
    bytes.push_back((*values)[i].num_elements() * 4);
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
  if (!ok) {
    return ToGrpcStatus(absl::CancelledError("the client went away during the pull"));
  }
  return grpc::Status::OK;
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
