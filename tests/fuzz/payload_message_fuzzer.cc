// The slice-based protobuf codec of the streamed push-and-pull (common/rpc/
// payload_message.h): any bytes as a received message, split into slices at positions
// taken from the input; what parses matches protobuf's own parse of the same bytes, and
// serialising it again gives bytes protobuf parses to the same message.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/rpc/payload_message.h"
#include "google/protobuf/util/message_differencer.h"
#include "proto/ps.pb.h"

namespace {

using Message = pstrain::PayloadMessage<pstrain::PushPullChunkRequest, 4>;

// The input after its first byte, in up to 4 slices cut where that byte says.
grpc::ByteBuffer Slices(const uint8_t* data, size_t size) {
  std::vector<grpc::Slice> slices;
  const uint8_t cuts = size > 0 ? data[0] : 0;
  size_t begin = size > 0 ? 1 : 0;
  for (int i = 0; i < 3 && begin < size; ++i) {
    const size_t len = std::min<size_t>(size - begin, (cuts >> (2 * i)) & 3 ? 1 + ((cuts >> (2 * i)) & 3) * 3 : 0);
    slices.emplace_back(data + begin, len);
    begin += len;
  }
  slices.emplace_back(data + begin, size - begin);
  return grpc::ByteBuffer(slices.data(), slices.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  grpc::ByteBuffer buffer = Slices(data, size);
  Message message;
  const grpc::Status parsed = grpc::SerializationTraits<Message>::Deserialize(&buffer, &message);
  pstrain::PushPullChunkRequest plain;
  const bool plain_ok = size == 0 || plain.ParseFromArray(data + 1, static_cast<int>(size - 1));
  if (!parsed.ok()) {
    if (!message.malformed()) std::abort();
    return 0;
  }
  if (!plain_ok) return 0;  // the codec may accept what protobuf's stricter parse does not
  std::string payload(message.payload_size(), '\0');
  message.CopyPayloadTo(payload.data());
  pstrain::PushPullChunkRequest rebuilt = message.fields();
  rebuilt.set_data(payload);
  if (!google::protobuf::util::MessageDifferencer::Equals(rebuilt, plain)) std::abort();

  grpc::ByteBuffer out;
  bool own = false;
  if (!grpc::SerializationTraits<Message>::Serialize(message, &out, &own).ok()) std::abort();
  std::vector<grpc::Slice> out_slices;
  if (!out.Dump(&out_slices).ok()) std::abort();
  std::string bytes;
  for (const grpc::Slice& s : out_slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  pstrain::PushPullChunkRequest again;
  if (!again.ParseFromString(bytes) ||
      !google::protobuf::util::MessageDifferencer::Equals(again, plain)) {
    std::abort();
  }
  return 0;
}
