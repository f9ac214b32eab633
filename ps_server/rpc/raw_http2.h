#ifndef PSTRAIN_PS_SERVER_RPC_RAW_HTTP2_H_
#define PSTRAIN_PS_SERVER_RPC_RAW_HTTP2_H_

// A raw HTTP/2 client over a plain socket, for tests that send what no gRPC client
// would: a gRPC message whose length prefix claims far more bytes than ever follow.

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace pstrain {

// Appends an HTTP/2 frame (RFC 9113 4.1) of `type` with `flags` on `stream` to `out`.
void AppendHttp2Frame(uint8_t type, uint8_t flags, uint32_t stream, const std::string& payload,
                      std::string* out);
// Appends an HPACK "literal header field without indexing, new name", no Huffman coding
// (RFC 7541 6.2.2); `name` and `value` must be shorter than 127 bytes.
void AppendHpackLiteral(const std::string& name, const std::string& value, std::string* out);

struct RawFrameOutcome {
  // The server reset the stream, closed the connection, or answered with trailers.
  bool stream_ended = false;
  // What ended it: "RST_STREAM", "GOAWAY", "closed", "trailers grpc-status N" (the
  // status is read from an uncompressed literal, when the server sends one), or empty.
  std::string how;
  // The server sent the response's headers, its initial metadata (a HEADERS frame on the
  // stream without END_STREAM, as opposed to trailers or a trailers-only answer).
  bool initial_metadata = false;
};

// Opens a connection to 127.0.0.1:`port`, starts a call of `method` ("/pkg.Svc/Method"),
// sends one DATA frame holding a gRPC message prefix that declares `declared_bytes` and
// `sent_bytes` bytes of it, and waits up to `wait` for the server to end the stream.
// Errors: UNAVAILABLE the connection failed.
absl::StatusOr<RawFrameOutcome> SendTruncatedGrpcMessage(int port, const std::string& method,
                                                         uint32_t declared_bytes,
                                                         int sent_bytes, absl::Duration wait);

// Opens a connection to 127.0.0.1:`port`, starts a call of `method`, and sends in one
// write: each of `messages` (serialized messages, framed as gRPC messages, one DATA frame
// each), the last with END_STREAM when `half_close`, then RST_STREAM(CANCEL): a client
// that gives up right after its last message, the reset reaching the server with it.
// Waits up to `wait` for the server to end the stream.
// Errors: UNAVAILABLE the connection failed.
absl::StatusOr<RawFrameOutcome> SendGrpcMessagesThenReset(int port, const std::string& method,
                                                          const std::vector<std::string>& messages,
                                                          bool half_close, absl::Duration wait);

// One call over a raw HTTP/2 connection of its own, sent piece by piece: a client that
// half-closes and resets the stream at moments a test chooses. Thread-compatible.
class RawGrpcCall {
 public:
  // Connects to 127.0.0.1:`port` and starts a call of `method` (stream 1) with
  // `metadata` (keys and values shorter than 127 bytes: a call's MAC, say).
  // Errors: UNAVAILABLE the connection failed.
  static absl::StatusOr<std::unique_ptr<RawGrpcCall>> Start(
      int port, const std::string& method,
      const std::vector<std::pair<std::string, std::string>>& metadata = {});
  ~RawGrpcCall();  // closes the connection
  RawGrpcCall(const RawGrpcCall&) = delete;
  RawGrpcCall& operator=(const RawGrpcCall&) = delete;

  // Sends each of `messages` as a gRPC message in a DATA frame of its own, the last with
  // END_STREAM when `half_close`, and then, in the same write, RST_STREAM(CANCEL) when
  // `reset`. False: the connection is gone.
  bool Send(const std::vector<std::string>& messages, bool half_close, bool reset = false);
  // Sends RST_STREAM(CANCEL). False: the connection is gone.
  bool Reset();
  // Waits up to `wait` for the server to end the stream. What the server sent is read
  // once: a later call goes on from where this one stopped, and its outcome includes
  // what earlier calls saw.
  RawFrameOutcome WaitForEnd(absl::Duration wait);
  // Waits up to `wait` for the response's headers (initial_metadata) or the end of the
  // stream, reading as WaitForEnd.
  RawFrameOutcome WaitForHeaders(absl::Duration wait);
  // Sends RST_STREAM(CANCEL) and a PING in one write, then reads up to `wait` until the
  // PING's ACK. A server takes the frames of a connection in order and writes in order,
  // so once the ACK is here, whatever it wrote on the stream before it took the reset is
  // here too: `initial_metadata` then says whether it sent the response's headers
  // before it saw the reset. `stream_ended` is false when the ACK did not come.
  RawFrameOutcome ResetAndSync(absl::Duration wait);

 private:
  explicit RawGrpcCall(int fd) : fd_(fd) {}
  const int fd_;
  std::string in_;           // bytes read and not yet a whole frame
  RawFrameOutcome outcome_;  // what was read so far
};

}  // namespace pstrain

#endif  // PSTRAIN_PS_SERVER_RPC_RAW_HTTP2_H_
