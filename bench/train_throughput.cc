// Training throughput of the seed's 784-64-10 model (or, with --job, of a job's model,
// e.g. the CNN of examples/fashion_mnist_cnn.json) on Fashion-MNIST, one process, with
// the OpenBLAS sgemm rate measured in the same run as the yardstick, and PyTorch's rate
// on the same model, data, batch, optimizer and thread count as the peer
// (bench/torch_baseline.py, skipped when python3-torch is not installed).
//
//   bazel run -c opt //bench:train_throughput -- [--threads=1] [--batch_sizes=64,256]
//       [--seconds=3] [--job=examples/fashion_mnist_cnn.json]
//
// Prints a table; asserts nothing about time (machines are shared and noisy: read the
// figures against the baseline measured in the same run).

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/data/batcher.h"
#include "common/data/data_spec.h"
#include "common/data/synthetic.h"
#include "bench/python_peer.h"
#include "common/daemon/command_line.h"
#include "common/malloc_tuning.h"
#include "common/math/cpu_backend.h"
#include "common/model/job_spec.h"
#include "common/model/model.h"
#include "common/model/optimizer.h"
#include "pstrain/pstrain.h"
#include "nlohmann/json.hpp"
#include "train/train_monitoring.h"

ABSL_FLAG(bool, watch, true,
          "fit reports every step to train's metrics and dashboard (false: as before them)");
ABSL_FLAG(int, threads, 1, "OpenBLAS (and PyTorch) threads.");
ABSL_FLAG(std::string, batch_sizes, "64,256", "Comma-separated batch sizes.");
ABSL_FLAG(double, seconds, 3.0, "Seconds per measurement.");
ABSL_FLAG(std::string, torch_script, "", "bench/torch_baseline.py (found in runfiles by default).");
ABSL_FLAG(std::string, python, "/usr/bin/python3", "Python with Debian's python3-torch.");
ABSL_FLAG(std::string, job, "",
          "A job spec whose model and optimizer to measure (default: the seed's model, Adam).");

namespace pstrain {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

constexpr char kModel[] = R"json({"class_name": "Sequential", "config": {"name": "seed",
  "layers": [
    {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 784], "name": "input"}},
    {"class_name": "Dense", "config": {"name": "dense", "units": 64, "activation": "relu"}},
    {"class_name": "Dropout", "config": {"name": "dropout", "rate": 0.2}},
    {"class_name": "Dense", "config": {"name": "dense_1", "units": 10, "activation": "softmax"}}
  ]}})json";

// The product of a layer with a kernel (Dense, Conv2D) per sample: positions x
// [depth] . [depth, units], e.g. Dense 1 x 784 . 784x64, Conv2D (h*w) x (3*3*c) . (3*3*c)x64.
struct KernelProduct {
  double positions = 0;
  double depth = 0;
  double units = 0;
  double flops() const { return 2.0 * positions * depth * units; }
};

std::vector<KernelProduct> KernelProducts(const Model& model) {
  std::vector<KernelProduct> out;
  for (const VariableSpec& v : model.variables()) {
    if (v.shape.size() < 2 || v.name.size() < 7 ||
        v.name.compare(v.name.size() - 7, 7, "/kernel") != 0) {
      continue;
    }
    KernelProduct p;
    p.units = static_cast<double>(v.shape.back());
    p.depth = static_cast<double>(NumElements(v.shape)) / p.units;
    p.positions =
        static_cast<double>(NumElements(model.layers()[v.layer]->output_shape())) / p.units;
    out.push_back(p);
  }
  return out;
}

// Forward + backward FLOPs per sample of the layers with kernels: the forward product,
// the kernel gradient and the input gradient (not needed by the first), as many FLOPs
// each. (Pooling, normalization and activations are not counted.)
double FlopsPerSample(const Model& model) {
  double flops = 0;
  bool first = true;
  for (const KernelProduct& p : KernelProducts(model)) {
    flops += p.flops() * (first ? 2 : 3);
    first = false;
  }
  return flops;
}

// sgemm GFLOP/s for C[m,n] = op(A) op(B), repeated for ~`seconds`.
double SgemmRate(bool ta, bool tb, int m, int n, int k, double seconds) {
  std::vector<float> a(static_cast<size_t>(m) * k, 0.5f), b(static_cast<size_t>(k) * n, 0.25f),
      c(static_cast<size_t>(m) * n);
  auto run = [&] {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m,
                n, k, 1.0f, a.data(), ta ? m : k, b.data(), tb ? k : n, 0.0f, c.data(), n);
  };
  for (int i = 0; i < 3; ++i) run();
  int64_t reps = 0;
  const auto start = Clock::now();
  double elapsed = 0;
  while (elapsed < seconds) {
    for (int i = 0; i < 10; ++i) run();
    reps += 10;
    elapsed = Seconds(start, Clock::now());
  }
  return 2.0 * m * n * k * reps / elapsed / 1e9;
}

// The rate sgemm reaches on the costliest layer's products at this batch (the seed:
// forward [B,784]x[784,64] and kernel gradient [784,B]x[B,64]), as one figure.
double SgemmAtModelShapes(const Model& model, int batch, double seconds) {
  KernelProduct top;
  for (const KernelProduct& p : KernelProducts(model)) {
    if (p.flops() > top.flops()) top = p;
  }
  const int m = static_cast<int>(batch * top.positions);
  const int k = static_cast<int>(top.depth), n = static_cast<int>(top.units);
  const double fwd = SgemmRate(false, false, m, n, k, seconds / 2);
  const double dw = SgemmRate(true, false, k, n, m, seconds / 2);
  // Equal FLOPs each: the combined rate is the harmonic mean.
  return 2.0 / (1.0 / fwd + 1.0 / dw);
}

struct StepFigures {
  double samples_per_s = 0;
  double final_loss = 0;
};

// The job measured: --job's, or the seed's model with Adam(1e-3) and sparse CE.
absl::StatusOr<JobSpec> BenchJob(int batch, int64_t steps_per_epoch) {
  std::string text;
  const std::string path = absl::GetFlag(FLAGS_job);
  if (path.empty()) {
    text = absl::StrCat(R"({"model": )", kModel, R"(, "compile": {
        "optimizer": {"class_name": "Adam", "config": {"learning_rate": 0.001}},
        "loss": "sparse_categorical_crossentropy"}})");
  } else {
    std::ifstream in(path);
    if (!in) return absl::NotFoundError(absl::StrCat("cannot read --job ", path));
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const std::string dir = path.empty() ? "." : path.substr(0, path.find_last_of('/') + 1);
  absl::StatusOr<JobSpec> job = ParseJobSpec(text, dir.empty() ? "." : dir);
  if (!job.ok()) return job.status();
  job->epochs = 1;
  job->batch_size = batch;
  job->steps_per_epoch = steps_per_epoch;
  job->seed = 1;
  return job;
}

// TrainStep + the optimizer on batches cut beforehand: the training step alone.
absl::StatusOr<StepFigures> MeasureStep(std::shared_ptr<const Dataset> data, int batch,
                                        double seconds) {
  absl::StatusOr<JobSpec> job = BenchJob(batch, 0);
  if (!job.ok()) return job.status();
  std::unique_ptr<Backend> backend = CreateCpuBackend();
  absl::StatusOr<std::unique_ptr<Model>> model = Model::FromKerasJson(job->model, backend.get());
  if (!model.ok()) return model.status();
  if (absl::Status s = (*model)->SetLoss(job->loss); !s.ok()) return s;
  OptimizerConfig config = job->optimizer;
  AddMovingAverageRules((*model)->variables(), &config);
  absl::StatusOr<std::unique_ptr<UpdateRules>> rules = UpdateRules::Create(config);
  if (!rules.ok()) return rules.status();
  std::vector<Tensor> weights = (*model)->InitialValues(1);
  std::vector<const Optimizer*> updates;
  std::vector<std::unique_ptr<OptimizerState>> states;
  for (size_t v = 0; v < weights.size(); ++v) {
    updates.push_back(&(*rules)->For((*model)->variables()[v].name));
    states.push_back(updates.back()->NewState(weights[v].num_elements()));
  }
  BatcherOptions bo;
  bo.batch_size = batch;
  bo.drop_remainder = true;
  bo.shuffle_buffer = data->num_examples();
  bo.seed = 1;
  absl::StatusOr<std::unique_ptr<Batcher>> batcher = Batcher::Create(data, bo);
  if (!batcher.ok()) return batcher.status();
  std::vector<Batch> batches;
  while (true) {
    absl::StatusOr<Batch> b = (*batcher)->Next();
    if (!b.ok()) break;
    batches.push_back(*std::move(b));
  }
  std::vector<Tensor> grads;
  StepFigures figures;
  int64_t step = 0, samples = 0;
  auto one = [&]() -> absl::Status {
    const Batch& b = batches[step % batches.size()];
    absl::StatusOr<StepResult> r = (*model)->TrainStep(weights, b.x, b.y, step, &grads);
    if (!r.ok()) return r.status();
    for (size_t v = 0; v < weights.size(); ++v) {
      updates[v]->Apply(grads[v].values(), weights[v].values(), states[v].get());
    }
    figures.final_loss = r->loss_sum / r->samples;
    ++step;
    samples += r->samples;
    return absl::OkStatus();
  };
  for (int i = 0; i < 50; ++i) {
    if (absl::Status s = one(); !s.ok()) return s;
  }
  samples = 0;
  const auto start = Clock::now();
  double elapsed = 0;
  while (elapsed < seconds) {
    for (int i = 0; i < 20; ++i) {
      if (absl::Status s = one(); !s.ok()) return s;
    }
    elapsed = Seconds(start, Clock::now());
  }
  figures.samples_per_s = samples / elapsed;
  return figures;
}

// One epoch of Fit (batching, prefetch thread and all), no validation: a whole pass
// (steps 0), or `steps` steps.
absl::StatusOr<double> MeasureFitEpoch(std::shared_ptr<const Dataset> data, int batch,
                                       int64_t steps) {
  absl::StatusOr<JobSpec> job = BenchJob(batch, steps);
  if (!job.ok()) return job.status();
  PS_ASSIGN_OR_RETURN(std::unique_ptr<distribute::Strategy> strategy,
                      distribute::CreateStrategy(distribute::StrategyOptions()));
  FitData fit_data{data, nullptr};
  FitOptions options;
  // As train does: every step reported to its metrics and dashboard (no HTTP server, no
  // event files: what they cost apart from the I/O).
  const std::unique_ptr<DaemonMetrics> metrics = DaemonMetrics::WithoutServer("train", 0);
  absl::StatusOr<std::unique_ptr<TrainMonitoring>> monitoring =
      TrainMonitoring::Start(metrics.get(), *job, "bench", 1, /*reports=*/false);
  if (!monitoring.ok()) return monitoring.status();
  if (absl::GetFlag(FLAGS_watch)) {
    TrainMonitoring* watch = monitoring->get();
    options.on_batch = [watch](const BatchProgress& p) { watch->OnBatch(p); };
  }
  absl::StatusOr<FitResult> r = Fit(*job, fit_data, strategy.get(), options);
  if (!r.ok()) return r.status();
  const EpochSummary& s = r->history.back();
  return s.samples / absl::ToDoubleSeconds(s.elapsed);
}

// batch size -> PyTorch samples/s; empty when skipped (the reason is printed).
std::map<int, double> RunTorch(const std::string& script, int threads, double seconds) {
  std::map<int, double> out;
  if (script.empty()) {
    std::printf("torch baseline: bench/torch_baseline.py not found: skipped\n");
    return out;
  }
  std::string cmd =
      absl::StrCat(absl::GetFlag(FLAGS_python), " ", script, " --threads=", threads,
                   " --batch_sizes=", absl::GetFlag(FLAGS_batch_sizes), " --seconds=", seconds);
  if (!absl::GetFlag(FLAGS_job).empty()) absl::StrAppend(&cmd, " --job=", absl::GetFlag(FLAGS_job));
  const bool ran = RunPeer(cmd, [&out](const char* line) {
    int batch = 0;
    double rate = 0;
    if (std::sscanf(line, "torch batch=%d samples_per_s=%lf", &batch, &rate) != 2) return false;
    out[batch] = rate;
    return true;
  });
  if (!ran) std::printf("torch baseline: cannot run %s: skipped\n", cmd.c_str());
  return out;
}

int Main(const char* argv0) {
  const int threads = absl::GetFlag(FLAGS_threads);
  const double seconds = absl::GetFlag(FLAGS_seconds);
  std::vector<int> batch_sizes;
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_batch_sizes), ',')) {
    int b = 0;
    if (!absl::SimpleAtoi(s, &b) || b < 1) {
      std::fprintf(stderr, "train_throughput: bad --batch_sizes entry '%s'\n",
                   std::string(s).c_str());
      return 2;
    }
    batch_sizes.push_back(b);
  }
  // Deliberately: the step's matrices are small, and one BLAS thread per process is
  // usually fastest on these machines (performance-facts.md).
  openblas_set_num_threads(threads);

  std::shared_ptr<const Dataset> data;
  std::string source = "fashion_mnist train (60000 x 784)";
  absl::StatusOr<Dataset> loaded =
      LoadDataset(nlohmann::json{{"type", "fashion_mnist"}, {"split", "train"}}, ".");
  if (loaded.ok()) {
    data = std::make_shared<const Dataset>(*std::move(loaded));
  } else {
    SyntheticOptions so;
    so.samples = 60000;
    absl::StatusOr<Dataset> synthetic = MakeSyntheticDataset(so);
    if (!synthetic.ok()) {
      std::fprintf(stderr, "train_throughput: %s\n", synthetic.status().ToString().c_str());
      return 1;
    }
    data = std::make_shared<const Dataset>(*std::move(synthetic));
    source = absl::StrCat("synthetic 60000 x 784 (", loaded.status().message(), ")");
  }
  absl::StatusOr<JobSpec> job = BenchJob(batch_sizes[0], 0);
  if (!job.ok()) {
    std::fprintf(stderr, "train_throughput: %s\n", job.status().ToString().c_str());
    return 2;
  }
  std::unique_ptr<Model> probe = *Model::FromKerasJson(job->model, nullptr);
  const double flops = FlopsPerSample(*probe);

  if (absl::GetFlag(FLAGS_job).empty()) {
    std::printf("model 784-64(relu)-dropout(0.2)-10(softmax), Adam, sparse CE; data: %s\n",
                source.c_str());
  } else {
    std::printf("model %s of %s (%zu layers), %s, %s; data: %s\n", probe->name().c_str(),
                absl::GetFlag(FLAGS_job).c_str(), probe->layers().size(),
                job->optimizer.name().c_str(), LossName(job->loss.kind).c_str(),
                source.c_str());
  }
  std::printf("threads: %d (openblas_set_num_threads), %.0f FLOP per sample (fwd+bwd)\n",
              threads, flops);
  const double peak = SgemmRate(false, false, 1024, 1024, 1024, seconds / 2);
  std::printf("OpenBLAS sgemm 1024^3: %.1f GFLOP/s\n\n", peak);

  const std::string script =
      FindPeerScript(absl::GetFlag(FLAGS_torch_script), "bench/torch_baseline.py", argv0);
  const std::map<int, double> torch = RunTorch(script, threads, seconds);

  std::printf("\n%6s %14s %14s %12s %10s %9s %14s %14s %8s\n", "batch", "step samples/s",
              "step GFLOP/s", "sgemm@shape", "%sgemm@sh", "%peak", "fit samples/s",
              "torch samp/s", "x torch");
  for (int batch : batch_sizes) {
    const double at_shape = SgemmAtModelShapes(*probe, batch, seconds);
    absl::StatusOr<StepFigures> step = MeasureStep(data, batch, seconds);
    if (!step.ok()) {
      std::fprintf(stderr, "train_throughput: %s\n", step.status().ToString().c_str());
      return 1;
    }
    // A job's model (a CNN) may take minutes per pass: as many steps as the step
    // measurement ran instead.
    const int64_t fit_steps =
        absl::GetFlag(FLAGS_job).empty()
            ? 0
            : std::max<int64_t>(20, static_cast<int64_t>(step->samples_per_s * seconds / batch));
    absl::StatusOr<double> fit = MeasureFitEpoch(data, batch, fit_steps);
    if (!fit.ok()) {
      std::fprintf(stderr, "train_throughput: %s\n", fit.status().ToString().c_str());
      return 1;
    }
    const double gflops = step->samples_per_s * flops / 1e9;
    const auto t = torch.find(batch);
    std::printf("%6d %14.0f %14.1f %12.1f %9.1f%% %8.1f%% %14.0f", batch, step->samples_per_s,
                gflops, at_shape, 100 * gflops / at_shape, 100 * gflops / peak, *fit);
    if (t != torch.end()) {
      std::printf(" %14.0f %7.2fx\n", t->second, step->samples_per_s / t->second);
    } else {
      std::printf(" %14s %8s\n", "-", "-");
    }
  }
  std::printf(
      "\nstep: TrainStep + the optimizer on pre-cut batches; fit: one Fit epoch (shuffle,\n"
      "batching, prefetch; with --job as many steps as the step measurement ran); sgemm@shape:\n"
      "sgemm at the costliest layer's forward and kernel-gradient shapes.\n");
  return 0;
}

}  // namespace
}  // namespace pstrain

int main(int argc, char** argv) {
  pstrain::ParseCommandLineWithUsage(
      argc, argv,
      "train_throughput: single-process training throughput of the seed model against OpenBLAS and PyTorch.\n  bazel run -c opt //bench:train_throughput -- [--threads=1] [--batch_sizes=64,256] [--seconds=3]");
  // As train/train does: batch tensors stay in the heap instead of being mmapped per batch.
  pstrain::KeepLargeBlocksInHeap();
  return pstrain::Main(argv[0]);
}
