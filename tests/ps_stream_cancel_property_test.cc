// A property test of PushPullStream's cancel points (#27, defect 1), against a real
// ps_server process over real gRPC and over a raw HTTP/2 connection of the test's own.
//
// Each stream pushes a gradient that is 1 at an element of its own of the variable "v"
// (plain SGD, learning rate 1, from zeros) and 0 elsewhere, cut into chunks of random
// sizes (the first message carrying data or not), and is cut at one of the stream's
// points in turn: before the header, after the header, after a random chunk, after the
// commit chunk without the half-close, with the half-close and the reset in one packet,
// after the half-close before the reply (after a random pause), after the reply's
// headers, or not at all. So the variable says exactly which streams were applied, and
// how often: element k is -1 when stream k was applied once, 0 when never, and the
// version counts them all. After every stream the test asserts:
// - a stream the client was told failed before the ps acknowledged it changed nothing;
//   the ps's acknowledgement is the reply's headers, which it sends only once the stream
//   ended cleanly with its commit and only then applies (ps_service.h): a raw client
//   that resets and then reads up to the answer to a PING learns whether they came;
// - a stream whose reply headers came (read to its end or cancelled after them) was
//   applied exactly once;
// - a gRPC client that cancels after its half-close cannot read the headers any more:
//   it is told CANCELLED (or OK, if the answer beat the cancel), and its retry with the
//   same request id ends OK with the stream applied exactly once, never twice.
// The cut kinds come in turn; the chunking, the chunk cut, the pauses and the order
// are random, from a seed printed at the start (PSTRAIN_TEST_SEED repeats a run).

#include <signal.h>
#include <sys/types.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/rpc/call_mac.h"
#include "common/rpc/client_security.h"
#include "common/rpc/grpc_util.h"
#include "deploy/local/local_cluster.h"
#include "deploy/local/process_group.h"
#include "grpcpp/impl/rpc_method.h"
#include "grpcpp/support/sync_stream.h"
#include "gtest/gtest.h"
#include "proto/ps.grpc.pb.h"
#include "ps_server/rpc/raw_http2.h"
#include "tests/cluster_test_util.h"

namespace pstrain {
namespace {

constexpr char kStreamMethod[] = "/pstrain.ParameterServer/PushPullStream";
// Streams per client kind; each pushes to an element of its own.
constexpr int kStreamsPerClient = 120;
constexpr int kElements = 2 * kStreamsPerClient;

std::string JobToken() {
  const char* token = std::getenv(kAuthTokenEnvironmentVariable);
  return token != nullptr ? token : "";
}

uint64_t Seed() {
  uint64_t seed = 0;
  const char* given = std::getenv("PSTRAIN_TEST_SEED");
  if (given != nullptr && absl::SimpleAtoi(given, &seed)) return seed;
  return std::random_device()();
}

enum class Cut {
  kBeforeHeader,     // opened, nothing sent
  kAfterHeader,      // the first message only
  kAfterChunk,       // some messages, not the commit
  kAfterCommit,      // every message, the commit too, without the half-close
  kWithHalfClose,    // the half-close and the reset in one packet (raw client only)
  kAfterHalfClose,   // half-closed, then (after a random pause) cancelled
  kAfterReply,       // half-closed, the reply's headers read, then cancelled
  kClean,            // half-closed and read to its end
};
constexpr Cut kCuts[] = {Cut::kBeforeHeader,  Cut::kAfterHeader,    Cut::kAfterChunk,
                         Cut::kAfterCommit,   Cut::kWithHalfClose,  Cut::kAfterHalfClose,
                         Cut::kAfterReply,    Cut::kClean};

const char* CutName(Cut cut) {
  switch (cut) {
    case Cut::kBeforeHeader: return "before the header";
    case Cut::kAfterHeader: return "after the header";
    case Cut::kAfterChunk: return "after a chunk";
    case Cut::kAfterCommit: return "after the commit chunk, before the half-close";
    case Cut::kWithHalfClose: return "with the half-close, in one packet";
    case Cut::kAfterHalfClose: return "after the half-close, before the reply";
    case Cut::kAfterReply: return "after the reply's headers";
    case Cut::kClean: return "never (read to its end)";
  }
  return "?";
}

// The serialized messages of a push of e_k to "v": the header (with the first chunk, or
// alone), then chunks of random sizes, the last with the commit.
std::vector<std::string> PushMessages(int k, uint64_t request_id, std::mt19937_64& rng) {
  std::vector<float> gradient(kElements, 0.0f);
  gradient[k] = 1.0f;
  const std::string bytes(reinterpret_cast<const char*>(gradient.data()),
                          gradient.size() * sizeof(float));
  PushPullChunkRequest header;
  PushRequest* push = header.mutable_push();
  push->set_request_id(request_id);
  push->set_worker("worker 0");
  Gradient* g = push->add_gradients();
  g->set_name("v");
  g->mutable_gradient()->set_dtype(DT_FLOAT);
  g->mutable_gradient()->add_shape(kElements);
  std::vector<std::string> messages;
  const bool header_alone = rng() % 2 == 0;
  if (header_alone) messages.push_back(header.SerializeAsString());
  // Chunks of 1 byte up to the whole tensor; odd sizes split floats.
  const size_t largest[] = {7, 64, bytes.size()};
  const size_t most = largest[rng() % 3];
  for (size_t offset = 0; offset < bytes.size();) {
    const size_t size = std::min<size_t>(1 + rng() % most, bytes.size() - offset);
    PushPullChunkRequest chunk = messages.empty() ? header : PushPullChunkRequest();
    chunk.set_tensor(0);
    chunk.set_offset(static_cast<int64_t>(offset));
    chunk.set_data(bytes.substr(offset, size));
    offset += size;
    chunk.set_commit(offset == bytes.size());
    messages.push_back(chunk.SerializeAsString());
  }
  return messages;
}

// Between a half-close and the cancel: none, up to 0.2 ms or up to 2 ms (the ps
// acknowledges a stream some 0.1-1 ms after its half-close).
absl::Duration Pause(std::mt19937_64& rng) {
  switch (rng() % 3) {
    case 0: return absl::ZeroDuration();
    case 1: return absl::Microseconds(rng() % 200);
    default: return absl::Microseconds(rng() % 2000);
  }
}

// How many messages a stream cut before its half-close sends.
size_t MessagesBefore(Cut cut, size_t total, std::mt19937_64& rng) {
  switch (cut) {
    case Cut::kBeforeHeader: return 0;
    case Cut::kAfterHeader: return 1;
    // Not the commit; with fewer than three messages, the header's.
    case Cut::kAfterChunk: return total < 3 ? 1 : 2 + rng() % (total - 2);
    default: return total;
  }
}

// A call's MAC as worker 0 (or chief 0), for the raw client and the chief's calls.
std::vector<std::pair<std::string, std::string>> CallMetadata(const std::string& claim,
                                                              const std::string& method) {
  const int64_t time_micros = absl::ToUnixMicros(absl::Now());
  const std::string nonce = NewCallNonce();
  return {{kIdentityMetadataKey, claim},
          {kTimeMetadataKey, absl::StrCat(time_micros)},
          {kNonceMetadataKey, nonce},
          {kMacMetadataKey, CallMac(JobToken(), method, claim, time_micros, nonce)}};
}

class StreamCancelPropertyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_GE(JobToken().size(), 16u) << "the suite sets PSTRAIN_AUTH_TOKEN (.bazelrc)";
    const auto cluster = LoopbackCluster(1, 1);
    address_ = cluster[1].second[0];
    port_ = std::stoi(address_.substr(address_.rfind(':') + 1));
    // No chief runs: the ps serves while it waits to register.
    ASSERT_TRUE(group_
                    .Start({"ps0",
                            "ps_server/ps_server",
                            {"--register_timeout=10m"},
                            {{"TF_CONFIG", MakeTfConfig(cluster, "ps", 0)}}})
                    .ok());
    absl::StatusOr<pid_t> pid = group_.Pid("ps0");
    ASSERT_TRUE(pid.ok()) << pid.status();
    pid_ = *pid;
    wait_ = std::thread([this] { run_ = CollectRun(group_, absl::Minutes(10), absl::Seconds(5)); });
    chief_ = ParameterServer::NewStub(
        grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
    // The worker's channel checks the ps's proof, as a worker's does.
    ClientSecurity worker;
    worker.token = JobToken();
    worker.identity = {Role::kWorker, 0};
    worker.require_server_proof = true;
    SetClientSecurity(worker);
    worker_channel_ = CreateChannel(address_);

    CreateVariablesRequest create;
    VariableDef* v = create.add_variables();
    v->set_name("v");
    v->mutable_initial_value()->set_dtype(DT_FLOAT);
    v->mutable_initial_value()->add_shape(kElements);
    v->mutable_initial_value()->set_content(std::string(kElements * sizeof(float), '\0'));
    create.mutable_optimizer()->set_name("sgd");
    create.mutable_optimizer()->set_learning_rate(1.0f);
    grpc::Status created;
    for (int i = 0; i < 300; ++i) {
      grpc::ClientContext context;
      ChiefContext("CreateVariables", &context);
      CreateVariablesResponse response;
      created = chief_->CreateVariables(&context, create, &response);
      if (created.error_code() != grpc::StatusCode::UNAVAILABLE) break;
      absl::SleepFor(absl::Milliseconds(100));
    }
    ASSERT_TRUE(created.ok()) << created.error_message();
  }

  void TearDown() override {
    if (pid_ > 0) kill(-pid_, SIGKILL);
    if (wait_.joinable()) wait_.join();
  }

  void ChiefContext(const std::string& method, grpc::ClientContext* context) {
    SetTimeout(context, absl::Seconds(30));
    for (const auto& [key, value] :
         CallMetadata("chief-0", absl::StrCat("/pstrain.ParameterServer/", method))) {
      context->AddMetadata(key, value);
    }
  }

  // "v" as the ps holds it now.
  bool PullV(std::vector<float>* value, int64_t* version) {
    PullRequest request;
    request.add_names("v");
    PullResponse response;
    grpc::ClientContext context;
    ChiefContext("Pull", &context);
    const grpc::Status status = chief_->Pull(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    if (!status.ok() || response.values_size() != 1) return false;
    const std::string& content = response.values(0).content();
    value->assign(content.size() / sizeof(float), 0.0f);
    std::memcpy(value->data(), content.data(), value->size() * sizeof(float));
    *version = response.versions(0);
    return true;
  }

  // Asserts that "v" shows exactly the streams in applied_ (waiting, for a bounded time,
  // for the ps to apply the last of them: it applies after it sent the reply's headers).
  void ExpectExactlyTheAppliedStreams(const std::string& after) {
    std::vector<float> value;
    int64_t version = -1;
    const absl::Time give_up = absl::Now() + absl::Seconds(30);
    do {
      ASSERT_TRUE(PullV(&value, &version));
      if (version >= applied_total_) break;
      absl::SleepFor(absl::Milliseconds(2));
    } while (absl::Now() < give_up);
    EXPECT_EQ(version, applied_total_) << after;
    ASSERT_EQ(value.size(), static_cast<size_t>(kElements));
    for (int k = 0; k < kElements; ++k) {
      EXPECT_EQ(value[k], -static_cast<float>(applied_[k]))
          << "stream " << k << " (cut " << CutName(cut_of_[k]) << ", " << how_[k]
          << ") was applied " << -value[k] << " times, expected " << applied_[k] << "; "
          << after;
    }
  }

  // One stream over gRPC, cut at `cut`; records what it must have done.
  void GrpcStream(int k, Cut cut, std::mt19937_64& rng) {
    const uint64_t request_id = rng();
    const std::vector<std::string> messages = PushMessages(k, request_id, rng);
    grpc::ClientContext context;
    SetTimeout(&context, absl::Seconds(30));
    const grpc::internal::RpcMethod method(kStreamMethod,
                                           grpc::internal::RpcMethod::BIDI_STREAMING);
    using Stream = grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>;
    std::unique_ptr<Stream> stream(
        grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
            worker_channel_.get(), method, &context));
    auto write = [&](size_t i, bool last) {
      grpc::Slice slice(messages[i]);
      grpc::ByteBuffer buffer(&slice, 1);
      return last ? stream->Write(buffer, grpc::WriteOptions().set_last_message()) : stream->Write(buffer);
    };
    auto drain = [&] {
      grpc::ByteBuffer ignored;
      while (stream->Read(&ignored)) {
      }
      return stream->Finish();
    };
    cut_of_[k] = cut;
    if (cut == Cut::kClean || cut == Cut::kAfterHalfClose || cut == Cut::kAfterReply) {
      for (size_t i = 0; i < messages.size(); ++i) {
        ASSERT_TRUE(write(i, i + 1 == messages.size())) << "stream " << k;
      }
      if (cut == Cut::kClean) {
        ReadCleanReply(k, stream.get());
        return;
      }
      if (cut == Cut::kAfterReply) {
        stream->WaitForInitialMetadata();  // the ps's acknowledgement: it applies now
        context.TryCancel();
        const grpc::Status status = drain();
        how_[k] = absl::StrCat("told ", status.error_code());
        Applied(k);
        return;
      }
      absl::SleepFor(Pause(rng));
      context.TryCancel();
      const grpc::Status status = drain();
      how_[k] = absl::StrCat("told ", status.error_code());
      if (!status.ok()) {
        // It cannot tell whether the ps acknowledged: it tries again, as a worker's
        // client does, with the same request id. Either way, once in all.
        EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED) << status.error_message();
        how_[k] += ", retried";
        grpc::ClientContext retry_context;
        SetTimeout(&retry_context, absl::Seconds(30));
        std::unique_ptr<Stream> retry(
            grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::
                Create(worker_channel_.get(), method, &retry_context));
        for (size_t i = 0; i < messages.size(); ++i) {
          grpc::Slice slice(messages[i]);
          grpc::ByteBuffer buffer(&slice, 1);
          ASSERT_TRUE(i + 1 == messages.size() ? retry->Write(buffer, grpc::WriteOptions().set_last_message())
                                               : retry->Write(buffer));
        }
        grpc::ByteBuffer ignored;
        while (retry->Read(&ignored)) {
        }
        const grpc::Status retried = retry->Finish();
        ASSERT_TRUE(retried.ok()) << "the retry of stream " << k << ": "
                                  << retried.error_message();
      }
      Applied(k);
      return;
    }
    const size_t sent = MessagesBefore(cut, messages.size(), rng);
    for (size_t i = 0; i < sent; ++i) ASSERT_TRUE(write(i, false)) << "stream " << k;
    context.TryCancel();
    const grpc::Status status = drain();
    how_[k] = absl::StrCat(sent, " of ", messages.size(), " messages, told ",
                           status.error_code());
    EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED)
        << "stream " << k << " cut " << CutName(cut) << ": " << status.error_message();
  }

  // The reply of a stream that ended cleanly: its header's version counts this push and
  // every one before it, and its values are "v" with exactly those applied.
  void ReadCleanReply(int k, grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream) {
    std::vector<std::string> replies;
    grpc::ByteBuffer buffer;
    while (stream->Read(&buffer)) {
      std::vector<grpc::Slice> slices;
      ASSERT_TRUE(buffer.Dump(&slices).ok());
      std::string bytes;
      for (const grpc::Slice& s : slices) {
        bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
      }
      replies.push_back(std::move(bytes));
    }
    const grpc::Status status = stream->Finish();
    ASSERT_TRUE(status.ok()) << "stream " << k << " read to its end: " << status.error_message();
    how_[k] = "told OK";
    Applied(k);
    ASSERT_FALSE(replies.empty());
    std::string content;
    int64_t version = -1;
    for (size_t i = 0; i < replies.size(); ++i) {
      PushPullChunkResponse reply;
      ASSERT_TRUE(reply.ParseFromString(replies[i]));
      if (i == 0) {
        ASSERT_EQ(reply.pull().versions_size(), 1);
        version = reply.pull().versions(0);
      }
      ASSERT_EQ(reply.offset(), static_cast<int64_t>(content.size()));
      content += reply.data();
    }
    EXPECT_EQ(version, applied_total_) << "stream " << k;
    ASSERT_EQ(content.size(), kElements * sizeof(float));
    std::vector<float> value(kElements);
    std::memcpy(value.data(), content.data(), content.size());
    for (int e = 0; e < kElements; ++e) {
      EXPECT_EQ(value[e], -static_cast<float>(applied_[e])) << "element " << e
                                                             << " in stream " << k << "'s reply";
    }
  }

  // One stream over raw HTTP/2, cut at `cut`.
  void RawStream(int k, Cut cut, std::mt19937_64& rng) {
    const uint64_t request_id = rng();
    const std::vector<std::string> messages = PushMessages(k, request_id, rng);
    absl::StatusOr<std::unique_ptr<RawGrpcCall>> call =
        RawGrpcCall::Start(port_, kStreamMethod, CallMetadata("worker-0", kStreamMethod));
    ASSERT_TRUE(call.ok()) << call.status();
    cut_of_[k] = cut;
    RawFrameOutcome outcome;
    if (cut == Cut::kClean) {
      ASSERT_TRUE((*call)->Send(messages, /*half_close=*/true));
      outcome = (*call)->WaitForEnd(absl::Seconds(30));
      how_[k] = outcome.how;
      ASSERT_EQ(outcome.how, "trailers grpc-status 0") << "stream " << k;
      ASSERT_TRUE(outcome.initial_metadata);
      Applied(k);
      return;
    }
    if (cut == Cut::kWithHalfClose) {
      ASSERT_TRUE((*call)->Send(messages, /*half_close=*/true, /*reset=*/true));
      outcome = (*call)->ResetAndSync(absl::Seconds(30));
    } else if (cut == Cut::kAfterHalfClose || cut == Cut::kAfterReply) {
      ASSERT_TRUE((*call)->Send(messages, /*half_close=*/true));
      if (cut == Cut::kAfterReply) {
        ASSERT_TRUE((*call)->WaitForHeaders(absl::Seconds(30)).initial_metadata)
            << "stream " << k << ": no reply headers";
      } else {
        absl::SleepFor(Pause(rng));
      }
      outcome = (*call)->ResetAndSync(absl::Seconds(30));
    } else {
      const size_t sent = MessagesBefore(cut, messages.size(), rng);
      ASSERT_TRUE((*call)->Send({messages.begin(), messages.begin() + sent}, false));
      outcome = (*call)->ResetAndSync(absl::Seconds(30));
    }
    ASSERT_TRUE(outcome.stream_ended) << "stream " << k << ": the ps answered no PING";
    how_[k] = absl::StrCat(outcome.how, outcome.initial_metadata ? ", reply headers came" : "");
    // Only the reply's headers tell the client the push is applied; with the reset in
    // the half-close's packet, or before it, they never come.
    if (cut != Cut::kAfterHalfClose && cut != Cut::kAfterReply) {
      EXPECT_FALSE(outcome.initial_metadata) << "stream " << k << " cut " << CutName(cut);
    }
    if (outcome.initial_metadata) Applied(k);
  }

  void Applied(int k) {
    ++applied_[k];
    ++applied_total_;
  }

  ProcessGroup group_;
  ProcessRun run_;
  std::thread wait_;
  pid_t pid_ = -1;
  std::string address_;
  int port_ = 0;
  std::unique_ptr<ParameterServer::Stub> chief_;
  std::shared_ptr<grpc::Channel> worker_channel_;
  // By element (stream): how often it must have been applied, its cut, what it was told.
  std::vector<int> applied_ = std::vector<int>(kElements, 0);
  int64_t applied_total_ = 0;
  std::vector<Cut> cut_of_ = std::vector<Cut>(kElements, Cut::kClean);
  std::vector<std::string> how_ = std::vector<std::string>(kElements);
};

TEST_F(StreamCancelPropertyTest, StreamsToldTheyFailedChangeNothingAndCleanOnesApplyOnce) {
  const uint64_t seed = Seed();
  std::cout << "PSTRAIN_TEST_SEED=" << seed << std::endl;
  std::mt19937_64 rng(seed);
  // Streams 0..n-1 over gRPC, n..2n-1 raw, interleaved in a random order; the cut kinds
  // in turn within each client.
  std::vector<int> order(kElements);
  for (int k = 0; k < kElements; ++k) order[k] = k;
  std::shuffle(order.begin(), order.end(), rng);
  int counts[8] = {};
  for (int k : order) {
    const bool raw = k >= kStreamsPerClient;
    const int index = raw ? k - kStreamsPerClient : k;
    Cut cut = kCuts[index % 8];
    // gRPC's client cannot put a reset in the half-close's packet.
    if (!raw && cut == Cut::kWithHalfClose) cut = Cut::kAfterHalfClose;
    ++counts[static_cast<int>(cut)];
    if (raw) {
      RawStream(k, cut, rng);
    } else {
      GrpcStream(k, cut, rng);
    }
    if (HasFatalFailure()) return;
    ExpectExactlyTheAppliedStreams(absl::StrCat("after stream ", k, " (", raw ? "raw" : "gRPC",
                                                ", cut ", CutName(cut), ": ", how_[k], ")"));
    if (HasFailure()) return;
  }
  // A push applied late, after its stream was found not applied, shows now.
  absl::SleepFor(absl::Seconds(1));
  ExpectExactlyTheAppliedStreams("at the end");
  int applied_after_half_close = 0;
  for (int k = 0; k < kElements; ++k) {
    if (cut_of_[k] == Cut::kAfterHalfClose) applied_after_half_close += applied_[k];
  }
  std::cout << applied_total_ << " of " << kElements << " streams applied ("
            << applied_after_half_close << " of " << counts[static_cast<int>(Cut::kAfterHalfClose)]
            << " cancelled after the half-close)" << std::endl;
  // The ps is still the same process, and serves.
  std::vector<float> value;
  int64_t version = 0;
  EXPECT_TRUE(PullV(&value, &version));
}

}  // namespace
}  // namespace pstrain
