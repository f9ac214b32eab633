// train: single-process training of a job spec (TensorFlow's default strategy), printing
// Keras-style epoch lines on stdout and, when stderr is a terminal, a progress bar there.
//
//   train --job=examples/fashion_mnist.json [--epochs=N] [--device=cpu|auto|cuda[:N]]
//
// Exit status: 0 trained; 2 bad flags, job spec or data (one line on stderr); 1 a failure
// while training.

#include <cblas.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/logging.h"
#include "common/malloc_tuning.h"
#include "common/math/backend_factory.h"
#include "common/model/job_spec.h"
#include "worker/fit.h"
#include "worker/strategy.h"

ABSL_FLAG(std::string, job, "", "Job spec (JSON) to train.");
ABSL_FLAG(int, epochs, 0, "Overrides fit.epochs when > 0.");
ABSL_FLAG(std::string, device, "cpu",
          "cpu, auto (CUDA when a device answers, else the CPU), cuda or cuda:N.");

namespace pstrain {
namespace {

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "train: %s\n", message.c_str());
  return code;
}

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// A Keras-like one-line bar, redrawn in place at most ~10 times a second (drawing on
// every step would cost more than a small model's step).
class ProgressBar {
 public:
  void Update(const BatchProgress& p) {
    const absl::Time now = absl::Now();
    if (p.step != p.steps && now - last_ < absl::Milliseconds(100)) return;
    last_ = now;
    constexpr int kWidth = 30;
    const int done = p.steps > 0 ? static_cast<int>(kWidth * p.step / p.steps) : 0;
    std::string bar(kWidth, '.');
    for (int i = 0; i < done; ++i) bar[i] = '=';
    if (done < kWidth) bar[done] = '>';
    std::fprintf(stderr, "\r%lld/%lld [%s] - loss: %.4f - accuracy: %.4f",
                 static_cast<long long>(p.step), static_cast<long long>(p.steps), bar.c_str(),
                 p.loss, p.accuracy);
    std::fflush(stderr);
    drawn_ = true;
  }
  // Clears the bar so the epoch line starts on a clean line.
  void Clear() {
    if (!drawn_) return;
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    drawn_ = false;
  }

 private:
  absl::Time last_ = absl::InfinitePast();
  bool drawn_ = false;
};

int Main() {
  const std::string job_path = absl::GetFlag(FLAGS_job);
  if (job_path.empty()) return Fail(2, "--job=FILE is required");
  const std::string device = absl::GetFlag(FLAGS_device);
  if (absl::GetFlag(FLAGS_epochs) < 0) return Fail(2, "--epochs must be >= 0");

  std::ifstream in(job_path);
  if (!in) return Fail(2, absl::StrCat(job_path, ": cannot read the job spec"));
  std::stringstream text;
  text << in.rdbuf();
  const std::string base_dir = DirectoryOf(job_path);
  absl::StatusOr<JobSpec> job = ParseJobSpec(text.str(), base_dir);
  if (!job.ok()) return Fail(2, absl::StrCat(job_path, ": ", job.status().message()));
  absl::StatusOr<FitData> data = LoadFitData(*job, base_dir);
  if (!data.ok()) return Fail(2, absl::StrCat(job_path, ": ", data.status().message()));

  // The backend is chosen before training so a bad --device fails at once; "auto" says in
  // one line why it fell back to the CPU, as get_strategy()'s fallback does.
  std::string note;
  absl::StatusOr<std::unique_ptr<Backend>> first_backend = CreateBackend(device, &note);
  if (!first_backend.ok()) {
    return Fail(absl::IsInvalidArgument(first_backend.status()) ? 2 : 1,
                absl::StrCat("--device=", device, ": ", first_backend.status().message()));
  }
  if (!note.empty()) LogInfo(note);

  std::unique_ptr<Strategy> strategy = CreateDefaultStrategy();
  const bool tty = isatty(STDERR_FILENO) == 1;
  ProgressBar bar;
  FitOptions options;
  options.epochs = absl::GetFlag(FLAGS_epochs);
  // Replica 0 takes the backend made above (a CUDA context is costly to create twice).
  options.make_backend = [&](int replica) -> absl::StatusOr<std::unique_ptr<Backend>> {
    if (replica == 0 && *first_backend != nullptr) return std::move(*first_backend);
    return CreateBackend(device, nullptr);
  };
  if (tty) options.on_batch = [&bar](const BatchProgress& p) { bar.Update(p); };
  options.on_epoch = [&bar](const EpochSummary& s) {
    bar.Clear();
    std::cout << FormatEpochLine(s) << std::endl;
    return true;
  };
  absl::StatusOr<FitResult> result = Fit(*job, *data, strategy.get(), options);
  bar.Clear();
  if (!result.ok()) {
    const int code = absl::IsInvalidArgument(result.status()) ? 2 : 1;
    return Fail(code, absl::StrCat(job_path, ": ", result.status().message()));
  }
  return 0;
}

}  // namespace
}  // namespace pstrain

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Trains a job spec in this process.\n"
      "  train --job=FILE [--epochs=N] [--device=cpu|auto|cuda[:N]]");
  absl::ParseCommandLine(argc, argv);
  // Every batch is a fresh tensor of a few hundred KiB.
  pstrain::KeepLargeBlocksInHeap();
  // The model's products are small: one BLAS thread beats two on the 2-core machines,
  // and leaves the other core to the batch prefetch thread. OPENBLAS_NUM_THREADS wins.
  if (std::getenv("OPENBLAS_NUM_THREADS") == nullptr) openblas_set_num_threads(1);
  return pstrain::Main();
}
