#include "ps_server/rpc/raw_http2.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace pstrain {
namespace {

constexpr uint8_t kData = 0x0, kHeaders = 0x1, kRstStream = 0x3, kSettings = 0x4,
                  kPing = 0x6, kGoAway = 0x7;
constexpr uint8_t kEndHeaders = 0x4, kAck = 0x1;

bool SendAll(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

void AppendHttp2Frame(uint8_t type, uint8_t flags, uint32_t stream, const std::string& payload,
                      std::string* out) {
  const uint32_t n = static_cast<uint32_t>(payload.size());
  for (int shift = 16; shift >= 0; shift -= 8) out->push_back(static_cast<char>(n >> shift));
  out->push_back(static_cast<char>(type));
  out->push_back(static_cast<char>(flags));
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>(stream >> shift));
  out->append(payload);
}

void AppendHpackLiteral(const std::string& name, const std::string& value, std::string* out) {
  out->push_back(0x00);
  out->push_back(static_cast<char>(name.size()));
  out->append(name);
  out->push_back(static_cast<char>(value.size()));
  out->append(value);
}

namespace {

constexpr uint8_t kEndStream = 0x1;
constexpr uint32_t kCancel = 0x8;

// A connected socket with the client preface sent, or an error.
absl::StatusOr<int> Connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::UnavailableError("socket failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return absl::UnavailableError(absl::StrCat("cannot connect to port ", port));
  }
  return fd;
}

// The preface, SETTINGS and the HEADERS that start a call of `method` on stream 1, with
// `metadata` after the required headers.
std::string StartCall(const std::string& method,
                      const std::vector<std::pair<std::string, std::string>>& metadata = {}) {
  std::string out = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  AppendHttp2Frame(kSettings, 0, 0, "", &out);
  std::string headers;
  AppendHpackLiteral(":method", "POST", &headers);
  AppendHpackLiteral(":scheme", "http", &headers);
  AppendHpackLiteral(":path", method, &headers);
  AppendHpackLiteral(":authority", "localhost", &headers);
  AppendHpackLiteral("content-type", "application/grpc", &headers);
  AppendHpackLiteral("te", "trailers", &headers);
  for (const auto& [key, value] : metadata) AppendHpackLiteral(key, value, &headers);
  AppendHttp2Frame(kHeaders, kEndHeaders, 1, headers, &out);
  return out;
}

// A gRPC message prefix: uncompressed, `length` bytes follow.
std::string MessagePrefix(uint32_t length) {
  std::string prefix(5, '\0');
  for (int i = 0; i < 4; ++i) prefix[1 + i] = static_cast<char>(length >> (24 - 8 * i));
  return prefix;
}

// The payload of the PING ResetAndSync sends.
constexpr char kSyncPing[] = "pstrain!";

// What has been read of one connection: the bytes of a frame not yet whole, what the
// frames said of stream 1, and whether the ACK of kSyncPing came.
struct FrameReader {
  std::string in;
  RawFrameOutcome outcome;
  bool ping_acked = false;
  bool closed = false;  // the server closed the connection
};

// Reads frames until `done` says so or `wait` passes, acknowledging the server's
// SETTINGS and PINGs as a live client would. A connection the server closed ends the
// stream ("closed").
void ReadFrames(int fd, absl::Duration wait, const std::function<bool()>& done,
                FrameReader* reader) {
  RawFrameOutcome& outcome = reader->outcome;
  std::string& in = reader->in;
  const absl::Time deadline = absl::Now() + wait;
  while (!done() && !reader->closed) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1) <= 0) continue;
    char buffer[4096];
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) {
      reader->closed = true;
      if (!outcome.stream_ended) outcome.how = "closed";
      outcome.stream_ended = true;
      break;
    }
    in.append(buffer, static_cast<size_t>(n));
    while (in.size() >= 9) {
      const uint32_t length = (static_cast<uint8_t>(in[0]) << 16) |
                              (static_cast<uint8_t>(in[1]) << 8) | static_cast<uint8_t>(in[2]);
      if (in.size() < 9 + length) break;
      const uint8_t type = static_cast<uint8_t>(in[3]);
      const uint8_t flags = static_cast<uint8_t>(in[4]);
      const uint32_t stream = ((static_cast<uint32_t>(static_cast<uint8_t>(in[5])) << 24) |
                               (static_cast<uint32_t>(static_cast<uint8_t>(in[6])) << 16) |
                               (static_cast<uint32_t>(static_cast<uint8_t>(in[7])) << 8) |
                               static_cast<uint32_t>(static_cast<uint8_t>(in[8]))) &
                              0x7fffffff;
      const std::string payload = in.substr(9, length);
      in.erase(0, 9 + length);
      std::string reply;
      if (type == kSettings && (flags & kAck) == 0) AppendHttp2Frame(kSettings, kAck, 0, "", &reply);
      if (type == kPing && (flags & kAck) == 0) AppendHttp2Frame(kPing, kAck, 0, payload, &reply);
      if (type == kPing && (flags & kAck) != 0 && payload == kSyncPing) reader->ping_acked = true;
      if (!reply.empty()) SendAll(fd, reply);
      if (outcome.stream_ended) continue;  // what ended it is kept
      if (type == kRstStream) {
        outcome.stream_ended = true;
        outcome.how = "RST_STREAM";
      } else if (type == kGoAway) {
        outcome.stream_ended = true;
        outcome.how = "GOAWAY";
      } else if (type == kHeaders && stream == 1) {
        const size_t at = payload.find("grpc-status");
        if ((flags & kEndStream) == 0) outcome.initial_metadata = true;
        if (at != std::string::npos) {
          outcome.stream_ended = true;
          outcome.how = "trailers";
          if (at + 12 < payload.size()) {
            const int length_byte = static_cast<uint8_t>(payload[at + 11]) & 0x7f;
            outcome.how = absl::StrCat("trailers grpc-status ",
                                       payload.substr(at + 12, static_cast<size_t>(length_byte)));
          }
        }
      }
    }
  }
}

// Reads frames until the stream ends or `wait` passes.
RawFrameOutcome WaitForStreamEnd(int fd, absl::Duration wait) {
  FrameReader reader;
  ReadFrames(fd, wait, [&] { return reader.outcome.stream_ended; }, &reader);
  return reader.outcome;
}

// Sends `out`, then waits as WaitForStreamEnd. Closes `fd`.
RawFrameOutcome SendAndWait(int fd, const std::string& out, absl::Duration wait) {
  RawFrameOutcome outcome;
  if (!SendAll(fd, out)) {
    outcome.stream_ended = true;
    outcome.how = "closed";
  } else {
    outcome = WaitForStreamEnd(fd, wait);
  }
  ::close(fd);
  return outcome;
}

std::string MessageFrames(const std::vector<std::string>& messages, bool half_close) {
  std::string out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const bool last = i + 1 == messages.size();
    AppendHttp2Frame(kData, last && half_close ? kEndStream : 0, 1,
                MessagePrefix(static_cast<uint32_t>(messages[i].size())) + messages[i], &out);
  }
  return out;
}

std::string ResetFrame() {
  std::string code(4, '\0');
  for (int i = 0; i < 4; ++i) code[i] = static_cast<char>(kCancel >> (24 - 8 * i));
  std::string out;
  AppendHttp2Frame(kRstStream, 0, 1, code, &out);
  return out;
}

}  // namespace

absl::StatusOr<RawFrameOutcome> SendTruncatedGrpcMessage(int port, const std::string& method,
                                                         uint32_t declared_bytes,
                                                         int sent_bytes, absl::Duration wait) {
  absl::StatusOr<int> fd = Connect(port);
  if (!fd.ok()) return fd.status();
  std::string out = StartCall(method);
  std::string message = MessagePrefix(declared_bytes);
  message.append(static_cast<size_t>(sent_bytes), 'x');
  AppendHttp2Frame(kData, 0, 1, message, &out);
  return SendAndWait(*fd, out, wait);
}

absl::StatusOr<RawFrameOutcome> SendGrpcMessagesThenReset(int port, const std::string& method,
                                                          const std::vector<std::string>& messages,
                                                          bool half_close, absl::Duration wait) {
  absl::StatusOr<int> fd = Connect(port);
  if (!fd.ok()) return fd.status();
  return SendAndWait(*fd, StartCall(method) + MessageFrames(messages, half_close) + ResetFrame(),
                     wait);
}

absl::StatusOr<std::unique_ptr<RawGrpcCall>> RawGrpcCall::Start(
    int port, const std::string& method,
    const std::vector<std::pair<std::string, std::string>>& metadata) {
  absl::StatusOr<int> fd = Connect(port);
  if (!fd.ok()) return fd.status();
  std::unique_ptr<RawGrpcCall> call(new RawGrpcCall(*fd));
  if (!SendAll(*fd, StartCall(method, metadata))) {
    return absl::UnavailableError(absl::StrCat("cannot start a call on port ", port));
  }
  return call;
}

RawGrpcCall::~RawGrpcCall() { ::close(fd_); }

bool RawGrpcCall::Send(const std::vector<std::string>& messages, bool half_close, bool reset) {
  return SendAll(fd_, MessageFrames(messages, half_close) + (reset ? ResetFrame() : ""));
}

bool RawGrpcCall::Reset() { return SendAll(fd_, ResetFrame()); }

RawFrameOutcome RawGrpcCall::WaitForEnd(absl::Duration wait) {
  FrameReader reader{std::move(in_), outcome_};
  ReadFrames(fd_, wait, [&] { return reader.outcome.stream_ended; }, &reader);
  in_ = std::move(reader.in);
  outcome_ = reader.outcome;
  return outcome_;
}

RawFrameOutcome RawGrpcCall::WaitForHeaders(absl::Duration wait) {
  FrameReader reader{std::move(in_), outcome_};
  ReadFrames(
      fd_, wait,
      [&] { return reader.outcome.initial_metadata || reader.outcome.stream_ended; }, &reader);
  in_ = std::move(reader.in);
  outcome_ = reader.outcome;
  return outcome_;
}

RawFrameOutcome RawGrpcCall::ResetAndSync(absl::Duration wait) {
  std::string out = ResetFrame();
  AppendHttp2Frame(kPing, 0, 0, kSyncPing, &out);
  FrameReader reader{std::move(in_), outcome_};
  if (!SendAll(fd_, out)) {
    reader.outcome.stream_ended = true;
    if (reader.outcome.how.empty()) reader.outcome.how = "closed";
  } else {
    ReadFrames(fd_, wait, [&] { return reader.ping_acked || reader.closed; }, &reader);
  }
  in_ = std::move(reader.in);
  outcome_ = reader.outcome;
  RawFrameOutcome synced = outcome_;
  // Synced: the client's own reset ended the stream, if the server had not.
  synced.stream_ended = reader.ping_acked || outcome_.stream_ended;
  if (reader.ping_acked && synced.how.empty()) synced.how = "reset by the client";
  return synced;
}

}  // namespace pstrain
