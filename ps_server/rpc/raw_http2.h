#ifndef PSTRAIN_PS_SERVER_RPC_RAW_HTTP2_H_
#define PSTRAIN_PS_SERVER_RPC_RAW_HTTP2_H_

// A raw HTTP/2 client over a plain socket, for tests that send what no gRPC client
// would: a gRPC message whose length prefix claims far more bytes than ever follow.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace pstrain {

struct RawFrameOutcome {
  // The server reset the stream, closed the connection, or answered with trailers.
  bool stream_ended = false;
  // What ended it: "RST_STREAM", "GOAWAY", "closed", "trailers grpc-status N" (the
  // status is read from an uncompressed literal, when the server sends one), or empty.
  std::string how;
};

// Opens a connection to 127.0.0.1:`port`, starts a call of `method` ("/pkg.Svc/Method"),
// sends one DATA frame holding a gRPC message prefix that declares `declared_bytes` and
// `sent_bytes` bytes of it, and waits up to `wait` for the server to end the stream.
// Errors: UNAVAILABLE the connection failed.
absl::StatusOr<RawFrameOutcome> SendTruncatedGrpcMessage(int port, const std::string& method,
                                                         uint32_t declared_bytes,
                                                         int sent_bytes, absl::Duration wait);

}  // namespace pstrain

#endif  // PSTRAIN_PS_SERVER_RPC_RAW_HTTP2_H_
