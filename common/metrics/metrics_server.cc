#include "common/metrics/metrics_server.h"

#include <exception>
#include <map>
#include <set>
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

// The ports whose exposer has its /metrics handler. civetweb accepts connections from
// inside the exposer's constructor, but the exposer adds the handler only in
// RegisterCollectable: a scrape in between found no handler, and civetweb's own 404 page
// crashed the daemon (SIGSEGV in mg_send_http_error, seen when a scraper polled a
// starting evaluator). Until then /metrics is answered 503 here.
std::set<int>& ReadyPorts() ABSL_EXCLUSIVE_LOCKS_REQUIRED(handlers_mu) {
  static auto* ready = new std::set<int>();
  return *ready;
}

// Writes a whole response: status line, headers and body. (civetweb's own error pages
// were seen to crash it when a browser asks for a path it has no handler for, such as
// /favicon.ico, so every answer but /metrics is written here.)
void Respond(mg_connection* connection, int status, const std::string& content_type,
             const std::string& body) {
  const char* reason = status == 200   ? "OK"
                       : status == 404 ? "Not Found"
                       : status == 503 ? "Service Unavailable"
                                       : "Method Not Allowed";
  const std::string head = absl::StrCat(
      "HTTP/1.1 ", status, " ", reason, "\r\nContent-Type: ", content_type,
      "\r\nContent-Length: ", body.size(),
      "\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n");
  mg_write(connection, head.data(), head.size());
  mg_write(connection, body.data(), body.size());
}

// civetweb's begin_request: 0 lets the exposer answer /metrics; any other path is
// answered here (a status code means the request was handled).
int BeginRequest(mg_connection* connection) {
  const mg_request_info* request = mg_get_request_info(connection);
  if (request == nullptr || request->local_uri == nullptr) return 0;
  const std::string path = request->local_uri;
  std::shared_ptr<MetricsServer::PageHandler> handler;
  bool ready = false;
  {
    absl::MutexLock lock(&handlers_mu);
    auto found = Handlers().find(request->server_port);
    if (found != Handlers().end()) handler = found->second;
    ready = ReadyPorts().count(request->server_port) > 0;
  }
  if (path == "/metrics") {
    if (ready) return 0;
    Respond(connection, 503, "text/plain", "starting; /metrics is served in a moment\n");
    return 503;
  }
  if (request->request_method == nullptr || std::string(request->request_method) != "GET") {
    Respond(connection, 405, "text/plain", "only GET is served here\n");
    return 405;
  }
  std::optional<HttpPage> page;
  if (handler != nullptr) {
    page = (*handler)(path, request->query_string != nullptr ? request->query_string : "");
  }
  if (!page.has_value()) {
    Respond(connection, 404, "text/plain",
            absl::StrCat(path, " is not here; try /metrics", handler != nullptr ? " or /" : "",
                         "\n"));
    return 404;
  }
  Respond(connection, page->status, page->content_type, page->body);
  return page->status;
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
  {
    absl::MutexLock lock(&handlers_mu);
    ReadyPorts().insert(server->port_);
  }
  return server;
}

MetricsServer::~MetricsServer() {
  SetPageHandler(nullptr);
  {
    absl::MutexLock lock(&handlers_mu);
    ReadyPorts().erase(port_);
  }
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
