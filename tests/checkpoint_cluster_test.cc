// Checkpoints end to end: a tiny job on an in-process cluster (chief, ps and workers as
// threads on real gRPC, as in in_process_cluster_test.cc) writes a checkpoint per epoch;
// restarted with --restore=latest onto 1 ps and then onto 3 ps (it ran on 2, its
// variables split in two), it continues with the next epoch from the checkpoint's
// weights; the export to safetensors is read back by a parser written here from the
// format's description and by a numpy reader written from its specification, and
// evaluate reproduces the chief's val_loss.

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "chief/chief_task.h"
#include "common/checkpoint/checkpoint.h"
#include "common/cluster_spec.h"
#include "deploy/local/free_port.h"
#include "deploy/local/local_cluster.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "ps_server/ps_task.h"
#include "tests/cluster_test_util.h"
#include "worker/worker_task.h"

namespace pstrain {
namespace {

namespace fs = std::filesystem;

std::string TempPath(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
}

// The tiny job with validation data, its variables split in two (so a checkpoint is
// reassembled from shards) and the Adam learning rate `learning_rate`.
std::string WriteJob(const std::string& name, const std::string& learning_rate) {
  std::ifstream in("tests/testdata/tiny_synthetic.json");
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json job = nlohmann::json::parse(text.str(), nullptr, false);
  EXPECT_FALSE(job.is_discarded());
  job["data"]["validation"] = {{"type", "synthetic"}, {"samples", 100}, {"features", 784},
                               {"classes", 10},       {"seed", 6}};
  job["placement"] = {{"strategy", "size_balanced"}, {"num_shards", 2}};
  job["compile"]["optimizer"]["config"]["learning_rate"] = std::stod(learning_rate);
  const std::string path = TempPath(name);
  std::ofstream(path) << job.dump(1);
  return path;
}

struct RunResult {
  int chief_exit = -1;
  std::string out;
};

// Runs `job_path` on 1 chief, `num_ps` ps and 2 workers as threads with the given
// checkpoint flags; every task must exit 0.
RunResult RunCluster(const std::string& job_path, int num_ps, const std::string& checkpoint_dir,
                     const std::string& restore, int epochs,
                     const std::function<void(ChiefOptions*)>& more_options = nullptr) {
  const int workers = 2;
  auto ports = PickFreePorts(1 + num_ps + workers);
  EXPECT_TRUE(ports.ok()) << ports.status();
  std::vector<std::pair<std::string, std::vector<std::string>>> cluster = {
      {"chief", {}}, {"ps", {}}, {"worker", {}}};
  for (int i = 0; ports.ok() && i < 1 + num_ps + workers; ++i) {
    cluster[i == 0 ? 0 : (i <= num_ps ? 1 : 2)].second.push_back(
        absl::StrCat("127.0.0.1:", (*ports)[i]));
  }
  const int n = 1 + num_ps + workers;
  std::vector<int> exit_codes(n, -1);
  std::vector<std::thread> tasks;
  for (int i = 0; i < num_ps; ++i) {
    tasks.emplace_back([&, i] {
      DaemonRuntime runtime(FastDaemonOptions(MakeTfConfig(cluster, "ps", i)));
      exit_codes[1 + i] = RunPsTask(&runtime);
    });
  }
  for (int i = 0; i < workers; ++i) {
    tasks.emplace_back([&, i] {
      DaemonRuntime runtime(FastDaemonOptions(MakeTfConfig(cluster, "worker", i)));
      exit_codes[1 + num_ps + i] = RunWorkerTask(&runtime, "cpu");
    });
  }
  ChiefOptions chief;
  chief.job_path = job_path;
  chief.steps_per_call = 5;
  chief.epochs_override = epochs;
  chief.checkpoint.dir = checkpoint_dir;
  chief.restore = restore;
  if (more_options) more_options(&chief);
  std::ostringstream out;
  RunResult result;
  DaemonRuntime chief_runtime(FastDaemonOptions(MakeTfConfig(cluster, "chief", 0)));
  result.chief_exit = RunChiefTask(chief, &chief_runtime, out);
  exit_codes[0] = result.chief_exit;
  for (std::thread& t : tasks) t.join();
  for (int i = 0; i < n; ++i) EXPECT_EQ(exit_codes[i], 0) << "task " << i << "\n" << out.str();
  result.out = out.str();
  return result;
}

std::unique_ptr<CheckpointReader> OpenOrDie(const std::string& path) {
  absl::StatusOr<std::unique_ptr<CheckpointReader>> reader = CheckpointReader::Open(path);
  EXPECT_TRUE(reader.ok()) << reader.status();
  return reader.ok() ? *std::move(reader) : nullptr;
}

// The mid-epoch checkpoints (each with its data position) under `dir`.
std::vector<std::unique_ptr<CheckpointReader>> MidEpochCheckpoints(const std::string& dir) {
  std::vector<std::unique_ptr<CheckpointReader>> found;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (!absl::StartsWith(entry.path().filename().string(), "ckpt-")) continue;
    std::unique_ptr<CheckpointReader> c = OpenOrDie(entry.path().string());
    if (c != nullptr && c->metadata().contains("data_position")) found.push_back(std::move(c));
  }
  return found;
}

std::string FirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The largest |a - b| over the model variables (not slots) both checkpoints hold.
double MaxVariableDifference(const CheckpointReader& a, const CheckpointReader& b) {
  double worst = 0;
  int compared = 0;
  for (const NamedTensor& t : a.tensors()) {
    if (t.name.find("/optimizer/") != std::string::npos) continue;
    absl::StatusOr<const Tensor*> other = b.Get(t.name);
    EXPECT_TRUE(other.ok()) << other.status();
    if (!other.ok()) return 1e9;
    EXPECT_EQ((*other)->shape(), t.tensor.shape()) << t.name;
    if ((*other)->shape() != t.tensor.shape()) return 1e9;
    for (int64_t i = 0; i < t.tensor.num_elements(); ++i) {
      worst = std::max(worst, std::fabs(double{t.tensor.data()[i]} - (*other)->data()[i]));
    }
    ++compared;
  }
  EXPECT_EQ(compared, 4);  // dense/kernel, dense/bias, dense_1/kernel, dense_1/bias
  return worst;
}

// Runs `command`, returns its stdout; EXPECTs exit status 0.
std::string RunCommand(const std::string& command) {
  std::string output;
  FILE* pipe = ::popen(command.c_str(), "r");
  EXPECT_NE(pipe, nullptr) << command;
  if (pipe == nullptr) return output;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, n);
  const int status = ::pclose(pipe);
  EXPECT_EQ(status, 0) << command << "\n" << output;
  return output;
}

// A safetensors file as the format describes it, read with plain byte reads: nothing
// of the export code is used.
struct ParsedSafetensors {
  uint64_t header_length = 0;
  nlohmann::json header;
  std::map<std::string, std::vector<int64_t>> shapes;
  std::map<std::string, std::vector<float>> values;
  std::map<uint64_t, uint64_t> spans;  // data_offsets, begin -> end
};

ParsedSafetensors ParseSafetensors(const std::string& path) {
  ParsedSafetensors parsed;
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_GE(bytes.size(), 8u);
  if (bytes.size() < 8) return parsed;
  for (int i = 7; i >= 0; --i) {
    parsed.header_length = (parsed.header_length << 8) | static_cast<unsigned char>(bytes[i]);
  }
  EXPECT_LE(8 + parsed.header_length, bytes.size());
  EXPECT_EQ((8 + parsed.header_length) % 8, 0u) << "data must start 8-byte aligned";
  parsed.header = nlohmann::json::parse(bytes.substr(8, parsed.header_length), nullptr, false);
  EXPECT_TRUE(parsed.header.is_object());
  if (!parsed.header.is_object()) return parsed;
  const size_t data_start = 8 + parsed.header_length;
  for (const auto& [name, entry] : parsed.header.items()) {
    if (name == "__metadata__") continue;
    EXPECT_EQ(entry["dtype"], "F32") << name;
    const uint64_t begin = entry["data_offsets"][0].get<uint64_t>();
    const uint64_t end = entry["data_offsets"][1].get<uint64_t>();
    EXPECT_LE(data_start + end, bytes.size()) << name;
    std::vector<int64_t> shape = entry["shape"].get<std::vector<int64_t>>();
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    EXPECT_EQ(end - begin, static_cast<uint64_t>(count) * 4) << name;
    std::vector<float> values(count);
    for (int64_t i = 0; i < count; ++i) {
      uint32_t bits = 0;
      for (int b = 3; b >= 0; --b) {
        bits = (bits << 8) | static_cast<unsigned char>(bytes[data_start + begin + 4 * i + b]);
      }
      std::memcpy(&values[i], &bits, 4);
    }
    parsed.shapes[name] = shape;
    parsed.values[name] = std::move(values);
    parsed.spans[begin] = end;
  }
  // The spec: the tensors' byte ranges are contiguous and cover the buffer, no hole and
  // no overlap (a reader may rely on it; safetensors' own does).
  uint64_t position = 0;
  for (const auto& [begin, end] : parsed.spans) {
    EXPECT_EQ(begin, position) << "a hole or an overlap before offset " << begin;
    position = end;
  }
  EXPECT_EQ(data_start + position, bytes.size()) << "data not covered to the file's end";
  return parsed;
}

TEST(CheckpointClusterTest, CheckpointsRestoreOntoOtherPsCountsExportAndEvaluate) {
  const std::string dir = TempPath("checkpoints");
  fs::remove_all(dir);
  const std::string job = WriteJob("job.json", "0.003");

  // (a) 2 epochs on 2 ps from an empty directory: --restore=latest starts fresh, saying so
  // in one line; one checkpoint per epoch, `latest` at the second.
  fs::create_directories(dir);
  testing::internal::CaptureStderr();
  RunResult first = RunCluster(job, /*num_ps=*/2, dir, "latest", /*epochs=*/2);
  const std::string first_log = testing::internal::GetCapturedStderr();
  ASSERT_EQ(first.chief_exit, 0) << first.out;
  int fresh_lines = 0;
  for (absl::string_view line : absl::StrSplit(first_log, '\n')) {
    if (absl::StrContains(line, "no checkpoint in " + dir + "; starting from")) ++fresh_lines;
    EXPECT_FALSE(absl::StrContains(line, "restored ")) << line;
  }
  EXPECT_EQ(fresh_lines, 1) << first_log;
  EXPECT_NE(first.out.find("Epoch 1/2"), std::string::npos) << first.out;
  const std::vector<double> first_losses = ParseEpochLosses(first.out);
  ASSERT_EQ(first_losses.size(), 2u) << first.out;
  std::vector<std::unique_ptr<CheckpointReader>> epoch_ckpts;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().filename().string().rfind("ckpt-", 0) == 0) {
      epoch_ckpts.push_back(OpenOrDie(entry.path().string()));
    }
  }
  ASSERT_EQ(epoch_ckpts.size(), 2u);
  std::sort(epoch_ckpts.begin(), epoch_ckpts.end(),
            [](const auto& a, const auto& b) { return a->epoch() < b->epoch(); });
  EXPECT_EQ(epoch_ckpts[0]->epoch(), 1);
  EXPECT_EQ(epoch_ckpts[1]->epoch(), 2);
  EXPECT_LT(epoch_ckpts[0]->step(), epoch_ckpts[1]->step());
  EXPECT_EQ(FirstLine(dir + "/latest"), fs::path(epoch_ckpts[1]->path()).filename().string());
  // Variables and Adam's slots, reassembled from the two shards of each.
  ASSERT_TRUE(epoch_ckpts[1]->Get("dense/kernel").ok());
  EXPECT_EQ((*epoch_ckpts[1]->Get("dense/kernel"))->shape(), (std::vector<int64_t>{784, 64}));
  ASSERT_TRUE(epoch_ckpts[1]->Get("dense/kernel/optimizer/momentum").ok());
  ASSERT_TRUE(epoch_ckpts[1]->Get("dense_1/bias/optimizer/velocity").ok());
  EXPECT_GT(epoch_ckpts[1]->metadata()["variables"]["dense/kernel"]["iterations"].get<int64_t>(),
            0);
  const std::unique_ptr<CheckpointReader> after_two = OpenOrDie(dir);
  ASSERT_NE(after_two, nullptr);

  // (b1) Restored onto 1 ps with a learning rate too small to move the weights: epoch 3
  // is the only one trained, and its checkpoint holds the restored weights (a fresh
  // model, or a wrong reassembly, would differ by far more).
  RunResult second = RunCluster(WriteJob("frozen.json", "1e-20"), /*num_ps=*/1, dir, "latest",
                                /*epochs=*/3);
  ASSERT_EQ(second.chief_exit, 0) << second.out;
  EXPECT_EQ(second.out.find("Epoch 1/3"), std::string::npos) << second.out;
  EXPECT_EQ(second.out.find("Epoch 2/3"), std::string::npos) << second.out;
  EXPECT_NE(second.out.find("Epoch 3/3"), std::string::npos) << second.out;
  const std::unique_ptr<CheckpointReader> after_three = OpenOrDie(dir);
  ASSERT_NE(after_three, nullptr);
  EXPECT_EQ(after_three->epoch(), 3);
  EXPECT_GT(after_three->step(), after_two->step());  // the global step continues
  EXPECT_EQ(MaxVariableDifference(*after_two, *after_three), 0.0);
  // The frozen epoch's training loss is about the loss the first run ended with.
  const std::vector<double> second_losses = ParseEpochLosses(second.out);
  ASSERT_EQ(second_losses.size(), 1u);
  EXPECT_LT(second_losses[0], first_losses[0]) << first.out << second.out;

  // (b2) Restored onto 3 ps (its variables now in other shards), the rate frozen again:
  // epoch 4's checkpoint, read back from the 3 ps, holds exactly the restored weights.
  RunResult third = RunCluster(WriteJob("frozen3.json", "1e-20"), /*num_ps=*/3, dir, "latest",
                               /*epochs=*/4);
  ASSERT_EQ(third.chief_exit, 0) << third.out;
  EXPECT_EQ(third.out.find("Epoch 3/4"), std::string::npos) << third.out;
  EXPECT_NE(third.out.find("Epoch 4/4"), std::string::npos) << third.out;
  const std::vector<double> third_losses = ParseEpochLosses(third.out);
  ASSERT_EQ(third_losses.size(), 1u);
  EXPECT_LT(third_losses[0], first_losses[0]) << first.out << third.out;
  const std::unique_ptr<CheckpointReader> last = OpenOrDie(dir);
  ASSERT_NE(last, nullptr);
  EXPECT_EQ(last->epoch(), 4);
  EXPECT_EQ(last->metadata()["num_ps"], 3);
  EXPECT_EQ(MaxVariableDifference(*after_three, *last), 0.0);
  // checkpoint.keep = 3: epochs 2, 3 and 4 are left.
  int left = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().filename().string().rfind("ckpt-", 0) == 0) ++left;
  }
  EXPECT_EQ(left, 3);
  EXPECT_FALSE(fs::exists(epoch_ckpts[0]->path()));

  // (c) safetensors, read back without the export code.
  const std::string out = TempPath("model.safetensors");
  RunCommand(absl::StrCat("tools/export_safetensors --checkpoint=", dir, " --out=", out));
  const ParsedSafetensors parsed = ParseSafetensors(out);
  EXPECT_EQ(parsed.values.size(), 4u);  // the model's variables, no optimizer slots
  EXPECT_EQ(parsed.header["__metadata__"]["step"], absl::StrCat(last->step()));
  for (const NamedTensor& t : last->tensors()) {
    if (t.name.find("/optimizer/") != std::string::npos) {
      EXPECT_FALSE(parsed.values.count(t.name)) << t.name;
      continue;
    }
    ASSERT_TRUE(parsed.values.count(t.name)) << t.name;
    EXPECT_EQ(parsed.shapes.at(t.name), t.tensor.shape()) << t.name;
    EXPECT_EQ(parsed.values.at(t.name),
              std::vector<float>(t.tensor.values().begin(), t.tensor.values().end()))
        << t.name;
  }
  // And by a numpy reader written from the format's specification alone
  // (testdata/load_safetensors.py, Debian's python3-numpy, which install_deps.sh installs):
  // it checks the offsets itself, and every tensor it loads equals, bit for bit, the
  // checkpoint's own copy written here as raw little-endian floats.
  const std::string raw_dir = TempPath("raw_tensors");
  fs::remove_all(raw_dir);
  fs::create_directories(raw_dir);
  int variables = 0;
  for (const NamedTensor& t : last->tensors()) {
    if (t.name.find("/optimizer/") != std::string::npos) continue;
    std::ofstream raw(raw_dir + "/" + absl::StrReplaceAll(t.name, {{"/", "__"}}) + ".raw",
                      std::ios::binary);
    for (float v : t.tensor.values()) {
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      const char le[4] = {static_cast<char>(bits), static_cast<char>(bits >> 8),
                          static_cast<char>(bits >> 16), static_cast<char>(bits >> 24)};
      raw.write(le, 4);
    }
    ++variables;
  }
  ASSERT_EQ(variables, 4);
  const std::string loaded = RunCommand(
      absl::StrCat("/usr/bin/python3 tests/testdata/load_safetensors.py ", out, " ", raw_dir));
  int equal = 0;
  for (absl::string_view line : absl::StrSplit(loaded, '\n', absl::SkipEmpty())) {
    if (absl::StartsWith(line, "equal ")) {
      ++equal;
      continue;
    }
    const std::vector<std::string> fields = absl::StrSplit(line, ' ');
    ASSERT_EQ(fields.size(), 3u) << line;
    absl::StatusOr<const Tensor*> t = last->Get(fields[0]);
    ASSERT_TRUE(t.ok()) << line;
    EXPECT_EQ(fields[1], "<f4") << line;
    std::vector<std::string> dims;
    for (int64_t d : (*t)->shape()) dims.push_back(absl::StrCat(d));
    EXPECT_EQ(fields[2], absl::StrJoin(dims, "x")) << line;
  }
  EXPECT_EQ(equal, 4) << loaded;

  // evaluate reproduces the chief's last val_loss and val_accuracy from the checkpoint.
  const std::string evaluated = RunCommand(absl::StrCat("tools/evaluate --checkpoint=", dir));
  EXPECT_NEAR(LastFigure(evaluated, "test loss"), LastFigure(third.out, "val_loss"), 1e-3)
      << evaluated << third.out;
  EXPECT_NEAR(LastFigure(evaluated, "test accuracy"), LastFigure(third.out, "val_accuracy"),
              1e-3)
      << evaluated << third.out;
}

// --restore=PATH that does not verify fails the chief at start, before any task is
// waited for; --restore=latest with an empty directory starts fresh.
// Checkpoints every 3 global steps record where the epoch in progress stands. Restored
// from one taken mid-way through epoch 2, a run trains only the rest of that epoch: it
// ends at exactly the global step of the uninterrupted run, and its epoch figures count
// every sample of the epoch (those before the checkpoint included).
TEST(CheckpointClusterTest, AMidEpochCheckpointResumesTheEpochAtItsDataPositions) {
  const std::string job = WriteJob("positions.json", "0.003");
  const std::string dir = TempPath("positions");
  fs::remove_all(dir);
  auto every_3_steps = [](ChiefOptions* chief) {
    chief->checkpoint.every_steps = 3;
    chief->checkpoint.keep = 100;
    chief->steps_per_call = 2;
  };
  RunResult whole = RunCluster(job, 2, dir, "none", 2, every_3_steps);
  ASSERT_EQ(whole.chief_exit, 0);
  std::unique_ptr<CheckpointReader> end = OpenOrDie(dir);
  ASSERT_NE(end, nullptr);
  // 400 samples in 2 shards of 200, batch 32: 7 steps per shard, 14 per epoch.
  EXPECT_EQ(end->step(), 28);
  // A checkpoint from inside epoch 2, with steps of it done.
  std::string middle;
  for (const std::unique_ptr<CheckpointReader>& c : MidEpochCheckpoints(dir)) {
    const nlohmann::json& position = c->metadata()["data_position"];
    if (position["epoch"] == 1 && position["steps"].get<int64_t>() > 0 &&
        c->step() < end->step()) {
      middle = c->path();
      EXPECT_EQ(position["next_step"].size(), 2u);
      EXPECT_EQ(c->step(), 14 + position["steps"].get<int64_t>());
      break;
    }
  }
  ASSERT_FALSE(middle.empty()) << "no mid-epoch checkpoint of epoch 2 in " << dir;
  const std::string resumed_dir = TempPath("positions_resumed");
  fs::remove_all(resumed_dir);
  RunResult rest = RunCluster(job, 2, resumed_dir, middle, 2, [](ChiefOptions* chief) {
    chief->steps_per_call = 2;
  });
  ASSERT_EQ(rest.chief_exit, 0);
  EXPECT_EQ(rest.out.find("Epoch 1/2"), std::string::npos) << rest.out;
  EXPECT_NE(rest.out.find("Epoch 2/2"), std::string::npos) << rest.out;
  std::unique_ptr<CheckpointReader> rest_end = OpenOrDie(resumed_dir);
  ASSERT_NE(rest_end, nullptr);
  EXPECT_EQ(rest_end->step(), end->step());
  EXPECT_EQ(rest_end->epoch(), 2);
}

// A time trigger (every millisecond: after every chunk) and live checkpoints, read while
// the workers push (no pause): both write mid-epoch checkpoints that verify and record
// where the epoch stood, and the job's end is unchanged.
TEST(CheckpointClusterTest, TimedAndLiveCheckpointsAreWrittenMidEpoch) {
  const std::string job = WriteJob("timed.json", "0.003");
  for (const bool consistent : {true, false}) {
    SCOPED_TRACE(consistent ? "consistent" : "live");
    const std::string dir = TempPath(consistent ? "timed_consistent" : "timed_live");
    fs::remove_all(dir);
    RunResult run = RunCluster(job, 2, dir, "none", 2, [consistent](ChiefOptions* chief) {
      chief->checkpoint.every = absl::Milliseconds(1);
      chief->consistent_checkpoints = consistent;
      chief->checkpoint.keep = 100;
      chief->steps_per_call = 2;
    });
    ASSERT_EQ(run.chief_exit, 0);
    const std::vector<std::unique_ptr<CheckpointReader>> mid = MidEpochCheckpoints(dir);
    EXPECT_GE(mid.size(), 2u);
    for (const auto& c : mid) {
      const nlohmann::json& position = c->metadata()["data_position"];
      EXPECT_EQ(position["next_step"].size(), 2u) << c->path();
      EXPECT_LT(position["epoch"].get<int>(), 2) << c->path();
    }
    std::unique_ptr<CheckpointReader> end = OpenOrDie(dir);
    ASSERT_NE(end, nullptr);
    EXPECT_EQ(end->step(), 28);
    EXPECT_EQ(end->epoch(), 2);
  }
}

// The chief of the tiny job in a 1 ps / 1 worker cluster on free ports, for checks that
// fail before any task is waited for.
struct TinyChief {
  DaemonOptions daemon;
  ChiefOptions chief;
};

TinyChief ChiefOfTinyCluster() {
  auto ports = PickFreePorts(3);
  EXPECT_TRUE(ports.ok()) << ports.status();
  const std::vector<int> port = ports.ok() ? *ports : std::vector<int>{0, 0, 0};
  const std::vector<std::pair<std::string, std::vector<std::string>>> cluster = {
      {"chief", {absl::StrCat("127.0.0.1:", port[0])}},
      {"ps", {absl::StrCat("127.0.0.1:", port[1])}},
      {"worker", {absl::StrCat("127.0.0.1:", port[2])}}};
  TinyChief tiny;
  tiny.daemon = FastDaemonOptions(MakeTfConfig(cluster, "chief", 0));
  tiny.chief.job_path = "tests/testdata/tiny_synthetic.json";
  return tiny;
}

TEST(CheckpointClusterTest, BadRestorePathFailsAtStart) {
  TinyChief tiny = ChiefOfTinyCluster();
  tiny.chief.restore = TempPath("no_such_checkpoint");
  DaemonRuntime runtime(tiny.daemon);
  std::ostringstream out;
  EXPECT_EQ(RunChiefTask(tiny.chief, &runtime, out), 2);
}

// A sync or bounded-staleness wait at the ps longer than the RPC deadline would make
// workers take a slow step for a dead ps: the chief refuses it at start (exit 2).
TEST(CheckpointClusterTest, AConsistencyTimeoutBeyondTheRpcDeadlineFailsAtStart) {
  TinyChief tiny = ChiefOfTinyCluster();
  tiny.daemon.rpc_timeout = absl::Seconds(2);  // the default timeout_ms is 5 s
  tiny.chief.consistency_override = "sync";
  DaemonRuntime runtime(tiny.daemon);
  std::ostringstream out;
  EXPECT_EQ(RunChiefTask(tiny.chief, &runtime, out), 2);
}

}  // namespace
}  // namespace pstrain
