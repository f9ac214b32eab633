#include "distribute/allreduce/ring_allreduce.h"

#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/rpc/grpc_util.h"
#include "deploy/local/free_port.h"
#include "gtest/gtest.h"
#include "distribute/allreduce/chunk_mailbox.h"
#include "distribute/allreduce/grpc_ring_transport.h"
#include "distribute/allreduce/in_process_ring.h"

namespace pstrain {
namespace {

// Rank r's value of element i of tensor t: small integers, so float sums are exact and a
// misplaced chunk shows.
float Value(int rank, int t, int64_t i) { return static_cast<float>(rank * 1000 + t * 100 + i % 97); }

std::vector<std::vector<float>> MakeTensors(int rank, const std::vector<int64_t>& sizes) {
  std::vector<std::vector<float>> out;
  for (size_t t = 0; t < sizes.size(); ++t) {
    std::vector<float> v(sizes[t]);
    for (int64_t i = 0; i < sizes[t]; ++i) v[i] = Value(rank, static_cast<int>(t), i);
    out.push_back(std::move(v));
  }
  return out;
}

// Runs one all-reduce of `sizes` on every rank (one thread each) and checks every rank
// holds the exact sums.
void RunAndCheck(std::vector<RingTransport*> transports, const std::vector<int64_t>& sizes,
                 RingAllReduceOptions options, int calls = 2) {
  const int n = static_cast<int>(transports.size());
  std::vector<std::unique_ptr<RingAllReduce>> rings;
  for (int r = 0; r < n; ++r) rings.push_back(std::make_unique<RingAllReduce>(transports[r], options));
  for (int call = 0; call < calls; ++call) {
    std::vector<std::vector<std::vector<float>>> data(n);
    std::vector<absl::Status> status(n);
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) {
      data[r] = MakeTensors(r, sizes);
      threads.emplace_back([&, r] {
        std::vector<absl::Span<float>> spans;
        for (auto& t : data[r]) spans.push_back(absl::MakeSpan(t));
        status[r] = rings[r]->AllReduceSum(spans);
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
      for (size_t t = 0; t < sizes.size(); ++t) {
        for (int64_t i = 0; i < sizes[t]; ++i) {
          float want = 0;
          for (int q = 0; q < n; ++q) want += Value(q, static_cast<int>(t), i);
          ASSERT_EQ(data[r][t][i], want) << "n=" << n << " rank " << r << " tensor " << t
                                         << " element " << i;
        }
      }
    }
  }
}

TEST(RingAllReduceTest, AwkwardSizesInProcess) {
  for (int n : {1, 2, 3, 4}) {
    const std::vector<std::vector<int64_t>> cases = {
        {},                 // no tensors
        {0},                // empty
        {0, 0, 0},          // all empty
        {1},                // smaller than n
        {n - 1 > 0 ? n - 1 : 1},
        {7},                // not divisible by 2, 3, 4
        {1001, 0, 13, 64},  // several tensors, one empty
        {5000},             // several buckets and chunks with the options below
    };
    for (const auto& sizes : cases) {
      for (int64_t bucket_bytes : {int64_t{25} << 20, int64_t{4 * 37}}) {
        InProcessRing ring(n);
        std::vector<RingTransport*> transports;
        for (int r = 0; r < n; ++r) transports.push_back(ring.transport(r));
        RingAllReduceOptions options;
        options.bucket_bytes = bucket_bytes;
        options.chunk_bytes = bucket_bytes < 1000 ? 4 * 5 : 1 << 20;
        options.timeout = absl::Seconds(10);
        SCOPED_TRACE(absl::StrCat("n=", n, " bucket_bytes=", bucket_bytes, " sizes=",
                                  sizes.size() > 0 ? sizes[0] : -1));
        RunAndCheck(transports, sizes, options);
      }
    }
  }
}

TEST(RingAllReduceTest, ADeadPeerIsNamedWithinTheTimeout) {
  InProcessRing ring(3);
  ring.Kill(2);
  RingAllReduceOptions options;
  options.timeout = absl::Milliseconds(500);
  RingAllReduce r0(ring.transport(0), options), r1(ring.transport(1), options);
  std::vector<float> a(100, 1.0f), b(100, 2.0f);
  absl::Status s0, s1;
  const absl::Time start = absl::Now();
  std::thread t0([&] { s0 = r0.AllReduceSum({absl::MakeSpan(a)}); });
  std::thread t1([&] { s1 = r1.AllReduceSum({absl::MakeSpan(b)}); });
  t0.join();
  t1.join();
  // A liveness bound, not a speed one: far above the 500 ms timeout (a loaded machine),
  // far below the 30 s default a lost setting would fall back to (and than forever).
  EXPECT_LT(absl::Now() - start, absl::Seconds(15));
  // Rank 0 waits for rank 2's chunks; rank 1 cannot hand its chunks to rank 2.
  EXPECT_TRUE(absl::IsDeadlineExceeded(s0)) << s0;
  EXPECT_NE(s0.message().find("no data from worker 2"), std::string::npos) << s0;
  EXPECT_TRUE(absl::IsUnavailable(s1)) << s1;
  EXPECT_NE(s1.message().find("worker 2"), std::string::npos) << s1;
}

TEST(RingAllReduceTest, DisagreeingShapesAreAnError) {
  InProcessRing ring(2);
  RingAllReduceOptions options;
  options.timeout = absl::Seconds(2);
  RingAllReduce r0(ring.transport(0), options), r1(ring.transport(1), options);
  std::vector<float> a(10, 1.0f), b(12, 2.0f);
  absl::Status s0, s1;
  std::thread t0([&] { s0 = r0.AllReduceSum({absl::MakeSpan(a)}); });
  std::thread t1([&] { s1 = r1.AllReduceSum({absl::MakeSpan(b)}); });
  t0.join();
  t1.join();
  EXPECT_TRUE(absl::IsInternal(s0) || absl::IsInternal(s1)) << s0 << " / " << s1;
}

TEST(ChunkMailboxTest, TakesByKeyOnceAndTimesOut) {
  ChunkMailbox box;
  box.Deliver(ChunkKey{1, 0, 0, 1}, std::vector<float>{1, 2});
  EXPECT_TRUE(absl::IsDeadlineExceeded(box.Take(ChunkKey{1, 0, 0, 0}, absl::Milliseconds(10)).status()));
  auto got = box.Take(ChunkKey{1, 0, 0, 1}, absl::ZeroDuration());
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->ToVector(), (std::vector<float>{1, 2}));
  EXPECT_EQ(box.pending(), 0u);
  box.Close();
  EXPECT_TRUE(absl::IsCancelled(box.Take(ChunkKey{}, absl::Seconds(5)).status()));
}

// N ranks as threads, each with its own gRPC server on a free port.
struct GrpcRing {
  explicit GrpcRing(int n, bool start_last = true) {
    auto ports = PickFreePorts(n);
    EXPECT_TRUE(ports.ok());
    GrpcRingOptions base;
    for (int r = 0; r < n; ++r) {
      base.addresses.push_back(absl::StrCat("localhost:", (*ports)[r]));
      base.names.push_back(absl::StrCat("worker ", r));
    }
    addresses = base.addresses;
    for (int r = 0; r < n; ++r) {
      mailboxes.push_back(std::make_unique<ChunkMailbox>());
      services.push_back(std::make_unique<CollectiveService>(mailboxes[r].get(), (r + n - 1) % n));
      if (r < n - 1 || start_last) {
        ServerOptions so;
        so.listen_address = absl::StrCat("localhost:", (*ports)[r]);
        so.services = {services[r].get()};
        auto server = StartServer(so);
        EXPECT_TRUE(server.ok()) << server.status();
        servers.push_back(std::move(server->server));
      }
      GrpcRingOptions o = base;
      o.rank = r;
      auto t = GrpcRingTransport::Create(o, mailboxes[r].get());
      EXPECT_TRUE(t.ok());
      transports.push_back(std::move(*t));
    }
  }
  ~GrpcRing() {
    for (auto& s : servers) s->Shutdown(std::chrono::system_clock::now());
  }
  std::vector<RingTransport*> raw() {
    std::vector<RingTransport*> out;
    for (auto& t : transports) out.push_back(t.get());
    return out;
  }
  std::vector<std::string> addresses;
  std::vector<std::unique_ptr<ChunkMailbox>> mailboxes;
  std::vector<std::unique_ptr<CollectiveService>> services;
  std::vector<std::unique_ptr<grpc::Server>> servers;
  std::vector<std::unique_ptr<GrpcRingTransport>> transports;
};

TEST(RingAllReduceTest, RealGrpcOnFreePorts) {
  for (int n : {2, 3}) {
    // Chunks on the stream (at most kMaxStreamedChunkBytes) and by PushChunk calls.
    for (int64_t chunk_bytes : {int64_t{256} << 10, int64_t{2} << 20}) {
      GrpcRing ring(n);
      RingAllReduceOptions options;
      options.bucket_bytes = 4 << 20;  // 3 buckets for the 2.5M elements below
      options.chunk_bytes = chunk_bytes;
      options.timeout = absl::Seconds(20);
      RunAndCheck(ring.raw(), {0, 7, 2'500'000, 3}, options);
      RunAndCheck(ring.raw(), {1}, options, 1);
    }
  }
}

TEST(RingAllReduceTest, RealGrpcNamesTheWorkerThatIsNotThere) {
  GrpcRing ring(2, /*start_last=*/false);
  RingAllReduceOptions options;
  options.timeout = absl::Seconds(1);
  RingAllReduce r0(ring.transports[0].get(), options);
  std::vector<float> a(1000, 1.0f);
  const absl::Time start = absl::Now();
  absl::Status s = r0.AllReduceSum({absl::MakeSpan(a)});
  // A liveness bound (see ADeadPeerIsNamedWithinTheTimeout), not a speed one.
  EXPECT_LT(absl::Now() - start, absl::Seconds(15));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("worker 1 (" + ring.transports[0]->PeerName(1).substr(10)),
            std::string::npos)
      << s;
}

TEST(ChunkDataTest, PiecesThatSplitFloatsAddAndCopyExactly) {
  // 3000 floats (several staging blocks) cut into pieces of awkward byte lengths, as
  // gRPC's receive buffers cut a message.
  std::vector<float> values(3000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
  auto owner = std::make_shared<std::vector<float>>(values);
  const char* bytes = reinterpret_cast<const char*>(owner->data());
  const size_t total = owner->size() * sizeof(float);
  std::vector<absl::Span<const char>> pieces;
  const size_t lengths[] = {1, 3, 6, 4095, 1, 4097, 13};
  size_t at = 0;
  for (size_t k = 0; at < total; ++k) {
    const size_t len = std::min(lengths[k % 7], total - at);
    pieces.emplace_back(bytes + at, len);
    at += len;
  }
  const ChunkData chunk(std::move(pieces), owner);
  ASSERT_EQ(chunk.size(), values.size());
  EXPECT_EQ(chunk.ToVector(), values);
  std::vector<float> sums(values.size(), 0.5f);
  chunk.AddTo(absl::MakeSpan(sums));
  for (size_t i = 0; i < values.size(); ++i) ASSERT_EQ(sums[i], values[i] + 0.5f) << i;
  const ChunkData empty(std::vector<absl::Span<const char>>{}, nullptr);
  EXPECT_EQ(empty.size(), 0u);
  empty.AddTo(absl::Span<float>());
}

TEST(RingAllReduceTest, ProtobufPeerInteroperatesAndBadChunksAreRefused) {
  // The receiving service reads what the generated protobuf stub writes (the wire is
  // unchanged), and refuses chunks that are not whole floats or not from its neighbour.
  GrpcRing ring(2);
  auto stub = Collective::NewStub(CreateChannel(ring.addresses[1]));
  auto push = [&](int src, const std::string& data) {
    CollectiveChunk chunk;
    chunk.set_src_rank(src);
    chunk.set_step(4);
    chunk.set_round(1);
    chunk.set_data(data);
    grpc::ClientContext context;
    SetTimeout(&context, absl::Seconds(10));
    CollectiveChunkAck ack;
    return stub->PushChunk(&context, chunk, &ack);
  };
  const std::vector<float> floats = {1.5f, -2, 3};
  const std::string bytes(reinterpret_cast<const char*>(floats.data()), 12);
  ASSERT_TRUE(push(0, bytes).ok());
  auto got = ring.mailboxes[1]->Take(ChunkKey{4, 0, 1, 0}, absl::Seconds(5));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->ToVector(), floats);
  EXPECT_EQ(push(0, "12345").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(push(1, bytes).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(ring.mailboxes[1]->pending(), 0u);
}

TEST(RingAllReduceTest, ChunkStreamFilesEachChunkAndEndsAtTheFirstBadOne) {
  // The stream checks every message as PushChunk checks its one: a bad chunk ends the
  // stream with PushChunk's error, after the good ones before it are filed and before
  // anything after it is read.
  GrpcRing ring(2);
  auto stub = Collective::NewStub(CreateChannel(ring.addresses[1]));
  auto stream = [&](const std::vector<std::pair<int, std::string>>& chunks) {
    grpc::ClientContext context;
    SetTimeout(&context, absl::Seconds(10));
    CollectiveChunkAck ack;
    std::unique_ptr<grpc::ClientWriter<CollectiveChunk>> writer =
        stub->ChunkStream(&context, &ack);
    int32_t index = 0;
    for (const auto& [src, data] : chunks) {
      CollectiveChunk chunk;
      chunk.set_src_rank(src);
      chunk.set_step(7);
      chunk.set_chunk(index++);
      chunk.set_data(data);
      if (!writer->Write(chunk)) break;  // the server ended the stream
    }
    writer->WritesDone();
    return writer->Finish();
  };
  const std::vector<float> floats = {1.5f, -2, 3};
  const std::string bytes(reinterpret_cast<const char*>(floats.data()), 12);
  ASSERT_TRUE(stream({{0, bytes}, {0, bytes}}).ok());
  // Both filed by the time the stream's reply came.
  EXPECT_EQ(ring.mailboxes[1]->pending(), 2u);
  for (int32_t c : {0, 1}) {
    auto got = ring.mailboxes[1]->Take(ChunkKey{7, 0, 0, c}, absl::Seconds(5));
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->ToVector(), floats);
  }
  const grpc::Status torn = stream({{0, bytes}, {0, "12345"}, {0, bytes}});
  EXPECT_EQ(torn.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(torn.error_message().find("chunk of 5 bytes is not whole floats"), std::string::npos)
      << torn.error_message();
  EXPECT_TRUE(ring.mailboxes[1]->Take(ChunkKey{7, 0, 0, 0}, absl::Seconds(5)).ok());
  EXPECT_EQ(ring.mailboxes[1]->pending(), 0u);
  const grpc::Status stranger = stream({{1, bytes}});
  EXPECT_EQ(stranger.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(stranger.error_message().find("left neighbour is 0"), std::string::npos)
      << stranger.error_message();
  EXPECT_EQ(ring.mailboxes[1]->pending(), 0u);
}

TEST(RingAllReduceTest, CloseReturnsOnceTheNextRankFiledEveryStreamedChunk) {
  GrpcRing ring(2);
  const std::vector<float> values(100, 2.5f);
  for (int32_t c = 0; c < 50; ++c) {
    ASSERT_TRUE(ring.transports[0]->SendToNext(ChunkKey{3, 0, 0, c}, values, absl::Seconds(10))
                    .ok());
  }
  ASSERT_TRUE(ring.transports[0]->Close(absl::Seconds(10)).ok());
  EXPECT_EQ(ring.mailboxes[1]->pending(), 50u);
  auto last = ring.mailboxes[1]->Take(ChunkKey{3, 0, 0, 49}, absl::Seconds(1));
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(last->ToVector(), values);
  EXPECT_TRUE(absl::IsCancelled(
      ring.transports[0]->SendToNext(ChunkKey{3, 0, 0, 50}, values, absl::Seconds(1))));
  EXPECT_TRUE(ring.transports[0]->Close(absl::Seconds(1)).ok());  // idempotent
}

TEST(RingAllReduceTest, AStreamThePeerEndedIsReportedNamingItAndReopened) {
  // A sender posing as rank 2 of 4 whose next rank is ring member 1, which takes chunks
  // from rank 0 only: its stream is refused, and each send after that reports it.
  GrpcRing ring(2);
  GrpcRingOptions o;
  o.rank = 2;
  o.addresses = {ring.addresses[0], ring.addresses[0], ring.addresses[0], ring.addresses[1]};
  o.names = {"worker 0", "worker 1", "worker 2", "worker 3"};
  ChunkMailbox own;
  auto sender = GrpcRingTransport::Create(o, &own);
  ASSERT_TRUE(sender.ok()) << sender.status();
  const std::vector<float> values(10, 1.0f);
  for (int attempt = 0; attempt < 2; ++attempt) {
    // The first write of a stream may be taken before the receiver reads and refuses it.
    absl::Status status;
    for (int32_t c = 0; c < 100 && status.ok(); ++c) {
      status = (*sender)->SendToNext(ChunkKey{0, 0, 0, c}, values, absl::Seconds(10));
    }
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
    EXPECT_NE(status.message().find("worker 3 (" + ring.addresses[1] + ")"), std::string::npos)
        << status;
    EXPECT_NE(status.message().find("left neighbour is 0"), std::string::npos) << status;
  }
  EXPECT_EQ(ring.mailboxes[1]->pending(), 0u);
}

}  // namespace
}  // namespace pstrain
