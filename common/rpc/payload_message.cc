#include "common/rpc/payload_message.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace pstrain {
namespace {

constexpr int kWireVarint = 0;
constexpr int kWireFixed64 = 1;
constexpr int kWireLengthDelimited = 2;
constexpr int kWireFixed32 = 5;

void AppendVarint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

// Reads forward through the slices of a received message. Every read checks the bytes
// left, so a truncated or hostile message is an error, never an overrun.
class SliceCursor {
 public:
  explicit SliceCursor(const std::vector<grpc::Slice>* slices) : slices_(slices) {
    for (const grpc::Slice& s : *slices) left_ += s.size();
  }

  bool done() const { return left_ == 0; }

  bool ReadByte(uint8_t* byte) {
    if (left_ == 0) return false;
    SkipEmpty();
    *byte = (*slices_)[index_].begin()[offset_];
    Advance(1);
    return true;
  }

  bool ReadVarint(uint64_t* value) {
    *value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t byte;
      if (!ReadByte(&byte)) return false;
      *value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;  // more than 10 bytes: not a varint
  }

  // Appends the next `n` bytes to `out` (a copy: used for the small non-payload fields).
  bool CopyTo(size_t n, std::string* out) {
    if (n > left_) return false;
    while (n > 0) {
      SkipEmpty();
      const grpc::Slice& s = (*slices_)[index_];
      const size_t take = std::min(n, s.size() - offset_);
      out->append(reinterpret_cast<const char*>(s.begin()) + offset_, take);
      Advance(take);
      n -= take;
    }
    return true;
  }

  // Appends sub-slices (references, no copy) covering the next `n` bytes.
  bool SliceTo(size_t n, std::vector<grpc::Slice>* out) {
    if (n > left_) return false;
    while (n > 0) {
      SkipEmpty();
      const grpc::Slice& s = (*slices_)[index_];
      const size_t take = std::min(n, s.size() - offset_);
      out->push_back(s.sub(offset_, offset_ + take));
      Advance(take);
      n -= take;
    }
    return true;
  }

 private:
  void SkipEmpty() {
    while (offset_ == (*slices_)[index_].size()) {
      ++index_;
      offset_ = 0;
    }
  }
  // Moves forward by n bytes within the current slice.
  void Advance(size_t n) {
    offset_ += n;
    left_ -= n;
  }

  const std::vector<grpc::Slice>* slices_;
  size_t index_ = 0;
  size_t offset_ = 0;
  size_t left_ = 0;
};

grpc::Status Malformed(const char* what) {
  return grpc::Status(grpc::StatusCode::INTERNAL,
                      std::string("malformed message on the wire: ") + what);
}

}  // namespace

grpc::Slice SliceWithOwner(const void* data, size_t size, std::shared_ptr<const void> owner) {
  if (size == 0) return grpc::Slice();
  auto* keep = new std::shared_ptr<const void>(std::move(owner));
  return grpc::Slice(
      const_cast<void*>(data), size,
      [](void* user_data) { delete static_cast<std::shared_ptr<const void>*>(user_data); },
      keep);
}

namespace payload_internal {

grpc::Status Serialize(const google::protobuf::MessageLite& fields, int field,
                       const std::vector<grpc::Slice>& payload, size_t payload_size,
                       grpc::ByteBuffer* out) {
  std::string head;
  if (!fields.AppendToString(&head)) return Malformed("cannot serialise fields");
  if (payload_size > 0) {
    AppendVarint((static_cast<uint64_t>(field) << 3) | kWireLengthDelimited, &head);
    AppendVarint(payload_size, &head);
  }
  std::vector<grpc::Slice> slices;
  slices.reserve(1 + payload.size());
  slices.emplace_back(std::move(head));
  for (const grpc::Slice& s : payload) slices.push_back(s);  // a reference, not a copy
  grpc::ByteBuffer buffer(slices.data(), slices.size());
  out->Swap(&buffer);
  return grpc::Status::OK;
}

grpc::Status Parse(grpc::ByteBuffer* in, int field, google::protobuf::MessageLite* fields,
                   std::vector<grpc::Slice>* payload, size_t* payload_size) {
  payload->clear();
  *payload_size = 0;
  std::vector<grpc::Slice> slices;
  if (grpc::Status dumped = in->Dump(&slices); !dumped.ok()) return dumped;
  SliceCursor cursor(&slices);
  // Everything but the payload is re-encoded here (small: names, shapes, offsets) and
  // parsed by protobuf afterwards.
  std::string rest;
  while (!cursor.done()) {
    uint64_t tag;
    if (!cursor.ReadVarint(&tag) || (tag >> 3) == 0 || (tag >> 3) >= (1u << 29)) {
      return Malformed("bad tag");
    }
    const int number = static_cast<int>(tag >> 3);
    const int wire = static_cast<int>(tag & 7);
    if (number == field && wire == kWireLengthDelimited) {
      uint64_t length;
      if (!cursor.ReadVarint(&length)) return Malformed("bad payload length");
      payload->clear();  // a repeated payload field: the last one wins
      if (!cursor.SliceTo(length, payload)) return Malformed("payload runs past the end");
      *payload_size = length;
      continue;
    }
    AppendVarint(tag, &rest);
    switch (wire) {
      case kWireVarint: {
        uint64_t value;
        if (!cursor.ReadVarint(&value)) return Malformed("bad varint");
        AppendVarint(value, &rest);
        break;
      }
      case kWireFixed64:
        if (!cursor.CopyTo(8, &rest)) return Malformed("truncated fixed64");
        break;
      case kWireFixed32:
        if (!cursor.CopyTo(4, &rest)) return Malformed("truncated fixed32");
        break;
      case kWireLengthDelimited: {
        uint64_t length;
        if (!cursor.ReadVarint(&length)) return Malformed("bad length");
        AppendVarint(length, &rest);
        if (!cursor.CopyTo(length, &rest)) return Malformed("field runs past the end");
        break;
      }
      default:
        // Groups (3, 4) are proto2-only and never used by pstrain's protos.
        return Malformed("unsupported wire type");
    }
  }
  if (!fields->ParseFromString(rest)) return Malformed("fields do not parse");
  return grpc::Status::OK;
}

void CopySlices(const std::vector<grpc::Slice>& slices, size_t begin, size_t size, void* dest) {
  char* out = static_cast<char*>(dest);
  for (const grpc::Slice& s : slices) {
    if (size == 0) return;
    if (begin >= s.size()) {
      begin -= s.size();
      continue;
    }
    const size_t take = std::min(size, s.size() - begin);
    std::memcpy(out, s.begin() + begin, take);
    out += take;
    size -= take;
    begin = 0;
  }
}

}  // namespace payload_internal
}  // namespace pstrain
