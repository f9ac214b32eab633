#ifndef PSTRAIN_COMMON_RPC_PAYLOAD_MESSAGE_H_
#define PSTRAIN_COMMON_RPC_PAYLOAD_MESSAGE_H_

// A protobuf message whose one bulk `bytes` field (the payload: tensor content) moves as
// gRPC slices instead of being copied into and out of a std::string.
//
// Why: with generated protobuf code a tensor chunk is copied four times between the
// caller's buffer and the peer's (set_data, serialisation into gRPC's buffer, parsing
// into a string, and out of it), and each copy of a few MiB costs about as much as the
// loopback transfer itself. Here the sender's payload is one gRPC slice (copied once, or
// borrowed with an owner that keeps the memory alive), and the receiver keeps
// sub-slices of the bytes gRPC read from the socket until the caller copies them, once,
// to where they belong (CopyPayloadTo).
//
// The wire format is plain protobuf: the other fields serialised by protobuf, followed by
// the payload field (tag, length, bytes). Any protobuf peer reads it as the ordinary
// message, and this codec reads what an ordinary peer writes (the payload may come
// anywhere; if it repeats, the last one wins, as protobuf's own parser does).
//
// Use PayloadMessage<Proto, kField> as the request or response type of a gRPC method
// (grpc::internal::BlockingUnaryCall, ClientReaderWriterFactory, BidiStreamingHandler,
// CallbackUnaryHandler): grpc::SerializationTraits is specialised below.
//
// Thread-compatible: one thread uses a message at a time.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "google/protobuf/message_lite.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/impl/serialization_traits.h"
#include "grpcpp/support/slice.h"
#include "grpcpp/support/status.h"

namespace pstrain {

// A slice over [data, data + size) that keeps `owner` alive until gRPC releases the
// slice (possibly on another thread, possibly after the call that sent it returned).
grpc::Slice SliceWithOwner(const void* data, size_t size, std::shared_ptr<const void> owner);

namespace payload_internal {

// Serialises `fields` then the payload as field `field`, into `out`.
grpc::Status Serialize(const google::protobuf::MessageLite& fields, int field,
                       const std::vector<grpc::Slice>& payload, size_t payload_size,
                       grpc::ByteBuffer* out);

// Parses `in` into `fields` (every field but `field`) and `payload` (sub-slices of `in`,
// no copy). Errors: INTERNAL for bytes that are not a well-formed protobuf message (the
// code gRPC itself reports for a message it cannot parse).
grpc::Status Parse(grpc::ByteBuffer* in, int field, google::protobuf::MessageLite* fields,
                   std::vector<grpc::Slice>* payload, size_t* payload_size);

void CopySlices(const std::vector<grpc::Slice>& slices, size_t begin, size_t size, void* dest);

}  // namespace payload_internal

template <typename Proto, int kPayloadField>
class PayloadMessage {
 public:
  static constexpr int kField = kPayloadField;

  // Every field but the payload (leave the payload field itself unset there).
  Proto& fields() { return fields_; }
  const Proto& fields() const { return fields_; }

  // Sets the payload to a copy of [data, data + size).
  void SetPayloadCopy(const void* data, size_t size) {
    payload_.clear();
    payload_size_ = size;
    if (size > 0) payload_.emplace_back(data, size);
  }
  // Sets the payload to `slice` without copying (e.g. from SliceWithOwner).
  void SetPayload(grpc::Slice slice) {
    payload_.clear();
    payload_size_ = slice.size();
    if (payload_size_ > 0) payload_.push_back(std::move(slice));
  }
  void ClearPayload() {
    payload_.clear();
    payload_size_ = 0;
  }

  size_t payload_size() const { return payload_size_; }

  // True when the bytes last read into this message did not parse. gRPC's Read then
  // returns false, exactly as at the end of a stream; this tells the two apart, so a
  // receiver never takes a malformed message for a clean end.
  bool malformed() const { return malformed_; }
  void set_malformed(bool malformed) { malformed_ = malformed; }
  // Copies payload bytes [begin, begin + size) to `dest`; the range must lie within
  // payload_size().
  void CopyPayloadTo(void* dest, size_t begin, size_t size) const {
    payload_internal::CopySlices(payload_, begin, size, dest);
  }
  void CopyPayloadTo(void* dest) const { CopyPayloadTo(dest, 0, payload_size_); }

  // For the serialisation traits.
  const std::vector<grpc::Slice>& payload_slices() const { return payload_; }
  std::vector<grpc::Slice>* mutable_payload_slices() { return &payload_; }
  size_t* mutable_payload_size() { return &payload_size_; }

 private:
  Proto fields_;
  std::vector<grpc::Slice> payload_;
  size_t payload_size_ = 0;
  bool malformed_ = false;
};

}  // namespace pstrain

namespace grpc {

template <typename Proto, int kPayloadField>
class SerializationTraits<pstrain::PayloadMessage<Proto, kPayloadField>, void> {
 public:
  using Message = pstrain::PayloadMessage<Proto, kPayloadField>;

  static Status Serialize(const Message& msg, ByteBuffer* buffer, bool* own_buffer) {
    *own_buffer = true;
    return pstrain::payload_internal::Serialize(msg.fields(), kPayloadField,
                                                msg.payload_slices(), msg.payload_size(),
                                                buffer);
  }

  static Status Deserialize(ByteBuffer* buffer, Message* msg) {
    Status status = pstrain::payload_internal::Parse(buffer, kPayloadField,
                                                     &msg->fields(),
                                                     msg->mutable_payload_slices(),
                                                     msg->mutable_payload_size());
    buffer->Clear();
    msg->set_malformed(!status.ok());
    return status;
  }
};

}  // namespace grpc

#endif  // PSTRAIN_COMMON_RPC_PAYLOAD_MESSAGE_H_
