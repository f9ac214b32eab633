#include "ps_server/rpc/ps_service.h"

#include "ps_server/rpc/checkpoint_shard_proto.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/model/row_initializer.h"
#include "common/rpc/call_authorizer.h"
#include "common/rpc/grpc_util.h"
#include "common/status_macros.h"
#include "common/wire_precision.h"
#include "ps_server/keras_rows.h"

namespace pstrain {
namespace {

// A string from the wire: refused when longer than kMaxWireNameBytes, naming what it is
// and how it starts, so that no name of a megabyte is ever kept, logged or answered.
absl::Status CheckLength(absl::string_view what, absl::string_view text) {
  if (text.size() <= kMaxWireNameBytes) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      what, " of ", text.size(), " bytes is longer than the ", kMaxWireNameBytes,
      " bytes a name may have (it starts \"", absl::CHexEscape(text.substr(0, 32)), "\")"));
}

// A CreateVariables with a keras_file: every variable's KerasRows, as
// CreateVariablesFromKeras takes them (it checks the rest before opening the file).
// Errors: INVALID_ARGUMENT a variable without KerasRows or with a value or initializer
//         too, a name or dataset over kMaxWireNameBytes, a path over 4096 bytes.
absl::StatusOr<std::vector<KerasRowsRequest>> KerasShardsOf(
    const CreateVariablesRequest& request) {
  if (request.keras_file().path().size() > 4096) {
    return absl::InvalidArgumentError("the .keras file's path is over 4096 bytes");
  }
  std::vector<KerasRowsRequest> shards;
  for (const VariableDef& def : request.variables()) {
    PS_RETURN_IF_ERROR(CheckLength("variable name", def.name()));
    if (!def.has_keras_rows() || def.has_initial_value() || def.has_initializer()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "variable \"", def.name(),
          "\": a CreateVariables with a .keras file carries only rows of it (keras_rows)"));
    }
    const KerasRows& rows = def.keras_rows();
    PS_RETURN_IF_ERROR(CheckLength("dataset name", rows.dataset()));
    if (rows.variable_shape_size() > 32) {
      return absl::InvalidArgumentError(absl::StrCat(
          "variable \"", def.name(), "\": a shape of more than 32 dimensions"));
    }
    shards.push_back({def.name(), rows.dataset(),
                      std::vector<int64_t>(rows.variable_shape().begin(),
                                           rows.variable_shape().end()),
                      rows.row_begin(), rows.row_end()});
  }
  return shards;
}

// A VariableDef's initializer as the store takes it; the store validates the rest
// (shape, rows, parameters) before it draws anything.
// Errors: INVALID_ARGUMENT both an initial value and an initializer, an unknown kind,
//         more dimensions than kMaxInitializerRank.
absl::StatusOr<InitialShard> InitialShardOf(const VariableDef& def) {
  const InitializerSpec& spec = def.initializer();
  auto refuse = [&def](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("variable \"", def.name(), "\": ", why));
  };
  if (def.has_initial_value()) return refuse("both an initial value and an initializer");
  InitialShard shard;
  shard.name = def.name();
  switch (spec.kind()) {
    case INITIALIZER_CONSTANT:
      shard.init.distribution = InitialDistribution::kConstant;
      shard.init.a = spec.value();
      break;
    case INITIALIZER_NORMAL:
    case INITIALIZER_TRUNCATED_NORMAL:
      shard.init.distribution = spec.kind() == INITIALIZER_NORMAL
                                    ? InitialDistribution::kNormal
                                    : InitialDistribution::kTruncatedNormal;
      shard.init.a = spec.mean();
      shard.init.b = spec.stddev();
      break;
    case INITIALIZER_UNIFORM:
      shard.init.distribution = InitialDistribution::kUniform;
      shard.init.a = spec.minval();
      shard.init.b = spec.maxval();
      break;
    default:
      return refuse(absl::StrCat("unknown initializer kind ", static_cast<int>(spec.kind())));
  }
  if (spec.variable_shape_size() > kMaxInitializerRank) {
    return refuse(absl::StrCat("an initializer for a variable of rank ",
                               spec.variable_shape_size(), "; at most ", kMaxInitializerRank,
                               " dimensions are drawn"));
  }
  shard.init.shape.assign(spec.variable_shape().begin(), spec.variable_shape().end());
  shard.init.seed = spec.seed();
  shard.row_begin = spec.row_begin();
  shard.row_end = spec.row_end();
  return shard;
}

template <typename Names>
absl::Status CheckNames(absl::string_view what, const Names& names) {
  for (const auto& name : names) PS_RETURN_IF_ERROR(CheckLength(what, name));
  return absl::OkStatus();
}

// The name a push is counted and ordered under: the store's per-worker state (bounded
// staleness, sync rounds, the status page's pushes per worker) is keyed by it. A caller
// with an identity (its certificate's name, or with plaintext the identity that came
// with the job's token, which the authorizer let call Push only as a worker) is named by
// it, "worker 1", as workers name themselves, and must be one of the job's num_workers
// workers; the name the request carries counts only from a caller with no worker
// identity (a server without authorization).
absl::StatusOr<std::string> PusherName(const grpc::ServerContextBase* context,
                                       const std::string& claimed, int num_workers) {
  PS_RETURN_IF_ERROR(CheckLength("worker name", claimed));
  if (context == nullptr) return claimed;  // called in-process, not over gRPC
  absl::StatusOr<std::optional<CallerIdentity>> caller = CallerOf(*context);
  if (!caller.ok()) return caller.status();
  if (!caller->has_value() || (*caller)->role != Role::kWorker) return claimed;
  const int index = (*caller)->index;
  if (num_workers > 0 && index >= num_workers) {
    return absl::PermissionDeniedError(
        absl::StrCat(FormatIdentity(**caller), " is not a worker of this job (it has ",
                     num_workers, ": worker-0 to worker-", num_workers - 1, ")"));
  }
  return absl::StrCat("worker ", index);
}

// Whom a stream counts against (StreamLimiter::Open): the caller's identity when it has
// one, which must then be a worker of this job if it is a worker; empty (its host) when
// it has none.
absl::StatusOr<std::string> StreamOwner(const grpc::ServerContext& context, int num_workers) {
  absl::StatusOr<std::optional<CallerIdentity>> caller = CallerOf(context);
  if (!caller.ok()) return caller.status();
  if (!caller->has_value()) return std::string();
  PS_RETURN_IF_ERROR(PusherName(&context, "", num_workers).status());
  return FormatIdentity(**caller);
}

// The gradients widened to float32 (each may travel as DT_FLOAT, DT_BFLOAT16 or DT_HALF),
// and their bytes on the wire in `wire_bytes`.
absl::StatusOr<std::vector<NamedTensor>> UnpackGradients(const PushRequest& request,
                                                         int64_t* wire_bytes) {
  std::vector<NamedTensor> gradients;
  gradients.reserve(request.gradients_size());
  *wire_bytes = 0;
  for (const Gradient& g : request.gradients()) {
    PS_RETURN_IF_ERROR(CheckLength("gradient name", g.name()));
    *wire_bytes += static_cast<int64_t>(g.gradient().content().size());
    absl::StatusOr<Tensor> tensor = TensorFromWireProto(g.gradient());
    if (!tensor.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("gradient for \"", g.name(), "\": ", tensor.status().message()));
    }
    gradients.push_back({g.name(), *std::move(tensor)});
  }
  return gradients;
}

// The precision a request asks its values in. Errors: INVALID_ARGUMENT a dtype that is
// not a float (checked before anything is applied).
absl::StatusOr<WirePrecision> AnswerPrecision(DataType dtype) {
  if (dtype == DT_INVALID) return WirePrecision::kFloat32;  // unset: float32, as before
  absl::StatusOr<WirePrecision> precision = WirePrecisionOf(dtype);
  if (!precision.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("values asked in ", precision.status().message()));
  }
  return precision;
}

absl::Status PullInto(const VariableStore& store, std::vector<std::string> names,
                      int64_t max_bytes, WirePrecision precision, PullResponse* response,
                      PsMetrics* metrics) {
  std::vector<int64_t> versions;
  absl::StatusOr<std::vector<Tensor>> values = store.Pull(names, &versions, max_bytes);
  if (!values.ok()) return values.status();
  int64_t bytes = 0;
  for (size_t i = 0; i < values->size(); ++i) {
    TensorProto* value = response->add_values();
    TensorToWireProto((*values)[i], precision, value);
    response->add_versions(versions[i]);
    bytes += static_cast<int64_t>(value->content().size());
  }
  if (metrics != nullptr) metrics->RecordPull(bytes);
  return absl::OkStatus();
}

// A request's row gradients, each validated as a tensor (the store checks the rest).
absl::StatusOr<std::vector<SparseGradient>> UnpackRowGradients(
    const PushRowsRequest& request, int64_t* payload_bytes) {
  std::vector<SparseGradient> gradients;
  gradients.reserve(request.gradients_size());
  *payload_bytes = 0;
  for (const RowGradient& g : request.gradients()) {
    PS_RETURN_IF_ERROR(CheckLength("row gradient name", g.name()));
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

template <class Request, class Response>
void PsServiceImpl::ServeByCallback(
    int method_index,
    grpc::Status (PsServiceImpl::*serve)(const grpc::ServerContextBase*, const Request*,
                                         Response*),
    bool pushes) {
  // The server's interceptors (the reply proof, the authorizer's) and its auth metadata
  // processor run for callback methods as for synchronous ones.
  MarkMethodCallback(
      method_index,
      new grpc::internal::CallbackUnaryHandler<Request, Response>(
          [this, serve, pushes](grpc::CallbackServerContext* context, const Request* request,
                                Response* response) {
            grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
            if (pushes && !store_->pushes_never_wait()) {
              // The context, request and response live until Finish.
              handoff_.Run([this, serve, context, request, response, reactor] {
                reactor->Finish((this->*serve)(context, request, response));
              });
            } else {
              reactor->Finish((this->*serve)(context, request, response));
            }
            return reactor;
          }));
}

PsServiceImpl::PsServiceImpl(VariableStore* store,
                             std::function<void(const std::string&)> on_shutdown,
                             PsServiceOptions options)
    : store_(store),
      on_shutdown_(std::move(on_shutdown)),
      options_(options),
      streams_(options.stream_limits),
      request_memory_(options.request_memory_bytes > 0 ? options.request_memory_bytes
                                                       : MemoryBudgetBytes() / 4,
                      options.request_memory_bytes > 0
                          ? "the ps's memory for requests in flight"
                          : "the ps's memory for requests in flight (a quarter of "
                            "--max_memory)") {
  // Replaces the generated handler (protobuf messages, tensor bytes copied through
  // strings) with one whose messages keep the bytes in gRPC slices, and whose reads tell
  // a half-close from a reset (server_stream.h). The service owns it.
  MarkMethodStreamed(kPushPullStreamMethodIndex,
                     new ServerStreamHandler<PushPullChunkOut, PushPullChunkIn>(
                         [this](grpc::ServerContext* context, PushPullServerStream* stream) {
                           return PushPullChunks(context, stream);
                         }));
  ServeByCallback(kPullMethodIndex, &PsServiceImpl::ServePull, /*pushes=*/false);
  ServeByCallback(kPushMethodIndex, &PsServiceImpl::ServePush, /*pushes=*/true);
  ServeByCallback(kPushPullMethodIndex, &PsServiceImpl::ServePushPull, /*pushes=*/true);
  ServeByCallback(kPullRowsMethodIndex, &PsServiceImpl::ServePullRows, /*pushes=*/false);
  ServeByCallback(kPushRowsMethodIndex, &PsServiceImpl::ServePushRows, /*pushes=*/true);
}

absl::StatusOr<PushContext> PsServiceImpl::ContextOf(const grpc::ServerContextBase* caller,
                                                     const PushRequest& request) const {
  PushContext context;
  PS_ASSIGN_OR_RETURN(context.worker,
                      PusherName(caller, request.worker(), options_.num_workers));
  context.epoch = request.epoch();
  context.step = request.step();
  context.versions.assign(request.versions().begin(), request.versions().end());
  context.request_id = request.request_id();
  return context;
}

absl::Status PsServiceImpl::Push(absl::Span<const NamedTensor> gradients,
                                 const PushContext& context, int64_t wire_bytes) {
  if (metrics_ == nullptr) return store_->Push(gradients, context);
  const int64_t start = absl::GetCurrentTimeNanos();
  absl::Status pushed = store_->Push(gradients, context);
  if (pushed.ok()) {
    metrics_->RecordPush(wire_bytes,
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
  if (request->has_keras_file()) {
    absl::StatusOr<std::vector<KerasRowsRequest>> shards = KerasShardsOf(*request);
    if (!shards.ok()) return Answer("CreateVariables", shards.status());
    const KerasWeightsFile file{
        request->keras_file().path(),
        {request->keras_file().weights_bytes(), request->keras_file().weights_crc32()}};
    return Answer("CreateVariables",
                  CreateVariablesFromKeras(store_, file, *shards, request->optimizer(),
                                           request->consistency()));
  }
  std::vector<NamedTensor> variables;
  std::vector<InitialShard> drawn;
  for (const VariableDef& def : request->variables()) {
    if (absl::Status name = CheckLength("variable name", def.name()); !name.ok()) {
      return Answer("CreateVariables", name);
    }
    if (def.has_initializer()) {
      absl::StatusOr<InitialShard> shard = InitialShardOf(def);
      if (!shard.ok()) return Answer("CreateVariables", shard.status());
      drawn.push_back(*std::move(shard));
      continue;
    }
    absl::StatusOr<Tensor> value = Tensor::FromProto(def.initial_value());
    if (!value.ok()) {
      return Answer("CreateVariables", absl::InvalidArgumentError(absl::StrCat(
                                           "variable \"", def.name(), "\": ",
                                           value.status().message())));
    }
    variables.push_back({def.name(), *std::move(value)});
  }
  return Answer("CreateVariables",
                store_->CreateVariables(std::move(variables), std::move(drawn),
                                        request->optimizer(), request->consistency()));
}

grpc::Status PsServiceImpl::Pull(grpc::ServerContext* context, const PullRequest* request,
                                 PullResponse* response) {
  return ServePull(context, request, response);
}

grpc::Status PsServiceImpl::ServePull(const grpc::ServerContextBase*, const PullRequest* request,
                                      PullResponse* response) {
  if (absl::Status names = CheckNames("variable name", request->names()); !names.ok()) {
    return Answer("Pull", names);
  }
  absl::StatusOr<WirePrecision> precision = AnswerPrecision(request->dtype());
  if (!precision.ok()) return Answer("Pull", precision.status());
  absl::Status pulled = PullInto(
      *store_, std::vector<std::string>(request->names().begin(), request->names().end()),
      options_.max_pull_bytes, *precision, response, metrics_);
  if (absl::IsResourceExhausted(pulled)) ++pulls_refused_;
  return Answer("Pull", pulled);
}

grpc::Status PsServiceImpl::Push(grpc::ServerContext* context, const PushRequest* request,
                                 PushResponse* response) {
  return ServePush(context, request, response);
}

grpc::Status PsServiceImpl::ServePush(const grpc::ServerContextBase* caller,
                                      const PushRequest* request, PushResponse*) {
  absl::StatusOr<PushContext> context = ContextOf(caller, *request);
  if (!context.ok()) return Answer("Push", context.status());
  int64_t wire_bytes = 0;
  absl::StatusOr<std::vector<NamedTensor>> gradients = UnpackGradients(*request, &wire_bytes);
  if (!gradients.ok()) return Answer("Push", gradients.status());
  return Answer("Push", Push(*gradients, *context, wire_bytes));
}

grpc::Status PsServiceImpl::PushPull(grpc::ServerContext* context, const PushPullRequest* request,
                                     PushPullResponse* response) {
  return ServePushPull(context, request, response);
}

grpc::Status PsServiceImpl::ServePushPull(const grpc::ServerContextBase* caller,
                                          const PushPullRequest* request,
                                          PushPullResponse* response) {
  absl::StatusOr<PushContext> context = ContextOf(caller, request->push());
  if (!context.ok()) return Answer("PushPull", context.status());
  absl::StatusOr<WirePrecision> precision = AnswerPrecision(request->push().pull_dtype());
  if (!precision.ok()) return Answer("PushPull", precision.status());
  int64_t wire_bytes = 0;
  absl::StatusOr<std::vector<NamedTensor>> gradients =
      UnpackGradients(request->push(), &wire_bytes);
  if (!gradients.ok()) return Answer("PushPull", gradients.status());
  if (absl::Status pushed = Push(*gradients, *context, wire_bytes); !pushed.ok()) {
    return Answer("PushPull", pushed);
  }
  std::vector<std::string> names;
  for (const NamedTensor& g : *gradients) names.push_back(g.name);
  return Answer("PushPull", PullInto(*store_, std::move(names), options_.max_pull_bytes,
                                     *precision, response->mutable_pull(), metrics_));
}

// The values a stream answers with, owned by the slices that carry them (gRPC may
// release those after the handler returned), with their charge to the request memory.
struct PsServiceImpl::PulledValues {
  std::vector<Tensor> values;
  std::vector<int64_t> versions;
  // The values in 16 bits when the push asked for them so (empty in float32).
  std::vector<std::string> encoded;
  WirePrecision precision = WirePrecision::kFloat32;
  MemoryLedger::Charge charge;
};

grpc::Status PsServiceImpl::PushPullChunks(grpc::ServerContext* context,
                                           PushPullServerStream* stream) {
  auto answer = [this](const absl::Status& status) { return Answer("PushPullStream", status); };
  absl::StatusOr<std::string> owner = StreamOwner(*context, options_.num_workers);
  if (!owner.ok()) return answer(owner.status());
  absl::StatusOr<std::unique_ptr<StreamLimiter::Lease>> lease =
      streams_.Open(context, *std::move(owner));
  if (!lease.ok()) return answer(lease.status());
  PushRequest push;
  PushContext push_context;
  TensorAssembler assembler;
  MemoryLedger::Charge charge;
  if (absl::Status read = ReadPush(context, stream, lease->get(), &push, &push_context,
                                   &assembler, &charge);
      !read.ok()) {
    return answer(read);
  }
  // The client half-closed after its commit. A client that reset the stream (then or
  // since) closed it for writing too, so the reply's first bytes go out only on a stream
  // that ended cleanly: only then is the push applied.
  // Asked before anything is applied: a push with an answer it cannot have changes nothing.
  absl::StatusOr<WirePrecision> precision = AnswerPrecision(push.pull_dtype());
  if (!precision.ok()) return answer(precision.status());
  if (before_apply_hook_) before_apply_hook_(context);
  if (!stream->SendInitialMetadata()) {
    return answer(absl::CancelledError(
        "the push-pull stream was reset after its commit; nothing was applied"));
  }
  const int64_t wire_bytes = assembler.wire_bytes();
  std::vector<NamedTensor> gradients;
  {
    std::vector<Tensor> tensors = assembler.Take();
    gradients.reserve(tensors.size());
    for (int i = 0; i < push.gradients_size(); ++i) {
      gradients.push_back({push.gradients(i).name(), std::move(tensors[i])});
    }
  }
  if (absl::Status pushed = Push(gradients, push_context, wire_bytes);
      !pushed.ok()) {
    return answer(pushed);
  }
  std::vector<std::string> names;
  names.reserve(gradients.size());
  for (NamedTensor& g : gradients) {
    names.push_back(std::move(g.name));
    g.tensor = Tensor();  // done with it: free it before the values are copied out
  }
  // The values are as large as the gradients just freed: they take over their charge.
  auto pulled = std::make_shared<PulledValues>();
  absl::StatusOr<std::vector<Tensor>> values = store_->Pull(names, &pulled->versions);
  if (!values.ok()) return answer(values.status());
  pulled->values = *std::move(values);
  pulled->precision = *precision;
  if (*precision != WirePrecision::kFloat32) {
    for (const Tensor& value : pulled->values) {
      pulled->encoded.push_back(EncodeForWire(*precision, value.values()));
    }
  }
  pulled->charge = std::move(charge);
  return answer(WriteValues(stream, std::move(pulled)));
}

absl::StatusOr<int64_t> PsServiceImpl::CheckStreamHeader(const PushRequest& push) const {
  PS_RETURN_IF_ERROR(CheckLength("worker name", push.worker()));
  absl::flat_hash_set<absl::string_view> seen;
  int64_t bytes = 0;
  for (const Gradient& g : push.gradients()) {
    PS_RETURN_IF_ERROR(CheckLength("gradient name", g.name()));
    if (!seen.insert(g.name()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("gradient for \"", g.name(), "\" given twice in one push"));
    }
    PS_ASSIGN_OR_RETURN(const std::vector<int64_t> shape, store_->ShapeOf(g.name()));
    const auto& declared = g.gradient().shape();
    if (!std::equal(declared.begin(), declared.end(), shape.begin(), shape.end())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "gradient for \"", g.name(), "\" has shape ",
          ShapeToString(std::vector<int64_t>(declared.begin(), declared.end())),
          ", variable has ", ShapeToString(shape)));
    }
    // The variable's shape, which fit in memory when it was created: no overflow, but
    // summed saturating all the same. A 16-bit gradient is held as it came and then
    // widened: 2 + 4 bytes an element at its peak.
    const int64_t held = g.gradient().dtype() == DT_BFLOAT16 || g.gradient().dtype() == DT_HALF
                             ? 6
                             : static_cast<int64_t>(sizeof(float));
    bytes = SaturatingAdd(bytes, SaturatingMul(NumElements(shape), held));
  }
  return bytes;
}

absl::Status PsServiceImpl::ReadPush(grpc::ServerContext* context,
                                     PushPullServerStream* stream,
                                     StreamLimiter::Lease* lease, PushRequest* push,
                                     PushContext* push_context, TensorAssembler* assembler,
                                     MemoryLedger::Charge* charge) {
  PushPullChunkIn message;
  int messages = 0;
  auto read = [&] {
    lease->StartRead();
    const StreamRead got = stream->Read(&message);
    lease->EndRead();
    if (got == StreamRead::kMessage && stream_read_hook_) stream_read_hook_(++messages);
    return got;
  };
  // The stream did not bring a message: says why, in the order that tells most. A client
  // that gave up (deadline, cancel, reset) may have sent every byte: it was told the call
  // failed, so nothing is applied.
  auto ended = [&](StreamRead how, absl::string_view where) -> absl::Status {
    std::string why;
    if (lease->cancelled(&why)) {
      return absl::CancelledError(absl::StrCat("the ps ended the push-pull stream (", why,
                                               "); nothing was applied"));
    }
    if (message.malformed()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a push-pull stream message ", where, " does not parse; nothing was applied"));
    }
    if (how == StreamRead::kBroken || context->IsCancelled()) {
      return absl::CancelledError(
          absl::StrCat("the push-pull stream was cancelled ", where, "; nothing was applied"));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "the push-pull stream ended ", where, " without a commit; nothing was applied"));
  };
  if (const StreamRead got = read(); got != StreamRead::kMessage) {
    return ended(got, "before its header");
  }
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
  // The header is held against the caller's identity and the store (names, shapes) and
  // its bytes charged before a byte of data is accepted: a stream for an unknown name or
  // a shape not the variable's ends here, and all streams together never hold more than
  // the request memory.
  PS_ASSIGN_OR_RETURN(*push_context, ContextOf(context, *push));
  PS_ASSIGN_OR_RETURN(const int64_t bytes, CheckStreamHeader(*push));
  absl::StatusOr<MemoryLedger::Charge> charged = request_memory_.Reserve(
      bytes, absl::StrCat("a push-pull stream of ", push->gradients_size(),
                          push->gradients_size() == 1 ? " gradient" : " gradients"));
  if (!charged.ok()) {
    ++streams_over_memory_;
    return charged.status();
  }
  *charge = *std::move(charged);
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
    if (const StreamRead got = read(); got != StreamRead::kMessage) {
      return ended(got, "before its commit");
    }
  }
  // The commit comes with the half-close: anything after it is a broken client, and a
  // stream cancelled or reset instead of half-closed is not applied.
  const StreamRead after = read();
  if (after == StreamRead::kMessage) {
    return absl::InvalidArgumentError(
        "a push-pull stream sent a message after its commit; nothing was applied");
  }
  std::string why;
  if (after == StreamRead::kBroken || message.malformed() || lease->cancelled(&why) ||
      context->IsCancelled()) {
    return ended(StreamRead::kBroken, "after its commit");
  }
  if (std::chrono::system_clock::now() > context->deadline()) {
    return absl::DeadlineExceededError(
        "the push-pull stream's deadline passed before it was applied; nothing was applied");
  }
  return assembler->Finish();
}

absl::Status PsServiceImpl::WriteValues(PushPullServerStream* stream,
                                        std::shared_ptr<const PulledValues> pulled) {
  const std::vector<Tensor>& values = pulled->values;
  PushPullChunkOut out;
  PullResponse* header = out.fields().mutable_pull();
  std::vector<int64_t> bytes;
  const bool encoded = pulled->precision != WirePrecision::kFloat32;
  for (size_t i = 0; i < values.size(); ++i) {
    TensorHeader(values[i], WireDataType(pulled->precision), header->add_values());
    header->add_versions(pulled->versions[i]);
    bytes.push_back(encoded ? static_cast<int64_t>(pulled->encoded[i].size())
                            : values[i].num_elements() * 4);
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
    const char* base = encoded ? pulled->encoded[tensor].data()
                               : reinterpret_cast<const char*>(values[tensor].data());
    out.SetPayload(SliceWithOwner(base + offset, size, pulled));
    ok = stream->Write(out);
    header_sent = true;
    return ok;
  });
  if (!header_sent) ok = stream->Write(out);  // no bytes at all: the header alone
  if (!ok) return absl::CancelledError("the client went away during the pull");
  return absl::OkStatus();
}

grpc::Status PsServiceImpl::PullRows(grpc::ServerContext* context, const PullRowsRequest* request,
                                     PullRowsResponse* response) {
  return ServePullRows(context, request, response);
}

grpc::Status PsServiceImpl::ServePullRows(const grpc::ServerContextBase*,
                                          const PullRowsRequest* request,
                                          PullRowsResponse* response) {
  auto answer = [&](absl::Status status) {
    if (!status.ok()) response->Clear();
    if (absl::IsResourceExhausted(status)) ++pulls_refused_;
    return Answer("PullRows", status);
  };
  absl::flat_hash_set<absl::string_view> seen;
  int64_t bytes = 0;
  // The answer's rows, charged before they are copied: twice (the rows, then their copy
  // in the answer), for as long as the answer is built.
  std::vector<MemoryLedger::Charge> charges;
  for (const VariableRows& v : request->variables()) {
    if (absl::Status name = CheckLength("variable name", v.name()); !name.ok()) {
      return answer(name);
    }
    if (!seen.insert(v.name()).second) {
      return answer(absl::InvalidArgumentError(
          absl::StrCat("variable \"", v.name(), "\" named twice in one pull")));
    }
    absl::StatusOr<std::vector<int64_t>> shape = store_->ShapeOf(v.name());
    if (!shape.ok()) return answer(shape.status());
    if (!shape->empty()) {
      // Rows are distinct (the store refuses a repeated one), so no more than the table's.
      const int64_t rows = std::min<int64_t>(v.rows_size(), (*shape)[0]);
      const int64_t row_bytes =
          SaturatingMul(NumElements(absl::MakeConstSpan(*shape).subspan(1)),
                        static_cast<int64_t>(sizeof(float)));
      absl::StatusOr<MemoryLedger::Charge> charge = request_memory_.Reserve(
          SaturatingMul(2, SaturatingMul(rows, row_bytes)),
          absl::StrCat("pulling ", v.rows_size(), " rows of \"", v.name(), "\""));
      if (!charge.ok()) return answer(charge.status());
      charges.push_back(*std::move(charge));
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

grpc::Status PsServiceImpl::PushRows(grpc::ServerContext* context, const PushRowsRequest* request,
                                     PushRowsResponse* response) {
  return ServePushRows(context, request, response);
}

grpc::Status PsServiceImpl::ServePushRows(const grpc::ServerContextBase* caller,
                                          const PushRowsRequest* request, PushRowsResponse*) {
  int64_t payload_bytes = 0;
  absl::StatusOr<std::vector<SparseGradient>> gradients =
      UnpackRowGradients(*request, &payload_bytes);
  if (!gradients.ok()) return Answer("PushRows", gradients.status());
  PushContext context;
  absl::StatusOr<std::string> worker =
      PusherName(caller, request->worker(), options_.num_workers);
  if (!worker.ok()) return Answer("PushRows", worker.status());
  context.worker = *std::move(worker);
  context.epoch = request->epoch();
  context.step = request->step();
  context.request_id = request->request_id();
  context.versions.assign(request->versions().begin(), request->versions().end());
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
  response->set_limit_refusals(streams_.refused() + pulls_refused_.load() +
                               streams_over_memory_.load());
  response->set_streams_cancelled(streams_.cancelled());
  response->set_checkpoint_shards(checkpoint_shards_ != nullptr);
  if (metrics_ != nullptr) metrics_->DescribeTraffic(response);
  return grpc::Status::OK;
}

grpc::Status PsServiceImpl::ReadState(grpc::ServerContext*, const ReadStateRequest* request,
                                      ReadStateResponse* response) {
  if (absl::Status names = CheckNames("variable name", request->names()); !names.ok()) {
    return Answer("ReadState", names);
  }
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
    absl::Status names = CheckLength("variable name", v.name());
    for (const NamedSlot& slot : v.slots()) {
      if (names.ok()) names = CheckLength("slot name", slot.name());
    }
    if (!names.ok()) return Answer("RestoreState", names);
    absl::StatusOr<VariableSnapshot> s = SnapshotFromProto(v);
    if (!s.ok()) return Answer("RestoreState", s.status());
    snapshots.push_back(*std::move(s));
  }
  return Answer("RestoreState", store_->RestoreState(std::move(snapshots)));
}

grpc::Status PsServiceImpl::Shutdown(grpc::ServerContext*, const ShutdownRequest* request,
                                     ShutdownResponse*) {
  // Logged by the task: a reason of a megabyte is cut, not refused (Shutdown never fails).
  on_shutdown_(request->reason().substr(0, kMaxWireNameBytes));
  return grpc::Status::OK;
}

namespace {

// The folder and every name of a sharded-checkpoint request checked for length.
absl::Status CheckSliceNames(
    const std::string& checkpoint,
    const google::protobuf::RepeatedPtrField<CheckpointShardSlice>& slices) {
  PS_RETURN_IF_ERROR(CheckLength("checkpoint name", checkpoint));
  for (const CheckpointShardSlice& slice : slices) {
    PS_RETURN_IF_ERROR(CheckLength("variable name", slice.shard()));
    PS_RETURN_IF_ERROR(CheckLength("variable name", slice.variable()));
  }
  return absl::OkStatus();
}

absl::Status NoCheckpointDir() {
  return absl::FailedPreconditionError(
      "this ps has no --checkpoint_dir: it cannot write or restore checkpoint shards");
}

}  // namespace

grpc::Status PsServiceImpl::WriteCheckpointShard(grpc::ServerContext*,
                                                 const WriteCheckpointShardRequest* request,
                                                 WriteCheckpointShardResponse* response) {
  if (checkpoint_shards_ == nullptr) return Answer("WriteCheckpointShard", NoCheckpointDir());
  if (absl::Status names = CheckSliceNames(request->checkpoint(), request->shards());
      !names.ok()) {
    return Answer("WriteCheckpointShard", names);
  }
  absl::StatusOr<ShardFile> file = checkpoint_shards_->Write(
      request->checkpoint(), request->ps_index(), SlicesFromProto(request->shards()));
  if (!file.ok()) return Answer("WriteCheckpointShard", file.status());
  ShardFileToProto(*file, response);
  return grpc::Status::OK;
}

grpc::Status PsServiceImpl::RestoreCheckpointShard(grpc::ServerContext*,
                                                   const RestoreCheckpointShardRequest* request,
                                                   RestoreCheckpointShardResponse*) {
  if (checkpoint_shards_ == nullptr) return Answer("RestoreCheckpointShard", NoCheckpointDir());
  if (absl::Status names = CheckSliceNames(request->checkpoint(), request->shards());
      !names.ok()) {
    return Answer("RestoreCheckpointShard", names);
  }
  return Answer("RestoreCheckpointShard",
                checkpoint_shards_->Restore(request->checkpoint(),
                                            SlicesFromProto(request->shards())));
}

}  // namespace pstrain
