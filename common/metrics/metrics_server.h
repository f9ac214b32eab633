#ifndef PSTRAIN_COMMON_METRICS_METRICS_SERVER_H_
#define PSTRAIN_COMMON_METRICS_METRICS_SERVER_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/metrics/metrics_registry.h"

namespace prometheus {
class Exposer;
}

namespace pstrain {

// An HTTP answer for a path other than /metrics (the dashboard and its data).
struct HttpPage {
  int status = 200;
  std::string content_type = "text/html; charset=utf-8";
  std::string body;
};

// Serves a MetricsRegistry at /metrics in Prometheus' text format with prometheus-cpp's
// own HTTP exposer (civetweb), on every interface. Other GET paths go to a page handler
// when one is set (the chief's and train's dashboard), else 404.
//
// Thread-safe; the exposer answers from its own threads.
class MetricsServer {
 public:
  // Answers a GET of `path` (query string apart, in `query`); nullopt: 404.
  using PageHandler =
      std::function<std::optional<HttpPage>(const std::string& path, const std::string& query)>;

  // Listens on `port` (0: a free port, see port()). `registry` is shared with the code that
  // updates it.
  // Errors: UNAVAILABLE the port cannot be bound (named in the message).
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      int port, std::shared_ptr<MetricsRegistry> registry);
  ~MetricsServer();

  int port() const { return port_; }
  MetricsRegistry* registry() const { return registry_.get(); }

  // Replaces the page handler (null: none). It runs on the exposer's threads and must
  // stay valid until it is replaced or the server is destroyed.
  void SetPageHandler(PageHandler handler);

 private:
  MetricsServer() = default;

  std::shared_ptr<MetricsRegistry> registry_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_METRICS_METRICS_SERVER_H_
