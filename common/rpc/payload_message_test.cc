// PayloadMessage's codec against protobuf's own: either side may be an ordinary peer.

#include "common/rpc/payload_message.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "proto/collective.pb.h"

namespace pstrain {
namespace {

using Chunk = PayloadMessage<CollectiveChunk, 6>;

std::string Bytes(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(i * 7 + 3);
  return s;
}

// `bytes` as a ByteBuffer cut into slices of `piece` bytes, as gRPC hands over what it
// read from a socket.
grpc::ByteBuffer Cut(const std::string& bytes, size_t piece) {
  std::vector<grpc::Slice> slices;
  for (size_t i = 0; i < bytes.size(); i += piece) {
    slices.emplace_back(bytes.data() + i, std::min(piece, bytes.size() - i));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string out;
  for (const grpc::Slice& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

TEST(PayloadMessageTest, OurBytesAreTheOrdinaryProtobufMessage) {
  for (size_t n : {0, 1, 127, 128, 300000}) {
    Chunk chunk;
    chunk.fields().set_src_rank(3);
    chunk.fields().set_step(uint64_t{1} << 40);
    chunk.fields().set_chunk(-2);
    const std::string payload = Bytes(n);
    chunk.SetPayloadCopy(payload.data(), payload.size());
    grpc::ByteBuffer buffer;
    bool own = false;
    ASSERT_TRUE(grpc::SerializationTraits<Chunk>::Serialize(chunk, &buffer, &own).ok());
    CollectiveChunk parsed;
    ASSERT_TRUE(parsed.ParseFromString(Flatten(buffer)));
    EXPECT_EQ(parsed.src_rank(), 3);
    EXPECT_EQ(parsed.step(), uint64_t{1} << 40);
    EXPECT_EQ(parsed.chunk(), -2);
    EXPECT_EQ(parsed.data(), payload) << n;
  }
}

TEST(PayloadMessageTest, ParsesOrdinaryBytesCutAnywhere) {
  CollectiveChunk ordinary;
  ordinary.set_src_rank(1);
  ordinary.set_round(5);
  ordinary.set_data(Bytes(1000));
  ordinary.set_bucket(9);
  const std::string wire = ordinary.SerializeAsString();
  for (size_t piece : {1, 2, 3, 7, 64, 4096}) {
    grpc::ByteBuffer buffer = Cut(wire, piece);
    Chunk chunk;
    ASSERT_TRUE(grpc::SerializationTraits<Chunk>::Deserialize(&buffer, &chunk).ok()) << piece;
    EXPECT_EQ(chunk.fields().src_rank(), 1);
    EXPECT_EQ(chunk.fields().round(), 5);
    EXPECT_EQ(chunk.fields().bucket(), 9);
    EXPECT_TRUE(chunk.fields().data().empty());
    ASSERT_EQ(chunk.payload_size(), 1000u);
    std::string out(1000, '\0');
    chunk.CopyPayloadTo(out.data());
    EXPECT_EQ(out, ordinary.data());
    std::string middle(10, '\0');
    chunk.CopyPayloadTo(middle.data(), 495, 10);
    EXPECT_EQ(middle, ordinary.data().substr(495, 10));
  }
}

TEST(PayloadMessageTest, PayloadBeforeOtherFieldsAndRepeatedPayloadLastWins) {
  CollectiveChunk first;
  first.set_data("old");
  CollectiveChunk second;
  second.set_step(7);
  second.set_data("new!");
  // Concatenated protobuf messages merge; a repeated bytes field keeps the last value.
  const std::string wire = first.SerializeAsString() + second.SerializeAsString();
  grpc::ByteBuffer buffer = Cut(wire, 5);
  Chunk chunk;
  ASSERT_TRUE(grpc::SerializationTraits<Chunk>::Deserialize(&buffer, &chunk).ok());
  EXPECT_EQ(chunk.fields().step(), 7u);
  std::string out(chunk.payload_size(), '\0');
  chunk.CopyPayloadTo(out.data());
  EXPECT_EQ(out, "new!");
}

TEST(PayloadMessageTest, RoundTripThroughTheCodecWithBorrowedPayload) {
  auto owner = std::make_shared<std::string>(Bytes(5000));
  Chunk sent;
  sent.fields().set_src_rank(2);
  sent.SetPayload(SliceWithOwner(owner->data(), owner->size(), owner));
  grpc::ByteBuffer buffer;
  bool own = false;
  ASSERT_TRUE(grpc::SerializationTraits<Chunk>::Serialize(sent, &buffer, &own).ok());
  grpc::ByteBuffer received = Cut(Flatten(buffer), 333);
  Chunk got;
  ASSERT_TRUE(grpc::SerializationTraits<Chunk>::Deserialize(&received, &got).ok());
  EXPECT_EQ(got.fields().src_rank(), 2);
  std::string out(got.payload_size(), '\0');
  got.CopyPayloadTo(out.data());
  EXPECT_EQ(out, *owner);
  // The borrowed memory is released once every slice over it is gone.
  std::weak_ptr<std::string> weak = owner;
  owner.reset();
  EXPECT_FALSE(weak.expired());
  sent.ClearPayload();
  buffer.Clear();
  EXPECT_TRUE(weak.expired());
}

TEST(PayloadMessageTest, TruncatedOrHostileBytesAreErrors) {
  CollectiveChunk ordinary;
  ordinary.set_step(300);
  ordinary.set_data(Bytes(100));
  const std::string wire = ordinary.SerializeAsString();
  for (size_t cut = 1; cut < wire.size(); ++cut) {
    if (cut == 3) continue;  // just the step field: a whole message
    grpc::ByteBuffer buffer = Cut(wire.substr(0, cut), 7);
    Chunk chunk;
    EXPECT_FALSE(grpc::SerializationTraits<Chunk>::Deserialize(&buffer, &chunk).ok()) << cut;
  }
  // A payload length far past the end, and a group wire type.
  for (const std::string& bad : {std::string("\x32\xff\xff\xff\xff\x0f" "abc", 9),
                                 std::string("\x0b\x0c", 2), std::string("\x00", 1)}) {
    grpc::ByteBuffer buffer = Cut(bad, 2);
    Chunk chunk;
    EXPECT_EQ(grpc::SerializationTraits<Chunk>::Deserialize(&buffer, &chunk).error_code(),
              grpc::StatusCode::INTERNAL);
  }
}

}  // namespace
}  // namespace pstrain
