#include "common/rpc/call_authorizer.h"

#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/rpc/call_mac.h"
#include "common/logging.h"
#include "common/rpc/method_roles.h"
#include "grpc/grpc_security.h"
#include "grpc/grpc_security_constants.h"

namespace pstrain {
namespace {

// A refusal of the same caller for the same reason is logged at most this often.
constexpr absl::Duration kLogInterval = absl::Minutes(1);
// Callers remembered for rate-limiting; past it the memory starts again (a flood of
// distinct names costs log lines, never memory).
constexpr size_t kMaxLoggedCallers = 1024;

absl::string_view SliceView(const grpc_slice& slice) {
  return absl::string_view(reinterpret_cast<const char*>(GRPC_SLICE_START_PTR(slice)),
                           GRPC_SLICE_LENGTH(slice));
}

// The common name of the peer's verified certificate; empty without TLS.
std::string CertificateName(const grpc_auth_context* context) {
  grpc_auth_property_iterator it =
      grpc_auth_context_find_properties_by_name(context, GRPC_X509_CN_PROPERTY_NAME);
  if (const grpc_auth_property* property = grpc_auth_property_iterator_next(&it)) {
    return std::string(property->value, property->value_length);
  }
  return "";
}

// The grpc_auth_metadata_processor: runs in gRPC's server auth filter for every call,
// before the call reaches a handler; answers at once (nothing here blocks).
void ProcessCallMetadata(void* state, grpc_auth_context* context, const grpc_metadata* md,
                         size_t num_md, grpc_process_auth_metadata_done_cb done,
                         void* user_data) {
  CallAuthorizer* authorizer = static_cast<std::shared_ptr<CallAuthorizer>*>(state)->get();
  absl::string_view method;
  CallCredentialsMetadata call;
  for (size_t i = 0; i < num_md; ++i) {
    const absl::string_view key = SliceView(md[i].key);
    if (key == ":path") {
      method = SliceView(md[i].value);
    } else if (key == kIdentityMetadataKey) {
      call.claim = SliceView(md[i].value);
    } else if (key == kTimeMetadataKey) {
      call.time = SliceView(md[i].value);
    } else if (key == kNonceMetadataKey) {
      call.nonce = SliceView(md[i].value);
    } else if (key == kMacMetadataKey) {
      call.mac = SliceView(md[i].value);
    }
  }
  const absl::Status verdict = authorizer->Check(method, CertificateName(context), call);
  if (verdict.ok()) {
    done(user_data, nullptr, 0, nullptr, 0, GRPC_STATUS_OK, nullptr);
    return;
  }
  const std::string message(verdict.message());
  done(user_data, nullptr, 0, nullptr, 0, static_cast<grpc_status_code>(verdict.code()),
       message.c_str());
}

// The proof this server sends back for the call of `info` (CallAuthorizer::ReplyProofFor
// over the nonce of its MAC); empty when the call carries no MAC. A call reaches an
// interceptor factory only once the processor above accepted it, so for every method but
// the open ones the MAC was good. (The processor cannot add metadata, and gRPC 1.51 shares
// one auth context among a connection's calls, so the proof is made here rather than
// handed over.) gRPC binds the client's metadata to the call's context before it asks
// the factories for interceptors, whatever the API (sync, callback, async).
std::string ProofOf(const CallAuthorizer& authorizer, grpc::experimental::ServerRpcInfo* info) {
  const auto& metadata = info->server_context()->client_metadata();
  const auto nonce = metadata.find(kNonceMetadataKey);
  if (nonce == metadata.end() || metadata.find(kMacMetadataKey) == metadata.end() ||
      info->method() == nullptr) {
    return "";
  }
  return authorizer.ReplyProofFor(info->method(),
                                  absl::string_view(nonce->second.data(), nonce->second.size()));
}

// Sends back a streaming call's proof, in the server's initial metadata (a client reading
// a stream learns it first) and trailing metadata (gRPC may send an error with no initial
// metadata of its own), at the moment each is sent: a stream's handler may send its
// metadata from maps of its own rather than the call's context (ServerStream,
// ps_server/rpc/server_stream.h).
class ReplyProofInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit ReplyProofInterceptor(std::string proof) : proof_(std::move(proof)) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    using grpc::experimental::InterceptionHookPoints;
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace(kReplyProofMetadataKey, proof_);
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      methods->GetSendTrailingMetadata()->emplace(kReplyProofMetadataKey, proof_);
    }
    methods->Proceed();
  }

 private:
  const std::string proof_;
};

// A unary call's proof goes into its context's initial and trailing metadata, which every
// unary handler's answer is sent with (sync, callback and async alike): no interceptor,
// so the call does not pay gRPC 1.51's interception machinery, which costs every batch
// of an intercepted call an extra empty batch through the core and the completion queue
// (two per unary call on the server; bench/README.md, "1 KiB push-and-pulls"). A
// streaming call gets the interceptor above; a call without a MAC gets neither.
class ReplyProofFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit ReplyProofFactory(std::shared_ptr<const CallAuthorizer> authorizer)
      : authorizer_(std::move(authorizer)) {}

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    std::string proof = ProofOf(*authorizer_, info);
    if (proof.empty()) return nullptr;
    if (info->type() != grpc::experimental::ServerRpcInfo::Type::UNARY) {
      return new ReplyProofInterceptor(std::move(proof));
    }
    info->server_context()->AddInitialMetadata(kReplyProofMetadataKey, proof);
    info->server_context()->AddTrailingMetadata(kReplyProofMetadataKey, proof);
    return nullptr;
  }

 private:
  const std::shared_ptr<const CallAuthorizer> authorizer_;
};

void DestroyProcessorState(void* state) {
  delete static_cast<std::shared_ptr<CallAuthorizer>*>(state);
}

// Server credentials with an auth metadata processor. grpc::InsecureServerCredentials()
// refuses a processor, but gRPC's core runs one on any server credentials, so these
// hold core credentials of their own (plaintext or TLS) and add the port the way
// grpc::Server would.
class AuthorizingCredentials final : public grpc::ServerCredentials {
 public:
  AuthorizingCredentials(grpc_server_credentials* core, std::shared_ptr<CallAuthorizer> authorizer)
      : core_(core), authorizer_(authorizer) {
    grpc_server_credentials_set_auth_metadata_processor(
        core_, {ProcessCallMetadata, DestroyProcessorState,
                new std::shared_ptr<CallAuthorizer>(std::move(authorizer))});
  }

  const std::shared_ptr<CallAuthorizer>& authorizer() const { return authorizer_; }
  ~AuthorizingCredentials() override { grpc_server_credentials_release(core_); }

  void SetAuthMetadataProcessor(
      const std::shared_ptr<grpc::AuthMetadataProcessor>& /*processor*/) override {
    LogError("AuthorizingCredentials already have their processor; another is ignored");
  }

 private:
  int AddPortToServer(const std::string& address, grpc_server* server) override {
    return grpc_server_add_http2_port(server, address.c_str(), core_);
  }

  grpc_server_credentials* const core_;
  const std::shared_ptr<CallAuthorizer> authorizer_;
};

}  // namespace

CallAuthorizer::CallAuthorizer(std::string token) : token_(std::move(token)) {}

absl::Status CallAuthorizer::CheckMac(absl::string_view method,
                                      const CallCredentialsMetadata& call) {
  if (call.mac.empty()) {
    return absl::UnauthenticatedError(
        "no call MAC: every pstrain daemon, psctl and client of a job needs the job's token "
        "(--auth_token_file or PSTRAIN_AUTH_TOKEN)");
  }
  int64_t time_micros = 0;
  // A nonce is NewCallNonce's 32 characters: a longer one would cost the replay cache
  // memory.
  if (call.claim.empty() || call.nonce.size() != 32 ||
      !absl::SimpleAtoi(call.time, &time_micros)) {
    return absl::UnauthenticatedError(absl::StrCat(
        "the call's MAC comes without its identity, time or nonce (", kIdentityMetadataKey,
        ", ", kTimeMetadataKey, ", ", kNonceMetadataKey, ")"));
  }
  if (!ConstantTimeEquals(call.mac, CallMac(token_, method, call.claim, time_micros, call.nonce))) {
    return absl::UnauthenticatedError("wrong call MAC: the caller does not hold the job's token");
  }
  // Only after the MAC: a caller without the secret cannot fill the cache.
  return replay_cache_.Admit(time_micros, call.nonce, absl::Now());
}

std::string CallAuthorizer::ReplyProofFor(absl::string_view method,
                                          absl::string_view nonce) const {
  if (token_.empty()) return "";
  return ReplyProof(token_, method, nonce);
}

absl::Status CallAuthorizer::Check(absl::string_view method, absl::string_view certificate_name,
                                   const CallCredentialsMetadata& call) {
  if (IsOpenMethod(method)) return absl::OkStatus();
  absl::Status verdict;
  std::string caller = "an anonymous caller";
  absl::StatusOr<CallerIdentity> identity;
  if (!certificate_name.empty()) {
    identity = ParseIdentity(certificate_name);
    caller = absl::StrCat("certificate ", certificate_name.substr(0, 64));
  } else if (token_.empty()) {
    verdict = absl::UnauthenticatedError(
        "this server takes only callers with a certificate of its cluster");
  } else {
    if (!call.claim.empty()) caller = absl::StrCat("a caller claiming ", call.claim.substr(0, 64));
    verdict = CheckMac(method, call);
    if (verdict.ok()) {
      identity = ParseIdentity(call.claim);
      caller = std::string(call.claim.substr(0, 64));
    }
  }
  if (verdict.ok() && !identity.ok()) {
    verdict = absl::UnauthenticatedError(identity.status().message());
  }
  if (verdict.ok()) verdict = AuthorizeMethod(method, *identity);
  if (!verdict.ok()) CountAndLog(verdict, method, caller);
  return verdict;
}

void CallAuthorizer::CountAndLog(const absl::Status& refusal, absl::string_view method,
                                 const std::string& caller) {
  (refusal.code() == absl::StatusCode::kUnauthenticated ? unauthenticated_ : permission_denied_)
      .fetch_add(1);
  const absl::Time now = absl::Now();
  int64_t unlogged = 0;
  {
    absl::MutexLock lock(&mu_);
    if (log_state_.size() >= kMaxLoggedCallers) log_state_.clear();
    LogState& state = log_state_[absl::StrCat(caller, "|", refusal.code())];
    if (now - state.last_logged < kLogInterval) {
      ++state.unlogged;
      return;
    }
    unlogged = state.unlogged;
    state.last_logged = now;
    state.unlogged = 0;
  }
  LogWarning(absl::StrCat("refused ", method.substr(0, 128), " from ", caller, ": ",
                          absl::StatusCodeToString(refusal.code()), ": ", refusal.message(),
                          unlogged > 0 ? absl::StrCat(" (and ", unlogged,
                                                      " refusals of it not logged)")
                                       : ""));
}

std::shared_ptr<grpc::ServerCredentials> AuthorizingServerCredentials(
    std::shared_ptr<CallAuthorizer> authorizer, const TlsMaterial* tls) {
  grpc_server_credentials* core = nullptr;
  if (tls == nullptr) {
    core = grpc_insecure_server_credentials_create();
  } else {
    // Copied by gRPC.
    grpc_ssl_pem_key_cert_pair pair = {tls->key.c_str(), tls->cert.c_str()};
    core = grpc_ssl_server_credentials_create_ex(
        tls->ca.c_str(), &pair, 1, GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY,
        nullptr);
  }
  return std::make_shared<AuthorizingCredentials>(core, std::move(authorizer));
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
ReplyProofInterceptorFactory(const std::shared_ptr<grpc::ServerCredentials>& credentials) {
  const auto* authorizing = dynamic_cast<const AuthorizingCredentials*>(credentials.get());
  if (authorizing == nullptr) return nullptr;
  return std::make_unique<ReplyProofFactory>(authorizing->authorizer());
}

absl::StatusOr<std::optional<CallerIdentity>> CallerOf(const grpc::ServerContextBase& context) {
  if (std::shared_ptr<const grpc::AuthContext> auth = context.auth_context()) {
    const std::vector<grpc::string_ref> names =
        auth->FindPropertyValues(GRPC_X509_CN_PROPERTY_NAME);
    if (!names.empty()) {
      return ParseIdentity(absl::string_view(names[0].data(), names[0].size()));
    }
  }
  const auto& metadata = context.client_metadata();
  const auto claim = metadata.find(kIdentityMetadataKey);
  if (claim == metadata.end()) return std::nullopt;
  absl::StatusOr<CallerIdentity> identity =
      ParseIdentity(absl::string_view(claim->second.data(), claim->second.size()));
  if (!identity.ok()) return absl::UnauthenticatedError(identity.status().message());
  return *identity;
}

grpc::Status CheckCallerIsTask(const grpc::ServerContextBase& context, absl::string_view type,
                               int index) {
  absl::StatusOr<std::optional<CallerIdentity>> caller = CallerOf(context);
  if (!caller.ok()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, std::string(caller.status().message()));
  }
  // No identity: the server does not authorize (--insecure). An operator's identity can
  // only reach a handler that checks a task the same way: the role table gives admin none
  // of the methods that call this (RegisterTask, Heartbeat, Report, PushChunk,
  // ChunkStream), so it is seen here only where nothing authorizes, e.g. tasks run as
  // threads of one process whose channels all send that process's default "admin" claim.
  if (!caller->has_value() || (*caller)->role == Role::kAdmin) return grpc::Status::OK;
  absl::StatusOr<Role> role = RoleFromName(type);
  CallerIdentity task{role.ok() ? *role : Role::kAdmin, index};
  if (!role.ok() || **caller != task) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        absl::StrCat(FormatIdentity(**caller), " cannot act as ",
                                     type.substr(0, 32), " ", index));
  }
  return grpc::Status::OK;
}

}  // namespace pstrain
