#ifndef PSTRAIN_PS_SERVER_RPC_STREAM_LIMITER_H_
#define PSTRAIN_PS_SERVER_RPC_STREAM_LIMITER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/server_context.h"

namespace pstrain {

// Server-side bounds on streaming calls, which gRPC's synchronous server does not have: a
// stream holds a handler thread for as long as the client keeps it open, so a peer that
// opens many, or sends a frame that claims 2 GiB and then 1 KB, or sends nothing at all,
// could hold every thread and gigabytes forever.
struct StreamLimits {
  // Streams one caller (a verified identity, else one host whatever its ports) may hold
  // open at once.
  int max_streams_per_peer = 64;
  // A stream whose server is waiting for the next message, and none has come for this
  // long, is cancelled.
  absl::Duration idle_timeout = absl::Seconds(60);
  // A stream open this long is cancelled, whatever the client's deadline.
  absl::Duration max_duration = absl::Minutes(10);
};

// Counts open streams per peer and cancels idle or overlong ones from a watchdog thread
// (ServerContext::TryCancel: the handler's blocked Read returns false and the stream's
// push is not applied). Thread-safe.
class StreamLimiter {
 public:
  explicit StreamLimiter(StreamLimits limits);
  ~StreamLimiter();
  StreamLimiter(const StreamLimiter&) = delete;
  StreamLimiter& operator=(const StreamLimiter&) = delete;

  // One open stream. The handler brackets every Read with StartRead / EndRead, so idle
  // time counts only while the server waits for the client. Destroy it before the
  // handler returns.
  class Lease {
   public:
    ~Lease();
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    void StartRead();
    void EndRead();
    // True when the limiter cancelled the stream (idle or too long); `why` says which.
    bool cancelled(std::string* why) const;

   private:
    friend class StreamLimiter;
    Lease(StreamLimiter* limiter, uint64_t id) : limiter_(limiter), id_(id) {}
    StreamLimiter* limiter_;  // Not owned.
    const uint64_t id_;
  };

  // Registers the stream `context` serves for `owner`: the caller's verified identity
  // ("worker-1") when it has one, so that one task's streams never take another's share
  // (a token holder cannot starve the job's workers on its host); else its host
  // (PeerHost). Empty: the peer's host.
  // Errors: RESOURCE_EXHAUSTED the owner already holds max_streams_per_peer streams.
  absl::StatusOr<std::unique_ptr<Lease>> Open(grpc::ServerContext* context,
                                              std::string owner = "");

  // Streams refused (per-peer limit) and cancelled (idle, too long) so far.
  int64_t refused() const { return refused_.load(); }
  // Streams registered now (their handlers have not returned).
  int open() const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t cancelled() const { return cancelled_.load(); }

  // "ipv4:10.0.0.7:51234" -> "ipv4:10.0.0.7": a peer is a host, not a connection.
  static std::string PeerHost(const std::string& peer);

 private:
  struct Stream {
    grpc::ServerContext* context;  // Not owned; valid while the stream is registered.
    std::string peer;
    absl::Time opened;
    // Start of the current wait for a message; InfiniteFuture when not reading.
    absl::Time reading_since = absl::InfiniteFuture();
    std::string cancelled_because;  // empty: not cancelled
  };

  void Close(uint64_t id) ABSL_LOCKS_EXCLUDED(mu_);
  void Watch() ABSL_LOCKS_EXCLUDED(mu_);
  // Cancels the streams past a limit at `now`.
  void CancelExpired(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const StreamLimits limits_;
  mutable absl::Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint64_t, Stream> streams_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int> per_peer_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<int64_t> refused_{0};
  std::atomic<int64_t> cancelled_{0};
  std::thread watchdog_;  // last: started once everything above exists
};

}  // namespace pstrain

#endif  // PSTRAIN_PS_SERVER_RPC_STREAM_LIMITER_H_
