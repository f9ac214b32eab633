// What reads a sharded (format 2) checkpoint from its files, in bounded memory: the
// file-backed evaluation (ps_server/client/checkpoint_evaluation.h) against the whole
// weights, tools/evaluate and tools/export_safetensors as processes on a 100,000-row and a
// 2,000,000-row x 64 table (their peak resident memory, VmHWM as each reports it, must not
// grow with the table), and the evaluator task (the chief binary under TF_CONFIG's
// "evaluator") on a folder with a corrupt checkpoint before a good final one.

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint.h"
#include "common/checkpoint/keras_import.h"
#include "common/checkpoint/keras_weights_h5.h"
#include "common/checkpoint/zip_archive.h"
#include "common/checkpoint/safetensors.h"
#include "common/checkpoint/shard_files.h"
#include "common/math/cpu_backend.h"
#include "common/model/job_spec.h"
#include "common/model/model.h"
#include "common/data/data_spec.h"
#include "common/training/evaluator.h"
#include "deploy/local/free_port.h"
#include "deploy/local/process_group.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "ps_server/client/checkpoint_evaluation.h"
#include "tests/cluster_test_util.h"
#include "tests/zipf_checkpoint.h"

extern char** environ;

namespace pstrain {
namespace {

constexpr int64_t kMiB = 1 << 20;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// One run of a binary as a child process: its exit and output.
struct ChildRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

ChildRun RunChild(const std::string& binary, const std::vector<std::string>& args,
                  const std::vector<std::string>& extra_env = {}) {
  ChildRun run;
  const std::string dir = FreshTestDir("child_output");
  const std::string out_path = dir + "/out";
  const std::string err_path = dir + "/err";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  std::vector<std::string> argv_strings = {binary};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_strings) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_strings = extra_env;
  for (char** e = environ; *e != nullptr; ++e) env_strings.push_back(*e);
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, binary.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  EXPECT_EQ(spawned, 0) << binary;
  if (spawned != 0) return run;
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  run.out = ReadAll(out_path);
  run.err = ReadAll(err_path);
  return run;
}

// The peak resident memory a tool run with --print_peak_memory printed (its own VmHWM:
// a parent's wait4 ru_maxrss would also count the parent's memory, which a child spawned
// with posix_spawn's shared address space inherits at exec); 0 when it printed none.
int64_t PrintedPeakMemory(const std::string& err) {
  const std::string line = FirstLineWith(err, "peak resident memory: ");
  int64_t bytes = 0;
  if (line.empty()) return 0;
  std::istringstream(line.substr(line.find(": ") + 2)) >> bytes;
  return bytes;
}

// "...: test loss: 0.4082 - test accuracy: 0.8552 - ..." or the evaluator's
// "...: loss: 0.4082 - accuracy: 0.8552 - ...": the two figures as printed.
std::string PrintedFigures(const std::string& line) {
  const size_t loss = line.find("loss: ");
  const size_t accuracy = line.find("accuracy: ");
  if (loss == std::string::npos || accuracy == std::string::npos) return "(none in: " + line + ")";
  return line.substr(loss + 6, 6) + " " + line.substr(accuracy + 10, 6);
}

// The whole-weights evaluation of a checkpoint, as the tools did before they read files.
EvaluationResult EvaluateWhole(const CheckpointReader& checkpoint) {
  absl::StatusOr<JobSpec> job = ParseJobSpec(checkpoint.job_spec().dump(), ".");
  EXPECT_TRUE(job.ok()) << job.status();
  std::unique_ptr<Backend> backend = CreateCpuBackend();
  absl::StatusOr<std::unique_ptr<Model>> model = Model::FromKerasJson(job->model, backend.get());
  EXPECT_TRUE(model.ok()) << model.status();
  EXPECT_TRUE((*model)->SetLoss(job->loss).ok());
  std::vector<Tensor> weights;
  for (const VariableSpec& spec : (*model)->variables()) {
    absl::StatusOr<const Tensor*> t = checkpoint.Get(spec.name);
    EXPECT_TRUE(t.ok()) << t.status();
    weights.push_back(**t);
  }
  absl::StatusOr<Dataset> data =
      LoadJobDataset((*job->data)["validation"], ".", "data.validation", job->one_hot_labels);
  EXPECT_TRUE(data.ok()) << data.status();
  absl::StatusOr<EvaluationResult> result =
      EvaluateOn(model->get(), weights, *data, kCheckpointEvaluationBatch);
  EXPECT_TRUE(result.ok()) << result.status();
  return *result;
}

// Flips one byte of the table's rows in shard file `file` of checkpoint `path`.
void CorruptTable(const std::string& path, const std::string& file) {
  ASSERT_TRUE(FlipByte(path + "/" + file, 100, 0x5a)) << path << "/" << file;
}

TEST(CheckpointFilesTest, FromTheFilesTheFiguresAreThoseOfTheWholeWeights) {
  const std::string root = FreshTestDir("files_figures");
  ZipfCheckpointSpec spec;
  spec.rows = 20000;
  spec.num_files = 3;
  absl::StatusOr<std::string> path = WriteZipfCheckpoint(root, spec);
  ASSERT_TRUE(path.ok()) << path.status();
  absl::StatusOr<std::unique_ptr<CheckpointReader>> files =
      CheckpointReader::Open(*path, {/*load_sharded_tensors=*/false});
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_NE((*files)->sharded_manifest(), nullptr);
  absl::StatusOr<std::unique_ptr<CheckpointReader>> whole = CheckpointReader::Open(*path);
  ASSERT_TRUE(whole.ok()) << whole.status();

  absl::StatusOr<EvaluationResult> by_rows = EvaluateCheckpoint(**files, "test");
  ASSERT_TRUE(by_rows.ok()) << by_rows.status();
  const EvaluationResult reference = EvaluateWhole(**whole);
  EXPECT_EQ(by_rows->samples, reference.samples);
  EXPECT_DOUBLE_EQ(by_rows->loss, reference.loss);
  EXPECT_DOUBLE_EQ(by_rows->accuracy, reference.accuracy);

  // Rows read one by one are the whole table's.
  absl::StatusOr<std::unique_ptr<ShardRowReader>> rows =
      ShardRowReader::Open(*path, *(*files)->sharded_manifest(), "embedding/embeddings");
  ASSERT_TRUE(rows.ok()) << rows.status();
  const std::vector<int64_t> ids = {19999, 0, 6666, 6667, 13333, 4096, 4095};
  std::vector<float> got(ids.size() * spec.width);
  ASSERT_TRUE((*rows)->ReadRows(ids, got.data()).ok());
  absl::StatusOr<const Tensor*> table = (*whole)->Get("embedding/embeddings");
  ASSERT_TRUE(table.ok());
  for (size_t i = 0; i < ids.size(); ++i) {
    for (int64_t c = 0; c < spec.width; ++c) {
      ASSERT_EQ(got[i * spec.width + c], (*table)->data()[ids[i] * spec.width + c]) << ids[i];
    }
  }
  EXPECT_EQ((*rows)->ReadRows({20000}, got.data()).code(), absl::StatusCode::kInvalidArgument);

  // The streamed safetensors export is the whole-tensor one, byte for byte.
  const std::vector<std::string> names = ModelVariableNames(**files);
  EXPECT_EQ(names, ModelVariableNames(**whole));
  ASSERT_TRUE(WriteSafetensors(**files, names, {{"k", "v"}}, root + "/streamed.safetensors").ok());
  ASSERT_TRUE(WriteSafetensors(**whole, names, {{"k", "v"}}, root + "/whole.safetensors").ok());
  EXPECT_EQ(ReadAll(root + "/streamed.safetensors"), ReadAll(root + "/whole.safetensors"));
}

TEST(CheckpointFilesTest, ACorruptTableBlockIsNamedAndNothingIsEvaluated) {
  const std::string root = FreshTestDir("files_corrupt");
  ZipfCheckpointSpec spec;
  spec.rows = 10000;
  absl::StatusOr<std::string> path = WriteZipfCheckpoint(root, spec);
  ASSERT_TRUE(path.ok()) << path.status();
  CorruptTable(*path, ShardFileName(1));
  absl::StatusOr<std::unique_ptr<CheckpointReader>> files =
      CheckpointReader::Open(*path, {/*load_sharded_tensors=*/false});
  ASSERT_TRUE(files.ok()) << files.status();  // the manifest and lengths are fine
  absl::StatusOr<EvaluationResult> result = EvaluateCheckpoint(**files, "test");
  ASSERT_EQ(result.status().code(), absl::StatusCode::kDataLoss) << result.status();
  EXPECT_TRUE(absl::StrContains(result.status().message(), "shard-00001")) << result.status();
  EXPECT_TRUE(absl::StrContains(result.status().message(), "CRC-32C")) << result.status();
  const std::string out = root + "/model.safetensors";
  EXPECT_EQ(WriteSafetensors(**files, ModelVariableNames(**files), {}, out).code(),
            absl::StatusCode::kDataLoss);
  EXPECT_FALSE(std::ifstream(out).good());
}

// A real job (chief, 2 ps writing a sharded checkpoint per epoch, 1 worker) with an
// evaluator beside it, as processes: the evaluator evaluates every checkpoint once, with
// tools/evaluate's figures digit for digit, writes them to TensorBoard's eval run and its
// /metrics, and exits 0 when the job's final checkpoint is done.
TEST(CheckpointFilesTest, TheEvaluatorTaskEvaluatesEveryCheckpointOfARunningJob) {
  const std::string dir = FreshTestDir("evaluator_cluster");
  const std::string checkpoints = dir + "/checkpoints";
  const std::string logdir = dir + "/tensorboard";
  ZipfCheckpointSpec spec;
  spec.rows = 5000;
  spec.epochs = 3;
  spec.samples = 1000;
  absl::StatusOr<nlohmann::json> job = ZipfJob(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  (*job)["fit"]["batch_size"] = 64;
  const std::string job_path = dir + "/job.json";
  std::ofstream(job_path) << job->dump();
  absl::StatusOr<std::vector<int>> port = PickFreePorts(1);
  ASSERT_TRUE(port.ok()) << port.status();

  ProcessGroup group;
  const TestCluster cluster = StartTestCluster(
      group, 2, 1, {"--heartbeat_interval=200ms", "--chief_timeout=30s"},
      {"--job=" + job_path, "--checkpoint_dir=" + checkpoints, "--keep_checkpoints=20"}, {},
      {"--checkpoint_dir=" + checkpoints});
  // TF's rule: the evaluator is not in the cluster dict.
  const nlohmann::json tf_config = {
      {"cluster", {{"chief", {cluster.chief}}, {"ps", cluster.ps}, {"worker", cluster.workers}}},
      {"task", {{"type", "evaluator"}, {"index", 0}}}};
  ASSERT_TRUE(group
                  .Start({"evaluator", "chief/chief",
                          {"--checkpoint_dir=" + checkpoints, "--logdir=" + logdir,
                           absl::StrCat("--metrics_port=", (*port)[0]), "--metrics_linger=4s",
                           "--eval_poll_interval=100ms"},
                          {{"TF_CONFIG", tf_config.dump()}}})
                  .ok());
  // /metrics, scraped until the processes are done (the evaluator lingers 4 s).
  std::atomic<bool> done{false};
  std::string last_metrics;
  std::thread scraper([&] {
    httplib::Client client("127.0.0.1", (*port)[0]);
    client.set_connection_timeout(1);
    while (!done.load()) {
      httplib::Result r = client.Get("/metrics");
      if (r && r->status == 200 && absl::StrContains(r->body, "pstrain_eval_checkpoint_step")) {
        last_metrics = r->body;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  ProcessRun run = CollectRun(group, ScaledForSanitizers(absl::Minutes(3)), absl::Seconds(10));
  done = true;
  scraper.join();
  for (const auto& exit : run.exits) {
    EXPECT_EQ(exit.exit_code, 0) << exit.name << " (signal " << exit.signal << ")\n"
                                 << run.stderr_of[exit.name];
  }
  const std::vector<std::string> lines = LinesWith(run.stdout_of["evaluator"], "evaluated ");
  // Every checkpoint the chief committed, each once, in order of steps.
  std::vector<std::pair<int64_t, std::string>> written = ListCheckpoints(checkpoints);
  ASSERT_FALSE(written.empty());
  ASSERT_EQ(lines.size(), written.size()) << run.stdout_of["evaluator"] << "\n"
                                          << run.stderr_of["evaluator"];
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string path = checkpoints + "/" + written[written.size() - 1 - i].second;
    EXPECT_TRUE(absl::StrContains(lines[i], "evaluated " + path + " ")) << lines[i];
    const ChildRun tool = RunChild("tools/evaluate", {"--checkpoint=" + path});
    ASSERT_EQ(tool.exit_code, 0) << tool.err;
    EXPECT_EQ(PrintedFigures(lines[i]), PrintedFigures(tool.out)) << lines[i] << "\n" << tool.out;
  }
  EXPECT_TRUE(absl::StrContains(lines.back(), "(epoch 3, ")) << lines.back();
  // TensorBoard's eval run has them.
  bool found = false;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(logdir + "/eval", ec)) {
    found = found || absl::StrContains(ReadAll(entry.path()), "evaluation_loss_vs_iterations");
  }
  EXPECT_TRUE(found) << logdir << "/eval";
  // And /metrics, the last checkpoint's.
  EXPECT_TRUE(absl::StrContains(last_metrics,
                                absl::StrCat("pstrain_eval_checkpoint_step ", written[0].first)))
      << last_metrics;
  EXPECT_TRUE(absl::StrContains(last_metrics, "pstrain_eval_accuracy ")) << last_metrics;
  EXPECT_TRUE(absl::StrContains(last_metrics, "pstrain_eval_checkpoints_total " +
                                                  std::to_string(lines.size())))
      << last_metrics;
}

// The evaluator task on a folder whose first checkpoint is corrupt and whose second is the
// job's final one: it names the bad file, skips it, evaluates the next exactly as
// tools/evaluate does, and exits 0.
TEST(CheckpointFilesTest, TheEvaluatorSkipsACorruptCheckpointAndEvaluatesTheNext) {
  const std::string root = FreshTestDir("evaluator_corrupt");
  ZipfCheckpointSpec spec;
  spec.rows = 10000;
  spec.epochs = 2;
  spec.epoch = 1;
  spec.step = 10;
  absl::StatusOr<std::string> first = WriteZipfCheckpoint(root, spec);
  ASSERT_TRUE(first.ok()) << first.status();
  CorruptTable(*first, ShardFileName(0));
  spec.epoch = 2;
  spec.step = 20;
  absl::StatusOr<std::string> second = WriteZipfCheckpoint(root, spec);
  ASSERT_TRUE(second.ok()) << second.status();
  const std::string logdir = root + "/tensorboard";

  const ChildRun evaluator = RunChild(
      "chief/chief",
      {"--checkpoint_dir=" + root, "--logdir=" + logdir, "--eval_poll_interval=100ms",
       "--eval_timeout=60s"},
      {R"(TF_CONFIG={"cluster":{"chief":["localhost:1"],"ps":["localhost:2"]},)"
       R"("task":{"type":"evaluator","index":0}})"});
  EXPECT_EQ(evaluator.exit_code, 0) << evaluator.err;
  EXPECT_TRUE(absl::StrContains(evaluator.err, "ckpt-10 skipped")) << evaluator.err;
  EXPECT_TRUE(absl::StrContains(evaluator.err, "shard-00000")) << evaluator.err;
  const std::vector<std::string> lines = LinesWith(evaluator.out, "evaluated ");
  ASSERT_EQ(lines.size(), 1u) << evaluator.out;
  EXPECT_TRUE(absl::StrContains(lines[0], "ckpt-20 (epoch 2, step 20)")) << lines[0];

  const ChildRun tool = RunChild("tools/evaluate", {"--checkpoint=" + *second});
  ASSERT_EQ(tool.exit_code, 0) << tool.err;
  EXPECT_EQ(PrintedFigures(lines[0]), PrintedFigures(tool.out)) << lines[0] << "\n" << tool.out;
  // The eval run of TensorBoard has the figures.
  bool found = false;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(logdir + "/eval", ec)) {
    found = found || absl::StrContains(ReadAll(entry.path()), "evaluation_accuracy_vs_iterations");
  }
  EXPECT_TRUE(found) << logdir << "/eval";
  // The tool names the corrupt file too, in one line.
  const ChildRun bad = RunChild("tools/evaluate", {"--checkpoint=" + *first});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(bad.err, "shard-00000")) << bad.err;
}

// tools/evaluate and tools/export_safetensors on a 100,000-row and a 2,000,000-row x 64
// table (24 MiB and 488 MiB of floats): their peak resident memory (VmHWM, as each reports
// it) stays within 10% (plus the Zipf data generator's 8 bytes per id, 15 MiB at 2M ids,
// for evaluate).
TEST(CheckpointFilesTest, TheToolsHoldNoMoreForATwentyTimesLargerTable) {
  struct Peaks {
    int64_t evaluate = 0;
    int64_t export_safetensors = 0;
    std::string figures;
  };
  auto run = [](int64_t rows) {
    Peaks peaks;
    const std::string root = FreshTestDir(absl::StrCat("tools_memory_", rows));
    ZipfCheckpointSpec spec;
    spec.rows = rows;
    absl::StatusOr<std::string> path = WriteZipfCheckpoint(root, spec);
    EXPECT_TRUE(path.ok()) << path.status();
    if (!path.ok()) return peaks;
    const ChildRun evaluate =
        RunChild("tools/evaluate", {"--checkpoint=" + root, "--print_peak_memory"});
    EXPECT_EQ(evaluate.exit_code, 0) << evaluate.err;
    peaks.evaluate = PrintedPeakMemory(evaluate.err);
    peaks.figures = evaluate.out;
    const std::string out = root + "/model.safetensors";
    const ChildRun exported = RunChild(
        "tools/export_safetensors", {"--checkpoint=" + root, "--out=" + out, "--print_peak_memory"});
    EXPECT_EQ(exported.exit_code, 0) << exported.err;
    peaks.export_safetensors = PrintedPeakMemory(exported.err);
    // The file holds the whole table.
    absl::StatusOr<SafetensorsFile> file = ReadSafetensors(out);
    if (rows <= 100000) {
      EXPECT_TRUE(file.ok()) << file.status();
    }
    std::error_code ec;
    EXPECT_GT(static_cast<int64_t>(std::filesystem::file_size(out, ec)), rows * 64 * 4);
    std::filesystem::remove_all(root, ec);
    return peaks;
  };
  const Peaks small = run(100000);
  const Peaks large = run(2000000);
  const std::string figures = absl::StrCat(
      "peak MiB, 100k rows: evaluate ", small.evaluate / kMiB, ", export_safetensors ",
      small.export_safetensors / kMiB, "; 2M rows: evaluate ", large.evaluate / kMiB,
      ", export_safetensors ", large.export_safetensors / kMiB);
  ASSERT_GT(small.evaluate, 0) << figures;
  ASSERT_GT(small.export_safetensors, 0) << figures;
  EXPECT_LT(large.evaluate, small.evaluate * 11 / 10 + 32 * kMiB) << figures;
  EXPECT_LT(large.export_safetensors, small.export_safetensors * 11 / 10) << figures;
  std::cout << figures << std::endl;
}

// tools/export_keras on a 500,000-row x 64 table (122 MiB of floats, seven times the
// 16 MiB block): it reads the checkpoint and writes the weights file a block of rows at a
// time and streams that file into the archive, so its peak resident memory (VmHWM, as it
// reports it) stays below the table's size; and the table's rows in the file are the
// checkpoint's, bit for bit (read back by rows, as a ps reads its rows of a .keras file).
TEST(CheckpointFilesTest, TheKerasExportHoldsABlockNotTheTable) {
  const std::string root = FreshTestDir("keras_export_memory");
  ZipfCheckpointSpec spec;
  spec.rows = 500000;
  absl::StatusOr<std::string> path = WriteZipfCheckpoint(root, spec);
  ASSERT_TRUE(path.ok()) << path.status();
  const std::string out = root + "/model.keras";
  const ChildRun exported = RunChild(
      "tools/export_keras", {"--checkpoint=" + *path, "--out=" + out, "--print_peak_memory"});
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  const int64_t peak = PrintedPeakMemory(exported.err);
  const int64_t table = spec.rows * spec.width * 4;
  const std::string figures =
      absl::StrCat("export_keras peak ", peak / kMiB, " MiB for a ", table / kMiB, " MiB table");
  EXPECT_GT(peak, 0) << figures;
  EXPECT_LT(peak, table) << figures;
  // No temporary weights file left beside the output.
  for (const auto& entry : std::filesystem::directory_iterator(root)) {
    EXPECT_FALSE(absl::StrContains(entry.path().filename().string(), "model.keras."))
        << entry.path();
  }

  absl::StatusOr<std::unique_ptr<CheckpointReader>> checkpoint =
      CheckpointReader::Open(*path, {/*load_sharded_tensors=*/false});
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  absl::StatusOr<JobSpec> job = ParseJobSpec((*checkpoint)->job_spec().dump(), ".");
  ASSERT_TRUE(job.ok()) << job.status();
  absl::StatusOr<std::unique_ptr<Model>> model = Model::FromKerasJson(job->model, nullptr);
  ASSERT_TRUE(model.ok()) << model.status();
  const VariableSpec& table_spec = (*model)->variables()[0];
  ASSERT_EQ(table_spec.shape, (std::vector<int64_t>{spec.rows, spec.width}));
  absl::StatusOr<ZipMemberInfo> member = StatZipMember(out, kKerasWeightsMember);
  ASSERT_TRUE(member.ok()) << member.status();
  EXPECT_GT(member->size, table);
  const int64_t rows[][2] = {{0, 3}, {262140, 262150}, {spec.rows - 2, spec.rows}};
  for (const auto& range : rows) {
    absl::StatusOr<std::vector<Tensor>> read = ReadKerasWeightRows(
        {out, *member}, {{"table", KerasWeightDatasets(**model)[0], table_spec.shape,
                          range[0], range[1]}});
    ASSERT_TRUE(read.ok()) << read.status();
    std::vector<float> expected((range[1] - range[0]) * spec.width);
    ASSERT_TRUE((*checkpoint)->ReadRows(table_spec.name, range[0], range[1], expected.data()).ok());
    EXPECT_EQ(std::vector<float>(read->at(0).values().begin(), read->at(0).values().end()),
              expected)
        << "rows " << range[0] << "-" << range[1];
  }
  std::cout << figures << std::endl;
  std::error_code ec;
  std::filesystem::remove_all(root, ec);
}

}  // namespace
}  // namespace pstrain
