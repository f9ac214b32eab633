#ifndef PSTRAIN_PS_SERVER_RPC_PUSH_PULL_STREAM_H_
#define PSTRAIN_PS_SERVER_RPC_PUSH_PULL_STREAM_H_

// The wire pieces shared by both ends of ParameterServer.PushPullStream (proto/ps.proto):
// its message types with the tensor bytes as gRPC slices, how tensors are cut into
// chunks, and how chunks are put back together with every size checked.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "common/rpc/payload_message.h"
#include "common/tensor.h"
#include "common/wire_precision.h"
#include "proto/ps.pb.h"

namespace pstrain {

// `data` (field 4) travels as slices; see common/rpc/payload_message.h.
using PushPullChunkIn = PayloadMessage<PushPullChunkRequest, 4>;
using PushPullChunkOut = PayloadMessage<PushPullChunkResponse, 4>;

inline constexpr char kPushPullStreamMethod[] = "/pstrain.ParameterServer/PushPullStream";
// The method's position in service ParameterServer (proto/ps.proto), for the server's
// handler; checked by ps_service_test (a wrong index fails every stream call).
inline constexpr int kPushPullStreamMethodIndex = 8;

// gRPC 1.51 moves 256 KiB - 4 MiB messages fastest (shared/notes/performance-facts.md);
// ps_throughput measured 1 MiB chunks 5-15% above 256 KiB at 1-64 MiB (bench/README.md).
inline constexpr int64_t kDefaultPushPullChunkBytes = 1 << 20;

// Calls `chunk(tensor, offset, size)` for every chunk of at most `chunk_bytes` of each of
// `tensor_bytes` in order (none for an empty tensor).
void ForEachChunk(absl::Span<const int64_t> tensor_bytes, int64_t chunk_bytes,
                  const std::function<bool(int, int64_t, int64_t)>& chunk);

// A tensor's header on the stream: dtype (how its bytes travel: DT_FLOAT, DT_BFLOAT16 or
// DT_HALF) and shape, no content.
void TensorHeader(const Tensor& tensor, DataType dtype, TensorProto* header);
inline void TensorHeader(const Tensor& tensor, TensorProto* header) {
  TensorHeader(tensor, DT_FLOAT, header);
}

// Rebuilds tensors from their headers and chunks that come in order. Memory grows with
// the bytes that actually arrive, so a header that declares a huge shape costs nothing
// until its bytes come. Thread-compatible.
class TensorAssembler {
 public:
  // `labels` name the tensors in errors ("gradient \"w\"").
  // A tensor may come as DT_FLOAT, DT_BFLOAT16 or DT_HALF (its chunks then count 2 bytes
  // per element); Take() widens it to float32.
  // Errors: INVALID_ARGUMENT another dtype, a negative or overflowing shape, a header with
  // inline content.
  absl::Status Start(const std::vector<const TensorProto*>& headers,
                     std::vector<std::string> labels);

  // Adds the payload of `message` as bytes [offset, offset + size) of tensor `tensor`.
  // Errors: INVALID_ARGUMENT an unknown tensor, an offset other than the bytes received
  // so far for it (a missing or repeated chunk), bytes past its end.
  template <typename Message>
  absl::Status Add(int64_t tensor, int64_t offset, const Message& message) {
    char* dest = nullptr;
    absl::Status placed = Place(tensor, offset, static_cast<int64_t>(message.payload_size()),
                                &dest);
    if (!placed.ok() || message.payload_size() == 0) return placed;
    message.CopyPayloadTo(dest);
    return absl::OkStatus();
  }

  // Errors: INVALID_ARGUMENT a tensor that did not receive all its bytes.
  absl::Status Finish() const;

  // The tensors (after Finish), float32; leaves the assembler empty.
  std::vector<Tensor> Take();
  // The bytes received so far, as they came on the wire.
  int64_t wire_bytes() const;

 private:
  struct Pending {
    std::vector<int64_t> shape;
    int64_t bytes = 0;      // declared
    int64_t received = 0;
    WirePrecision precision = WirePrecision::kFloat32;
    // The bytes as they came (float32: the values themselves).
    std::vector<float> values;
  };
  // Checks a chunk and returns where its bytes go.
  absl::Status Place(int64_t tensor, int64_t offset, int64_t size, char** dest);

  std::vector<Pending> tensors_;
  std::vector<std::string> labels_;
};

}  // namespace pstrain

#endif  // PSTRAIN_PS_SERVER_RPC_PUSH_PULL_STREAM_H_
