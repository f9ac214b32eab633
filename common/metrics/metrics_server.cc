#include "common/metrics/metrics_server.h"

#include <exception>
#include <map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "CivetServer.h"
#include "civetweb.h"
#include "prometheus/exposer.h"

namespace pstrain {
namespace {

// The exposer owns its civetweb server privately and gives a request hook no pointer of
// ours, so the page handlers are found by the port the request arrived on.
absl::Mutex handlers_mu(absl::kConstInit);
std::map<int, std::shared_ptr<MetricsServer::PageHandler>>& Handlers()
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(handlers_mu) {
  static auto* handlers = new std::map<int, std::shared_ptr<MetricsServer::PageHandler>>();
  return *handlers;
}

// civetweb's begin_request: 0 lets the exposer answer (/metrics) or civetweb say 404;
// a status code means the request was answered here.
int BeginRequest(mg_connection* connection) {
  const mg_request_info* request = mg_get_request_info(connection);
  if (request == nullptr || request->local_uri == nullptr) return 0;
  const std::string path = request->local_uri;
  if (path == "/metrics") return 0;
  std::shared_ptr<MetricsServer::PageHandler> handler;
  {
    absl::MutexLock lock(&handlers_mu);
    auto found = Handlers().find(request->server_port);
    if (found == Handlers().end()) return 0;
    handler = found->second;
  }
  if (std::string(request->request_method) != "GET") {
    mg_send_http_error(connection, 405, "%s", "only GET is served here\n");
    return 405;
  }
  std::optional<HttpPage> page =
      (*handler)(path, request->query_string != nullptr ? request->query_string : "");
  if (!page.has_value()) return 0;
  if (page->status != 200) {
    mg_send_http_error(connection, page->status, "%s", page->body.c_str());
    return page->status;
  }
  mg_send_http_ok(connection, page->content_type.c_str(),
                  static_cast<long long>(page->body.size()));
  mg_write(connection, page->body.data(), page->body.size());
  return 200;
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    int port, std::shared_ptr<MetricsRegistry> registry) {
  std::unique_ptr<MetricsServer> server(new MetricsServer());
  server->registry_ = std::move(registry);
  static const CivetCallbacks* callbacks = [] {
    auto* c = new CivetCallbacks();
    c->begin_request = BeginRequest;
    return c;
  }();
  // prometheus-cpp (civetweb underneath) reports a port it cannot bind by throwing.
  try {
    server->exposer_ = std::make_unique<prometheus::Exposer>(
        std::vector<std::string>{"listening_ports", absl::StrCat("0.0.0.0:", port),
                                 "num_threads", "4"},
        callbacks);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("metrics: cannot listen on port ", port, ": ", e.what()));
  }
  const std::vector<int> ports = server->exposer_->GetListeningPorts();
  if (ports.empty()) {
    return absl::UnavailableError(absl::StrCat("metrics: no listening port for ", port));
  }
  server->port_ = ports[0];
  server->exposer_->RegisterCollectable(server->registry_);
  return server;
}

MetricsServer::~MetricsServer() {
  SetPageHandler(nullptr);
  exposer_.reset();  // stops the threads that may call a collector
}

void MetricsServer::SetPageHandler(PageHandler handler) {
  absl::MutexLock lock(&handlers_mu);
  if (handler == nullptr) {
    Handlers().erase(port_);
  } else {
    Handlers()[port_] = std::make_shared<PageHandler>(std::move(handler));
  }
}

}  // namespace pstrain
