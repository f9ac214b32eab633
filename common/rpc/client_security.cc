#include "common/rpc/client_security.h"

#include <cstdlib>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

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

// Adds the token and the identity to a call's initial metadata.
class CredentialsInterceptor final : public grpc::experimental::Interceptor {
 public:
  CredentialsInterceptor(const std::string* token, const std::string* claim)
      : token_(token), claim_(claim) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      std::multimap<std::string, std::string>* metadata = methods->GetSendInitialMetadata();
      metadata->emplace(kTokenMetadataKey, *token_);
      metadata->emplace(kIdentityMetadataKey, *claim_);
    }
    methods->Proceed();
  }

 private:
  const std::string* const token_;  // Not owned: the factory's, which outlives its calls.
  const std::string* const claim_;
};

class CredentialsInterceptorFactory final
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit CredentialsInterceptorFactory(const ClientSecurity& security)
      : token_(security.token), claim_(FormatIdentity(security.identity)) {}

  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* /*info*/) override {
    return new CredentialsInterceptor(&token_, &claim_);
  }

 private:
  const std::string token_;
  const std::string claim_;
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

std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
MakeClientSecurityInterceptors() {
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> factories;
  const ClientSecurity security = GetClientSecurity();
  if (!security.token.empty()) {
    factories.push_back(std::make_unique<CredentialsInterceptorFactory>(security));
  }
  return factories;
}

}  // namespace pstrain
