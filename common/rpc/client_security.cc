#include "common/rpc/client_security.h"

#include <cstdint>
#include <cstdlib>
#include <map>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/rpc/call_mac.h"

namespace pstrain {
namespace {

ClientSecurity FromEnvironment() {
  ClientSecurity security;
  if (const char* token = std::getenv(kAuthTokenEnvironmentVariable)) security.token = token;
  security.identity = {Role::kAdmin, 0};
  return security;
}

struct ProcessClientSecurity {
  absl::Mutex mu;
  bool set ABSL_GUARDED_BY(mu) = false;
  ClientSecurity security ABSL_GUARDED_BY(mu);
};

ProcessClientSecurity& Process() {
  static auto* process = new ProcessClientSecurity();
  return *process;
}

// Codes a server's handler answers with and a client acts on (a value, "the job is
// over", "no such task"): from a server that did not prove it holds the secret they
// become UNAUTHENTICATED. The rest a client only retries or reports, and gRPC makes
// them itself too (no connection, a deadline, a refusal by the server's auth filter,
// which runs before any proof could be sent).
bool ActedUpon(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::NOT_FOUND:
    case grpc::StatusCode::ALREADY_EXISTS:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::ABORTED:
    case grpc::StatusCode::OUT_OF_RANGE:
    case grpc::StatusCode::DATA_LOSS:
      return true;
    default:
      return false;
  }
}

// Adds one call's identity, time, nonce and MAC to `metadata`; returns the nonce.
std::string AddCallMac(absl::string_view secret, absl::string_view claim,
                       absl::string_view method,
                       std::multimap<std::string, std::string>* metadata) {
  const int64_t time_micros = absl::ToUnixMicros(absl::Now());
  std::string nonce = NewCallNonce();
  metadata->emplace(kIdentityMetadataKey, std::string(claim));
  metadata->emplace(kTimeMetadataKey, absl::StrCat(time_micros));
  metadata->emplace(kNonceMetadataKey, nonce);
  metadata->emplace(kMacMetadataKey, CallMac(secret, method, claim, time_micros, nonce));
  return nonce;
}

// Authenticates each call with its MAC (call_mac.h) and, on a plaintext channel, checks
// the server's proof in its answer.
class CallMacInterceptor final : public grpc::experimental::Interceptor {
 public:
  CallMacInterceptor(const std::string* secret, const std::string* claim, bool check_reply,
                     grpc::experimental::ClientRpcInfo* info)
      : secret_(secret), claim_(claim), check_reply_(check_reply), info_(info) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    using grpc::experimental::InterceptionHookPoints;
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      const absl::string_view method = info_->method() != nullptr ? info_->method() : "";
      const std::string nonce = AddCallMac(*secret_, *claim_, method,
                                           methods->GetSendInitialMetadata());
      if (check_reply_) expected_proof_ = ReplyProof(*secret_, method, nonce);
    }
    if (!check_reply_) {
      methods->Proceed();
      return;
    }
    // Every proof this batch brought first (a unary call's answer comes in one batch:
    // headers, message and trailers), then what it may be used for.
    const bool got_initial =
        methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_INITIAL_METADATA);
    const bool got_message =
        methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE);
    const bool got_status =
        methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_STATUS);
    if (got_initial) Look(*methods->GetRecvInitialMetadata());
    if (got_status) Look(*methods->GetRecvTrailingMetadata());
    // A server of the job sends its proof in its initial metadata, which comes before
    // any message: a message without it is from a process that is not of the job. The
    // call is cancelled here, at its first message, so a stream's caller reads no more
    // of it (its next Read fails) and its status says why.
    // (A unary call's message comes with its status, which is refused below.)
    if (got_message && !got_status && !proven_ && !refused_ &&
        methods->GetRecvMessage() != nullptr) {
      refused_ = true;
      info_->client_context()->TryCancel();
    }
    if (got_status) {
      grpc::Status* status = methods->GetRecvStatus();
      if (refused_ || (!proven_ && ActedUpon(status->error_code()))) {
        *status = grpc::Status(
            grpc::StatusCode::UNAUTHENTICATED,
            absl::StrCat("the server did not prove it holds the job's token: its answer (",
                         refused_ ? "a stream's first message; the stream was cancelled"
                                  : absl::StatusCodeToString(static_cast<absl::StatusCode>(
                                        status->error_code())),
                         ") is ignored (a process that is not of this job answers at its "
                         "address, or it runs without the token)"));
      }
    }
    methods->Proceed();
  }

 private:
  void Look(const std::multimap<grpc::string_ref, grpc::string_ref>& metadata) {
    if (proven_) return;
    auto [begin, end] = metadata.equal_range(kReplyProofMetadataKey);
    for (auto it = begin; it != end; ++it) {
      if (ConstantTimeEquals(absl::string_view(it->second.data(), it->second.size()),
                             expected_proof_)) {
        proven_ = true;
        return;
      }
    }
  }

  const std::string* const secret_;  // Not owned: the factory's, which outlives its calls.
  const std::string* const claim_;
  const bool check_reply_;
  grpc::experimental::ClientRpcInfo* const info_;  // Not owned: the call's.
  std::string expected_proof_;
  bool proven_ = false;
  // A message came before the proof: the call was cancelled, and ends UNAUTHENTICATED.
  bool refused_ = false;
};

class CallMacInterceptorFactory final
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit CallMacInterceptorFactory(const ClientSecurity& security)
      : secret_(security.token),
        claim_(FormatIdentity(security.identity)),
        // Over TLS the handshake has checked the server's certificate against the
        // cluster CA: that is its proof.
        check_reply_(security.require_server_proof &&
                     security.channel_credentials == nullptr) {}

  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* info) override {
    return new CallMacInterceptor(&secret_, &claim_, check_reply_, info);
  }

 private:
  const std::string secret_;
  const std::string claim_;
  const bool check_reply_;
};

}  // namespace

void SetClientSecurity(ClientSecurity security) {
  ProcessClientSecurity& process = Process();
  absl::MutexLock lock(&process.mu);
  process.security = std::move(security);
  process.set = true;
}

ClientSecurity GetClientSecurity() {
  ProcessClientSecurity& process = Process();
  absl::MutexLock lock(&process.mu);
  if (!process.set) {
    process.security = FromEnvironment();
    process.set = true;
  }
  return process.security;
}

std::shared_ptr<grpc::ChannelCredentials> ClientChannelCredentials() {
  std::shared_ptr<grpc::ChannelCredentials> tls = GetClientSecurity().channel_credentials;
  return tls != nullptr ? tls : grpc::InsecureChannelCredentials();
}

void AddCallCredentials(absl::string_view token, absl::string_view claim,
                        absl::string_view method, grpc::ClientContext* context) {
  std::multimap<std::string, std::string> metadata;
  AddCallMac(token, claim, method, &metadata);
  for (const auto& [key, value] : metadata) context->AddMetadata(key, value);
}

std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
MakeClientSecurityInterceptors() {
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> factories;
  const ClientSecurity security = GetClientSecurity();
  if (!security.token.empty()) {
    factories.push_back(std::make_unique<CallMacInterceptorFactory>(security));
  }
  return factories;
}

}  // namespace pstrain
