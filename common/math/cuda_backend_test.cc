// The CUDA backend against the CPU backend (the reference semantics) on random inputs, op by
// op, then a whole Model::TrainStep. Built only under --config=cuda. Without a device (the
// build machines) every test skips; tests/gpu/run_gpu_checks.sh runs it on a GPU host.

#include "common/math/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/math/backend.h"
#include "common/math/cpu_backend.h"
#include "common/math/cuda_kernels.h"
#include "common/model/loss.h"
#include "common/model/layers/window.h"
#include "common/model/model.h"
#include "common/tensor.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using Floats = std::vector<float>;

Floats Uniform(int64_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  Floats v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Class ids as float in [0, classes).
Floats Labels(int64_t rows, int64_t classes, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> d(0, classes - 1);
  Floats v(rows);
  for (float& x : v) x = static_cast<float>(d(rng));
  return v;
}

// Rows of positive numbers normalized to sum 1 (probabilities or target distributions),
// with about a quarter of the entries exactly zero.
Floats Distributions(int64_t rows, int64_t cols, uint32_t seed) {
  Floats v = Uniform(rows * cols, seed, 0.0f, 1.0f);
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0.0;
    for (int64_t c = 0; c < cols; ++c) {
      float& x = v[r * cols + c];
      if (x < 0.25f && cols > 1) x = 0.0f;
      sum += x;
    }
    if (sum == 0.0) {
      v[r * cols] = 1.0f;
      sum = 1.0;
    }
    for (int64_t c = 0; c < cols; ++c) v[r * cols + c] = static_cast<float>(v[r * cols + c] / sum);
  }
  return v;
}

// |got - want| <= atol + rtol * |want| elementwise; NaN matches NaN only.
void ExpectClose(const Floats& got, const Floats& want, float rtol, float atol,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int reported = 0;
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool both_nan = std::isnan(got[i]) && std::isnan(want[i]);
    const bool ok = both_nan || (!std::isnan(got[i]) && !std::isnan(want[i]) &&
                                 std::fabs(got[i] - want[i]) <= atol + rtol * std::fabs(want[i]));
    if (!ok) {
      ++bad;
      if (reported++ < 5) {
        ADD_FAILURE() << what << ": [" << i << "] cuda " << got[i] << " vs cpu " << want[i];
      }
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " differ";
}

class CudaBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const absl::StatusOr<int> count = QueryCudaDeviceCount();
    if (!count.ok() || *count == 0) {
      GTEST_SKIP() << "no CUDA device answered ("
                   << (count.ok() ? std::string("0 devices")
                                  : std::string(count.status().message()))
                   << "); the CUDA backend is checked on a GPU host, see tests/gpu/README.md";
    }
    absl::StatusOr<std::unique_ptr<Backend>> cuda = CreateCudaBackend(0);
    ASSERT_TRUE(cuda.ok()) << cuda.status();
    cuda_ = std::move(*cuda);
    cpu_ = CreateCpuBackend();
  }

  // A CUDA buffer holding `values`.
  DeviceBuffer Up(const Floats& values) {
    absl::StatusOr<DeviceBuffer> buffer = cuda_->Allocate(static_cast<int64_t>(values.size()));
    if (!buffer.ok()) {
      ADD_FAILURE() << buffer.status();
      return DeviceBuffer();
    }
    const absl::Status status =
        cuda_->CopyToDevice(values.data(), static_cast<int64_t>(values.size()), buffer->data());
    if (!status.ok()) ADD_FAILURE() << status;
    return std::move(*buffer);
  }

  // An uninitialized-looking CUDA buffer: filled with NaN so an op that fails to write an
  // element shows up.
  DeviceBuffer Junk(int64_t n) {
    return Up(Floats(n, std::numeric_limits<float>::quiet_NaN()));
  }

  Floats Down(const DeviceBuffer& buffer) {
    Floats out(buffer.size());
    absl::Status status = cuda_->CopyToHost(buffer.data(), buffer.size(), out.data());
    if (status.ok()) status = cuda_->Synchronize();
    if (!status.ok()) ADD_FAILURE() << status;
    return out;
  }

  std::unique_ptr<Backend> cuda_;
  std::unique_ptr<Backend> cpu_;
};

TEST_F(CudaBackendTest, AllocatesAndCopies) {
  EXPECT_EQ(cuda_->name(), "cuda:0");
  EXPECT_FALSE(cuda_->IsHostMemory());
  auto negative = cuda_->Allocate(-1);
  ASSERT_FALSE(negative.ok());
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument);
  auto empty = cuda_->Allocate(0);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->size(), 0);
  EXPECT_TRUE(cuda_->CopyToDevice(nullptr, 0, empty->data()).ok());

  const Floats values = Uniform(100003, 1);
  DeviceBuffer buffer = Up(values);
  EXPECT_EQ(Down(buffer), values);
}

TEST_F(CudaBackendTest, HugeAllocationIsResourceExhaustedAndHarmless) {
  auto huge = cuda_->Allocate(int64_t{1} << 42);  // 16 TiB
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted) << huge.status();
  // The failure is not left behind for later calls.
  EXPECT_TRUE(cuda_->Synchronize().ok());
  DeviceBuffer x = Up({1, 2, 3});
  cuda_->Scale(3, 2.0f, x.data());
  EXPECT_EQ(Down(x), (Floats{2, 4, 6}));
}

TEST_F(CudaBackendTest, AsyncFailureSurfacesOnceAtSynchronize) {
  DeviceBuffer c = Junk(4);
  // Too large for cuBLAS's int sizes: recorded, reported by the next Synchronize.
  cuda_->Gemm(false, false, int64_t{INT_MAX} + 1, 1, 1, 1.0f, c.data(), c.data(), 0.0f,
              c.data());
  const absl::Status first = cuda_->Synchronize();
  EXPECT_FALSE(first.ok());
  EXPECT_NE(first.message().find("cuda:0"), std::string::npos) << first;
  // Reported once; the backend keeps working.
  EXPECT_TRUE(cuda_->Synchronize().ok());
  DeviceBuffer x = Up({1, 2});
  cuda_->Scale(2, 3.0f, x.data());
  EXPECT_EQ(Down(x), (Floats{3, 6}));
}

TEST_F(CudaBackendTest, GemmMatchesCpu) {
  struct Shape {
    int64_t m, n, k;
  };
  for (const Shape s : {Shape{1, 1, 1}, Shape{37, 53, 71}, Shape{128, 64, 256},
                        Shape{5, 300, 2}, Shape{9, 7, 0}}) {
    for (bool trans_a : {false, true}) {
      for (bool trans_b : {false, true}) {
        for (float beta : {0.0f, 0.5f}) {
          const std::string what = absl::StrCat("gemm m=", s.m, " n=", s.n, " k=", s.k,
                                                " ta=", trans_a, " tb=", trans_b, " beta=", beta);
          const Floats a = Uniform(s.m * s.k, 10);
          const Floats b = Uniform(s.k * s.n, 11);
          // beta == 0 must ignore C even when it holds NaN.
          const Floats c0 = beta == 0.0f
                                ? Floats(s.m * s.n, std::numeric_limits<float>::quiet_NaN())
                                : Uniform(s.m * s.n, 12);
          Floats want = c0;
          cpu_->Gemm(trans_a, trans_b, s.m, s.n, s.k, 0.75f, a.data(), b.data(), beta,
                     want.data());
          DeviceBuffer da = Up(a), db = Up(b), dc = Up(c0);
          cuda_->Gemm(trans_a, trans_b, s.m, s.n, s.k, 0.75f, da.data(), db.data(), beta,
                      dc.data());
          ExpectClose(Down(dc), want, 1e-4f, 1e-4f, what);
        }
      }
    }
  }
}

TEST_F(CudaBackendTest, BiasAndColumnSumsMatchCpu) {
  for (int64_t rows : {0, 1, 1000}) {
    for (int64_t cols : {1, 37, 300}) {
      const std::string what = absl::StrCat("rows=", rows, " cols=", cols);
      const Floats x = Uniform(rows * cols, 20);
      const Floats bias = Uniform(cols, 21);
      Floats want = x;
      cpu_->AddBias(rows, cols, bias.data(), want.data());
      DeviceBuffer dx = Up(x), dbias = Up(bias);
      cuda_->AddBias(rows, cols, dbias.data(), dx.data());
      ExpectClose(Down(dx), want, 1e-6f, 1e-6f, "AddBias " + what);

      Floats sums(cols);
      cpu_->ColumnSums(rows, cols, x.data(), sums.data());
      DeviceBuffer dx2 = Up(x), dsums = Junk(cols);
      cuda_->ColumnSums(rows, cols, dx2.data(), dsums.data());
      // Summation order differs (sequential vs tree): allow for float rounding of 1000 terms.
      ExpectClose(Down(dsums), sums, 1e-4f, 1e-4f, "ColumnSums " + what);
    }
  }
}

TEST_F(CudaBackendTest, ActivationsMatchCpu) {
  const Activation all[] = {Activation::kLinear, Activation::kRelu, Activation::kSigmoid,
                            Activation::kTanh, Activation::kSoftmax};
  for (Activation f : all) {
    for (int64_t cols : {1, 10, 257, 1000}) {
      for (bool in_place : {false, true}) {
        const int64_t rows = 33;
        const std::string what = absl::StrCat("activation ", static_cast<int>(f), " cols=",
                                              cols, in_place ? " in place" : "");
        // Large logits check that softmax subtracts the max.
        const Floats x = Uniform(rows * cols, 30, f == Activation::kSoftmax ? -80.0f : -6.0f,
                                 f == Activation::kSoftmax ? 80.0f : 6.0f);
        Floats y(rows * cols);
        cpu_->ActivationForward(f, rows, cols, x.data(), y.data());
        DeviceBuffer dx = Up(x);
        DeviceBuffer dy = in_place ? DeviceBuffer() : Junk(rows * cols);
        float* out = in_place ? dx.data() : dy.data();
        cuda_->ActivationForward(f, rows, cols, dx.data(), out);
        ExpectClose(Down(in_place ? dx : dy), y, 1e-5f, 1e-6f, "forward " + what);

        // Backward from the CPU's forward output, so only the backward op is compared.
        const Floats g = Uniform(rows * cols, 31);
        Floats dxs(rows * cols);
        cpu_->ActivationBackward(f, rows, cols, y.data(), g.data(), dxs.data());
        DeviceBuffer d_y = Up(y), d_g = Up(g);
        DeviceBuffer d_dx = in_place ? DeviceBuffer() : Junk(rows * cols);
        float* grad_out = in_place ? d_g.data() : d_dx.data();
        cuda_->ActivationBackward(f, rows, cols, d_y.data(), d_g.data(), grad_out);
        ExpectClose(Down(in_place ? d_g : d_dx), dxs, 1e-4f, 1e-6f, "backward " + what);
      }
    }
  }
}

struct LossCase {
  LossKind kind;
  const char* name;
};

// Inputs of the kind each loss expects, including the edges the CPU code handles specially.
void LossInputs(LossKind kind, int64_t rows, int64_t cols, Floats* pred, Floats* target) {
  switch (kind) {
    case LossKind::kSoftmaxSparseCrossEntropy:
      *pred = Uniform(rows * cols, 40, -10.0f, 10.0f);
      for (int64_t c = 0; c < cols; ++c) (*pred)[c] = 1e4f * (c % 2 ? 1.0f : -1.0f);  // huge
      *target = Labels(rows, cols, 41);
      (*target)[rows - 1] = static_cast<float>(cols);  // out of range: NaN, zero gradient
      return;
    case LossKind::kSoftmaxCrossEntropy:
      *pred = Uniform(rows * cols, 42, -10.0f, 10.0f);
      *target = Distributions(rows, cols, 43);
      return;
    case LossKind::kSparseCrossEntropy:
      *pred = Distributions(rows, cols, 44);
      *target = Labels(rows, cols, 45);
      (*target)[rows - 1] = -1.0f;
      return;
    case LossKind::kCrossEntropy:
      *pred = Distributions(rows, cols, 46);
      *target = Distributions(rows, cols, 47);
      for (int64_t c = 0; c < cols; ++c) (*pred)[c] = 0.0f;  // all-zero row
      return;
    case LossKind::kMeanSquaredError:
      *pred = Uniform(rows * cols, 48, -3.0f, 3.0f);
      *target = Uniform(rows * cols, 49, -3.0f, 3.0f);
      return;
    case LossKind::kBinaryCrossEntropy:
      *pred = Uniform(rows * cols, 50, 0.0f, 1.0f);
      *target = Uniform(rows * cols, 51, 0.0f, 1.0f);
      (*pred)[0] = 0.0f;  // clipped: zero gradient
      if (rows * cols > 1) (*pred)[1] = 1.0f;
      return;
    case LossKind::kSigmoidBinaryCrossEntropy:
      *pred = Uniform(rows * cols, 52, -8.0f, 8.0f);
      *target = Uniform(rows * cols, 53, 0.0f, 1.0f);
      (*pred)[0] = 100.0f;  // stable form: no overflow
      if (rows * cols > 1) (*pred)[1] = -100.0f;
      return;
  }
}

TEST_F(CudaBackendTest, EveryLossMatchesCpu) {
  const LossCase cases[] = {
      {LossKind::kSoftmaxSparseCrossEntropy, "softmax sparse CE"},
      {LossKind::kSoftmaxCrossEntropy, "softmax CE"},
      {LossKind::kSparseCrossEntropy, "sparse CE"},
      {LossKind::kCrossEntropy, "CE"},
      {LossKind::kMeanSquaredError, "MSE"},
      {LossKind::kBinaryCrossEntropy, "BCE"},
      {LossKind::kSigmoidBinaryCrossEntropy, "sigmoid BCE"},
  };
  for (const LossCase& c : cases) {
    for (int64_t cols : {1, 10, 300}) {
      for (bool with_grad : {true, false}) {
        const int64_t rows = 33;
        const std::string what = absl::StrCat(c.name, " cols=", cols, with_grad ? "" : " no grad");
        Floats pred, target;
        LossInputs(c.kind, rows, cols, &pred, &target);
        const float scale = 1.0f / rows;
        Floats loss(rows), grad(rows * cols);
        cpu_->LossForwardBackward(c.kind, rows, cols, pred.data(), target.data(), scale,
                                  loss.data(), with_grad ? grad.data() : nullptr);
        DeviceBuffer dp = Up(pred), dt = Up(target), dl = Junk(rows);
        DeviceBuffer dg = with_grad ? Junk(rows * cols) : DeviceBuffer();
        cuda_->LossForwardBackward(c.kind, rows, cols, dp.data(), dt.data(), scale, dl.data(),
                                   with_grad ? dg.data() : nullptr);
        const Floats got_loss = Down(dl);
        ExpectClose(got_loss, loss, 1e-5f, 1e-6f, "loss " + what);
        for (float v : got_loss) {
          if (c.kind == LossKind::kSoftmaxSparseCrossEntropy ||
              c.kind == LossKind::kSparseCrossEntropy) {
            continue;  // one NaN row by design
          }
          EXPECT_TRUE(std::isfinite(v)) << what;
        }
        if (with_grad) ExpectClose(Down(dg), grad, 1e-4f, 1e-7f, "grad " + what);
      }
    }
  }
}

TEST_F(CudaBackendTest, DropoutMaskIsIdenticalToCpu) {
  for (uint64_t seed : {uint64_t{0}, uint64_t{42}, ~uint64_t{0}}) {
    for (float rate : {0.0f, 0.25f, 0.9f}) {
      for (bool in_place : {false, true}) {
        const int64_t n = 100003;
        const std::string what =
            absl::StrCat("seed=", seed, " rate=", rate, in_place ? " in place" : "");
        const Floats x = Uniform(n, 60);
        Floats mask(n), y(n);
        cpu_->DropoutForward(n, rate, seed, x.data(), mask.data(), y.data());
        DeviceBuffer dx = Up(x), dmask = Junk(n);
        DeviceBuffer dy = in_place ? DeviceBuffer() : Junk(n);
        cuda_->DropoutForward(n, rate, seed, dx.data(), dmask.data(),
                              in_place ? dx.data() : dy.data());
        // Bit for bit: the same hash, the same compare, one float multiply.
        EXPECT_EQ(Down(dmask), mask) << what;
        EXPECT_EQ(Down(in_place ? dx : dy), y) << what;
      }
    }
  }
}

TEST_F(CudaBackendTest, DeviceDropoutHashIsBitIdentical) {
  const int64_t n = 4096;
  for (uint64_t seed : {uint64_t{1}, uint64_t{0xDEADBEEF}, ~uint64_t{0}}) {
    for (uint64_t first : {uint64_t{0}, uint64_t{1} << 40, ~uint64_t{0} - 100}) {
      DeviceBuffer out = Junk(n);
      // The launcher on the default stream; Down() synchronizes the device through a
      // blocking copy after the kernel.
      ASSERT_EQ(cuda_kernels::DropoutUniformDraws(nullptr, seed, first, n, out.data()),
                cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const Floats got = Down(out);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(got[i], DropoutUniform(seed, first + static_cast<uint64_t>(i)))
            << "seed " << seed << " index " << first + i;
      }
    }
  }
}

TEST_F(CudaBackendTest, ElementwiseOpsMatchCpu) {
  const int64_t n = 70001;
  const Floats a = Uniform(n, 70), b = Uniform(n, 71);

  Floats prod(n);
  cpu_->Multiply(n, a.data(), b.data(), prod.data());
  DeviceBuffer da = Up(a), db = Up(b), dout = Junk(n);
  cuda_->Multiply(n, da.data(), db.data(), dout.data());
  EXPECT_EQ(Down(dout), prod);
  cuda_->Multiply(n, da.data(), db.data(), da.data());  // in place
  EXPECT_EQ(Down(da), prod);

  Floats axpy = b;
  cpu_->Axpy(n, -0.3f, a.data(), axpy.data());
  DeviceBuffer da2 = Up(a), db2 = Up(b);
  cuda_->Axpy(n, -0.3f, da2.data(), db2.data());
  ExpectClose(Down(db2), axpy, 1e-6f, 1e-7f, "Axpy");  // nvcc may fuse into an FMA

  Floats scaled = a;
  cpu_->Scale(n, 1.7f, scaled.data());
  cuda_->Scale(n, 1.7f, da2.data());
  EXPECT_EQ(Down(da2), scaled);
}

TEST_F(CudaBackendTest, CountCorrectMatchesCpu) {
  const int64_t rows = 1001;
  for (int64_t cols : {1, 10, 300}) {
    const Floats pred = Uniform(rows * cols, 80);
    struct Case {
      AccuracyKind kind;
      Floats target;
      float threshold;
    };
    std::vector<Case> cases = {
        {AccuracyKind::kSparseCategorical, Labels(rows, cols, 81), 0.0f},
        {AccuracyKind::kCategorical, Uniform(rows * cols, 82), 0.0f},
    };
    if (cols == 1) {
      cases.push_back({AccuracyKind::kBinary, Uniform(rows, 83, 0.0f, 1.0f), 0.0f});
      cases.push_back({AccuracyKind::kBinary, Uniform(rows, 84, 0.0f, 1.0f), 0.5f});
    }
    for (const Case& c : cases) {
      Floats want(rows);
      cpu_->CountCorrect(c.kind, rows, cols, pred.data(), c.target.data(), c.threshold,
                         want.data());
      DeviceBuffer dp = Up(pred), dt = Up(c.target), dc = Junk(rows);
      cuda_->CountCorrect(c.kind, rows, cols, dp.data(), dt.data(), c.threshold, dc.data());
      EXPECT_EQ(Down(dc), want) << "kind " << static_cast<int>(c.kind) << " cols=" << cols;
    }
  }
}

// ---- Convolution, pooling, normalization and embedding ops -------------------------------

TEST_F(CudaBackendTest, ConvolutionAndPoolingOpsMatchCpu) {
  struct Case {
    std::vector<int64_t> input;  // h, w, c
    std::vector<int64_t> kernel, strides;
    std::string padding;
  };
  for (const Case& c : {Case{{7, 6, 3}, {3, 3}, {1, 1}, "same"},
                        Case{{8, 8, 2}, {2, 2}, {2, 2}, "valid"},
                        Case{{9, 5, 4}, {3, 2}, {2, 1}, "same"},
                        Case{{6, 6, 1}, {3, 3}, {2, 2}, "same"}}) {
    absl::StatusOr<Window2D> planned = PlanWindow2D(c.input, c.kernel, c.strides, c.padding);
    ASSERT_TRUE(planned.ok()) << planned.status();
    Window2D w = *planned;
    w.batch = 3;
    const std::string what = absl::StrCat(absl::StrJoin(c.input, "x"), " k ",
                                          absl::StrJoin(c.kernel, "x"), " s ",
                                          absl::StrJoin(c.strides, "x"), " ", c.padding);
    const int64_t in = w.batch * w.in_h * w.in_w * w.channels;
    const int64_t out = w.batch * w.out_h * w.out_w * w.channels;
    const int64_t cols = w.batch * w.out_h * w.out_w * w.k_h * w.k_w * w.channels;
    const Floats x = Uniform(in, 60);
    DeviceBuffer dx_in = Up(x);

    Floats want_cols(cols);
    cpu_->Im2Col(w, x.data(), want_cols.data());
    DeviceBuffer d_cols = Junk(cols);
    cuda_->Im2Col(w, dx_in.data(), d_cols.data());
    EXPECT_EQ(Down(d_cols), want_cols) << "Im2Col " << what;  // copies: exact

    const Floats g_cols = Uniform(cols, 61);
    Floats want_dx(in);
    cpu_->Col2Im(w, g_cols.data(), want_dx.data());
    DeviceBuffer d_gcols = Up(g_cols), d_dx = Junk(in);
    cuda_->Col2Im(w, d_gcols.data(), d_dx.data());
    ExpectClose(Down(d_dx), want_dx, 1e-5f, 1e-6f, "Col2Im " + what);

    Floats want_y(out), want_arg(out);
    cpu_->MaxPoolForward(w, x.data(), want_y.data(), want_arg.data());
    DeviceBuffer d_y = Junk(out), d_arg = Junk(out);
    cuda_->MaxPoolForward(w, dx_in.data(), d_y.data(), d_arg.data());
    EXPECT_EQ(Down(d_y), want_y) << "MaxPoolForward " << what;
    EXPECT_EQ(Down(d_arg), want_arg) << "MaxPoolForward argmax " << what;

    const Floats dy = Uniform(out, 62);
    DeviceBuffer d_dy = Up(dy);
    cpu_->MaxPoolBackward(w, dy.data(), want_arg.data(), want_dx.data());
    cuda_->MaxPoolBackward(w, d_dy.data(), d_arg.data(), d_dx.data());
    ExpectClose(Down(d_dx), want_dx, 1e-5f, 1e-6f, "MaxPoolBackward " + what);

    cpu_->AvgPoolForward(w, x.data(), want_y.data());
    cuda_->AvgPoolForward(w, dx_in.data(), d_y.data());
    ExpectClose(Down(d_y), want_y, 1e-5f, 1e-6f, "AvgPoolForward " + what);
    cpu_->AvgPoolBackward(w, dy.data(), want_dx.data());
    cuda_->AvgPoolBackward(w, d_dy.data(), d_dx.data());
    ExpectClose(Down(d_dx), want_dx, 1e-5f, 1e-6f, "AvgPoolBackward " + what);
  }
}

TEST_F(CudaBackendTest, NormalizationAndEmbeddingOpsMatchCpu) {
  // Global average pooling.
  const int64_t batch = 4, positions = 37, channels = 5;
  const Floats x = Uniform(batch * positions * channels, 70);
  Floats want(batch * channels);
  cpu_->MeanOverPositions(batch, positions, channels, x.data(), want.data());
  DeviceBuffer d_x = Up(x), d_y = Junk(batch * channels);
  cuda_->MeanOverPositions(batch, positions, channels, d_x.data(), d_y.data());
  ExpectClose(Down(d_y), want, 1e-5f, 1e-6f, "MeanOverPositions");
  Floats want_dx(x.size());
  cpu_->MeanOverPositionsBackward(batch, positions, channels, want.data(), want_dx.data());
  DeviceBuffer d_dx = Junk(static_cast<int64_t>(x.size()));
  cuda_->MeanOverPositionsBackward(batch, positions, channels, d_y.data(), d_dx.data());
  ExpectClose(Down(d_dx), want_dx, 1e-5f, 1e-7f, "MeanOverPositionsBackward");

  // Batch normalization: many rows and a large mean (the two-pass variance matters).
  const int64_t rows = 5000, cols = 7;
  Floats bx = Uniform(rows * cols, 71, 2.0f, 4.0f);
  Floats mean(cols), var(cols);
  cpu_->ColumnMoments(rows, cols, bx.data(), mean.data(), var.data());
  DeviceBuffer d_bx = Up(bx), d_mean = Junk(cols), d_var = Junk(cols);
  cuda_->ColumnMoments(rows, cols, d_bx.data(), d_mean.data(), d_var.data());
  ExpectClose(Down(d_mean), mean, 1e-6f, 0.0f, "ColumnMoments mean");
  ExpectClose(Down(d_var), var, 1e-5f, 0.0f, "ColumnMoments var");
  const Floats gamma = Uniform(cols, 72, 0.5f, 1.5f), beta = Uniform(cols, 73);
  DeviceBuffer d_gamma = Up(gamma), d_beta = Up(beta);
  const Floats dy = Uniform(rows * cols, 74);
  DeviceBuffer d_dy = Up(dy);
  for (bool affine : {true, false}) {
    const std::string what = affine ? " with gamma, beta" : " without gamma, beta";
    Floats y(rows * cols);
    cpu_->BatchNormForward(rows, cols, bx.data(), mean.data(), var.data(),
                           affine ? gamma.data() : nullptr, affine ? beta.data() : nullptr,
                           1e-3f, y.data());
    DeviceBuffer d_out = Junk(rows * cols);
    cuda_->BatchNormForward(rows, cols, d_bx.data(), d_mean.data(), d_var.data(),
                            affine ? d_gamma.data() : nullptr, affine ? d_beta.data() : nullptr,
                            1e-3f, d_out.data());
    ExpectClose(Down(d_out), y, 1e-4f, 1e-5f, "BatchNormForward" + what);
    Floats dgamma(cols), dbeta(cols), dx(rows * cols);
    cpu_->BatchNormBackward(rows, cols, bx.data(), dy.data(), mean.data(), var.data(),
                            affine ? gamma.data() : nullptr, 1e-3f, dgamma.data(), dbeta.data(),
                            dx.data());
    DeviceBuffer d_dgamma = Junk(cols), d_dbeta = Junk(cols), d_bdx = Junk(rows * cols);
    cuda_->BatchNormBackward(rows, cols, d_bx.data(), d_dy.data(), d_mean.data(), d_var.data(),
                             affine ? d_gamma.data() : nullptr, 1e-3f, d_dgamma.data(),
                             d_dbeta.data(), d_bdx.data());
    ExpectClose(Down(d_dgamma), dgamma, 1e-4f, 1e-3f, "BatchNormBackward dgamma" + what);
    ExpectClose(Down(d_dbeta), dbeta, 1e-4f, 1e-3f, "BatchNormBackward dbeta" + what);
    ExpectClose(Down(d_bdx), dx, 1e-3f, 1e-5f, "BatchNormBackward dx" + what);
  }

  // Embedding rows, with repeated ids.
  const int64_t n = 300, dim = 6, vocab = 20;
  const Floats ids = Labels(n, vocab, 75);
  const Floats table = Uniform(vocab * dim, 76);
  Floats rows_out(n * dim);
  cpu_->GatherRows(n, dim, ids.data(), table.data(), rows_out.data());
  DeviceBuffer d_ids = Up(ids), d_table = Up(table), d_rows = Junk(n * dim);
  cuda_->GatherRows(n, dim, d_ids.data(), d_table.data(), d_rows.data());
  EXPECT_EQ(Down(d_rows), rows_out) << "GatherRows";
  const Floats g = Uniform(n * dim, 77);
  Floats dtable(vocab * dim);
  cpu_->ScatterAddRows(n, dim, vocab, ids.data(), g.data(), dtable.data());
  DeviceBuffer d_g = Up(g), d_dtable = Junk(vocab * dim);
  cuda_->ScatterAddRows(n, dim, vocab, d_ids.data(), d_g.data(), d_dtable.data());
  ExpectClose(Down(d_dtable), dtable, 1e-5f, 1e-5f, "ScatterAddRows");
  DeviceBuffer d_copy = Junk(vocab * dim);
  cuda_->Copy(vocab * dim, d_table.data(), d_copy.data());
  EXPECT_EQ(Down(d_copy), table) << "Copy";
}

// ---- A whole training step: the same model, weights, batch and dropout seed on both
// backends must give the same loss and gradients (to 1e-4 of each tensor's scale).

std::string Seq(int input, const std::vector<std::string>& layers) {
  std::string s = absl::StrCat(
      R"({"class_name":"Sequential","config":{"name":"m","layers":[{"class_name":"InputLayer","config":{"batch_input_shape":[null,)",
      input, "]}}");
  for (const std::string& l : layers) s += "," + l;
  return s + "]}}";
}

std::string DenseLayer(int units, const std::string& activation) {
  return absl::StrCat(R"({"class_name":"Dense","config":{"units":)", units,
                      R"(,"activation":")", activation, R"(","use_bias":true}})");
}

std::string DropoutLayer(float rate) {
  return absl::StrCat(R"({"class_name":"Dropout","config":{"rate":)", rate, "}}");
}

// max |got - want| <= rtol * max |want| over the tensor: elementwise relative error is
// meaningless for gradients near zero, the tensor's scale is what training sees.
void ExpectTensorClose(const Tensor& got, const Tensor& want, double rtol,
                       const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  double scale = 0.0, worst = 0.0;
  int64_t worst_at = 0;
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    scale = std::max(scale, static_cast<double>(std::fabs(want.data()[i])));
    const double d = std::fabs(static_cast<double>(got.data()[i]) - want.data()[i]);
    if (!(d <= worst)) {  // also catches NaN
      worst = d;
      worst_at = i;
    }
  }
  EXPECT_LE(worst, rtol * std::max(scale, 1e-6))
      << what << ": worst at [" << worst_at << "] cuda " << got.data()[worst_at] << " vs cpu "
      << want.data()[worst_at] << " (tensor scale " << scale << ")";
}

std::string Layer(const std::string& class_name, const std::string& config) {
  return absl::StrCat(R"({"class_name":")", class_name, R"(","config":{)", config, "}}");
}

struct ModelCase {
  std::string name;
  std::string json;
  LossConfig loss;
  bool sparse_labels;
  int64_t vocab = 0;  // > 0: x holds ids in [0, vocab) (an Embedding first)
};

TEST_F(CudaBackendTest, ModelTrainStepMatchesCpu) {
  const int input = 20;
  const std::vector<ModelCase> cases = {
      {"relu+dropout, softmax, sparse CE (fused)",
       Seq(input, {DenseLayer(64, "relu"), DropoutLayer(0.3f), DenseLayer(10, "softmax")}),
       {LossConfig::Kind::kSparseCategoricalCrossentropy, false},
       true},
      {"tanh, sigmoid, linear, MSE",
       Seq(input, {DenseLayer(16, "tanh"), DenseLayer(8, "sigmoid"), DenseLayer(3, "linear")}),
       {LossConfig::Kind::kMeanSquaredError, false},
       false},
      {"sigmoid+dropout, sigmoid output, BCE (fused)",
       Seq(input, {DenseLayer(12, "sigmoid"), DropoutLayer(0.5f), DenseLayer(1, "sigmoid")}),
       {LossConfig::Kind::kBinaryCrossentropy, false},
       false},
      {"relu, logits, categorical CE from logits",
       Seq(input, {DenseLayer(32, "relu"), DenseLayer(5, "linear")}),
       {LossConfig::Kind::kCategoricalCrossentropy, true},
       false},
      {"conv, batch norm, max/avg pooling, strided conv, softmax, sparse CE (fused)",
       Seq(input,
           {Layer("Reshape", R"("target_shape":[5,4,1])"),
            Layer("Conv2D", R"("filters":6,"kernel_size":3,"padding":"same","activation":"relu")"),
            Layer("BatchNormalization", ""),
            Layer("MaxPooling2D", R"("pool_size":2,"strides":1,"padding":"same")"),
            Layer("Conv2D", R"("filters":4,"kernel_size":2,"strides":2,"padding":"same","activation":"tanh")"),
            Layer("AveragePooling2D", R"("pool_size":2,"padding":"same")"),
            Layer("Flatten", ""), DropoutLayer(0.2f), DenseLayer(10, "softmax")}),
       {LossConfig::Kind::kSparseCategoricalCrossentropy, false},
       true},
      {"conv, global average pooling, MSE",
       Seq(input, {Layer("Reshape", R"("target_shape":[4,5,1])"),
                   Layer("Conv2D", R"("filters":8,"kernel_size":[2,3],"activation":"sigmoid")"),
                   Layer("GlobalAveragePooling2D", ""), DenseLayer(3, "linear")}),
       {LossConfig::Kind::kMeanSquaredError, false},
       false},
      {"embedding, global average pooling 1D, softmax, sparse CE",
       Seq(input, {Layer("Embedding", R"("input_dim":50,"output_dim":8)"),
                   Layer("GlobalAveragePooling1D", ""), DenseLayer(5, "softmax")}),
       {LossConfig::Kind::kSparseCategoricalCrossentropy, false},
       true,
       50},
  };
  for (const ModelCase& c : cases) {
    SCOPED_TRACE(c.name);
    auto cpu_model = Model::FromKerasJsonText(c.json, cpu_.get());
    auto cuda_model = Model::FromKerasJsonText(c.json, cuda_.get());
    ASSERT_TRUE(cpu_model.ok()) << cpu_model.status();
    ASSERT_TRUE(cuda_model.ok()) << cuda_model.status();
    ASSERT_TRUE((*cpu_model)->SetLoss(c.loss).ok());
    ASSERT_TRUE((*cuda_model)->SetLoss(c.loss).ok());

    const int64_t batch = 64;
    const int64_t out = (*cpu_model)->output_size();
    const std::vector<Tensor> weights = (*cpu_model)->InitialValues(123);
    Tensor x({batch, input}, c.vocab > 0 ? Labels(batch * input, c.vocab, 89)
                                          : Uniform(batch * input, 90, -2.0f, 2.0f));
    Tensor y;
    if (c.sparse_labels) {
      y = Tensor({batch}, Labels(batch, out, 91));
    } else if (c.loss.kind == LossConfig::Kind::kMeanSquaredError) {
      y = Tensor({batch, out}, Uniform(batch * out, 92));
    } else if (c.loss.kind == LossConfig::Kind::kBinaryCrossentropy) {
      Floats t = Uniform(batch * out, 93, 0.0f, 1.0f);
      for (float& v : t) v = v < 0.5f ? 0.0f : 1.0f;
      y = Tensor({batch, out}, t);
    } else {
      Floats t(batch * out, 0.0f);
      const Floats ids = Labels(batch, out, 94);
      for (int64_t r = 0; r < batch; ++r) t[r * out + static_cast<int64_t>(ids[r])] = 1.0f;
      y = Tensor({batch, out}, t);
    }

    for (uint64_t dropout_seed : {uint64_t{7}, uint64_t{8}}) {
      std::vector<Tensor> cpu_grads, cuda_grads;
      auto cpu_step = (*cpu_model)->TrainStep(weights, x, y, dropout_seed, &cpu_grads);
      auto cuda_step = (*cuda_model)->TrainStep(weights, x, y, dropout_seed, &cuda_grads);
      ASSERT_TRUE(cpu_step.ok()) << cpu_step.status();
      ASSERT_TRUE(cuda_step.ok()) << cuda_step.status();
      EXPECT_NEAR(cuda_step->loss_sum, cpu_step->loss_sum, 1e-4 * std::fabs(cpu_step->loss_sum))
          << "seed " << dropout_seed;
      EXPECT_EQ(cuda_step->samples, cpu_step->samples);
      // Near-ties in argmax could legitimately flip; random data has none at this size.
      EXPECT_EQ(cuda_step->correct, cpu_step->correct);
      ASSERT_EQ(cuda_grads.size(), cpu_grads.size());
      const auto& vars = (*cpu_model)->variables();
      for (size_t v = 0; v < cpu_grads.size(); ++v) {
        ExpectTensorClose(cuda_grads[v], cpu_grads[v], 1e-4,
                          absl::StrCat("gradient of ", vars[v].name, " seed ", dropout_seed));
      }
    }

    auto cpu_eval = (*cpu_model)->Evaluate(weights, x, y);
    auto cuda_eval = (*cuda_model)->Evaluate(weights, x, y);
    ASSERT_TRUE(cpu_eval.ok() && cuda_eval.ok());
    EXPECT_NEAR(cuda_eval->loss_sum, cpu_eval->loss_sum, 1e-4 * std::fabs(cpu_eval->loss_sum));
    EXPECT_EQ(cuda_eval->correct, cpu_eval->correct);

    auto cpu_pred = (*cpu_model)->Predict(weights, x);
    auto cuda_pred = (*cuda_model)->Predict(weights, x);
    ASSERT_TRUE(cpu_pred.ok() && cuda_pred.ok());
    ExpectTensorClose(*cuda_pred, *cpu_pred, 1e-4, "Predict");
  }
}

}  // namespace
}  // namespace pstrain
