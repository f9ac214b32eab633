#include "common/math/cpu_backend.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

std::vector<float> RandomVector(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Element (i, j) of op(M) where M is stored row-major with `cols` columns.
float At(const std::vector<float>& m, int64_t cols, bool trans, int64_t i, int64_t j) {
  return trans ? m[j * cols + i] : m[i * cols + j];
}

TEST(CpuBackendTest, GemmMatchesNaiveForAllTransposes) {
  auto backend = CreateCpuBackend();
  const int64_t m = 7, n = 13, k = 5;  // awkward: odd, not multiples of SIMD widths
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const std::vector<float> a = RandomVector(m * k, 1);
      const std::vector<float> b = RandomVector(k * n, 2);
      std::vector<float> c = RandomVector(m * n, 3);
      std::vector<float> want(m * n);
      const int64_t a_cols = ta ? m : k;
      const int64_t b_cols = tb ? k : n;
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          double s = 0.0;
          for (int64_t p = 0; p < k; ++p) {
            s += At(a, a_cols, ta, i, p) * At(b, b_cols, tb, p, j);
          }
          want[i * n + j] = static_cast<float>(1.5 * s + 0.5 * c[i * n + j]);
        }
      }
      backend->Gemm(ta, tb, m, n, k, 1.5f, a.data(), b.data(), 0.5f, c.data());
      for (int64_t i = 0; i < m * n; ++i) {
        EXPECT_NEAR(c[i], want[i], 1e-4) << "ta=" << ta << " tb=" << tb << " i=" << i;
      }
    }
  }
}

TEST(CpuBackendTest, GemmBetaZeroIgnoresNan) {
  auto backend = CreateCpuBackend();
  std::vector<float> a = {1, 2}, b = {3, 4};
  std::vector<float> c = {std::nanf("")};
  backend->Gemm(false, false, 1, 1, 2, 1.0f, a.data(), b.data(), 0.0f, c.data());
  EXPECT_FLOAT_EQ(c[0], 11.0f);
}

TEST(CpuBackendTest, AllocateAndCopyRoundTrip) {
  auto backend = CreateCpuBackend();
  auto buf = backend->Allocate(5);
  ASSERT_TRUE(buf.ok());
  std::vector<float> in = {1, 2, 3, 4, 5}, out(5);
  ASSERT_TRUE(backend->CopyToDevice(in.data(), 5, buf->data()).ok());
  ASSERT_TRUE(backend->CopyToHost(buf->data(), 5, out.data()).ok());
  EXPECT_EQ(in, out);
  EXPECT_FALSE(backend->Allocate(-1).ok());
}

TEST(CpuBackendTest, SoftmaxSparseXentMatchesDirectFormula) {
  auto backend = CreateCpuBackend();
  const int64_t rows = 3, cols = 4;
  const std::vector<float> z = RandomVector(rows * cols, 4);
  const std::vector<float> labels = {0, 3, 2};
  std::vector<float> loss(rows), grad(rows * cols);
  backend->LossForwardBackward(LossKind::kSoftmaxSparseCrossEntropy, rows, cols, z.data(),
                               labels.data(), 0.5f, loss.data(), grad.data());
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0.0;
    for (int64_t c = 0; c < cols; ++c) sum += std::exp(z[r * cols + c]);
    const int y = static_cast<int>(labels[r]);
    EXPECT_NEAR(loss[r], -std::log(std::exp(z[r * cols + y]) / sum), 1e-5);
    for (int64_t c = 0; c < cols; ++c) {
      const double p = std::exp(z[r * cols + c]) / sum;
      EXPECT_NEAR(grad[r * cols + c], 0.5 * (p - (c == y ? 1.0 : 0.0)), 1e-5);
    }
  }
}

TEST(CpuBackendTest, SoftmaxXentLargeLogitsStayFinite) {
  auto backend = CreateCpuBackend();
  const std::vector<float> z = {1000.0f, -1000.0f, 0.0f, 3e4f, -3e4f, 3e4f};
  const std::vector<float> labels = {1, 0};
  std::vector<float> loss(2), grad(6);
  backend->LossForwardBackward(LossKind::kSoftmaxSparseCrossEntropy, 2, 3, z.data(),
                               labels.data(), 1.0f, loss.data(), grad.data());
  EXPECT_NEAR(loss[0], 2000.0f, 1e-2);
  EXPECT_NEAR(loss[1], std::log(2.0f), 1e-5);
  for (float g : grad) EXPECT_TRUE(std::isfinite(g));
  EXPECT_NEAR(grad[0], 1.0f, 1e-6);
  EXPECT_NEAR(grad[1], -1.0f, 1e-6);
  std::vector<float> y(6);
  backend->ActivationForward(Activation::kSoftmax, 2, 3, z.data(), y.data());
  for (float v : y) EXPECT_TRUE(std::isfinite(v));
  EXPECT_NEAR(y[3], 0.5f, 1e-6);
}

TEST(CpuBackendTest, SigmoidBceLargeLogitsStayFinite) {
  auto backend = CreateCpuBackend();
  const std::vector<float> z = {500.0f, -500.0f};
  const std::vector<float> t = {0.0f, 0.0f};
  std::vector<float> loss(2), grad(2);
  backend->LossForwardBackward(LossKind::kSigmoidBinaryCrossEntropy, 2, 1, z.data(), t.data(),
                               1.0f, loss.data(), grad.data());
  EXPECT_NEAR(loss[0], 500.0f, 1e-3);
  EXPECT_NEAR(loss[1], 0.0f, 1e-6);
  EXPECT_NEAR(grad[0], 1.0f, 1e-6);
}

TEST(CpuBackendTest, DropoutIsDeterministicAndScaled) {
  auto backend = CreateCpuBackend();
  const int64_t n = 20000;
  std::vector<float> x(n, 1.0f), mask(n), y(n), mask2(n), y2(n);
  backend->DropoutForward(n, 0.25f, 42, x.data(), mask.data(), y.data());
  backend->DropoutForward(n, 0.25f, 42, x.data(), mask2.data(), y2.data());
  EXPECT_EQ(mask, mask2);
  int64_t dropped = 0;
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    if (mask[i] == 0.0f) {
      ++dropped;
    } else {
      EXPECT_FLOAT_EQ(mask[i], 1.0f / 0.75f);
    }
    sum += y[i];
  }
  EXPECT_NEAR(static_cast<double>(dropped) / n, 0.25, 0.02);
  EXPECT_NEAR(sum / n, 1.0, 0.03);  // inverted dropout keeps the expectation
  backend->DropoutForward(n, 0.25f, 43, x.data(), mask2.data(), y2.data());
  EXPECT_NE(mask, mask2);
}

TEST(CpuBackendTest, BiasColumnSumsAndCountCorrect) {
  auto backend = CreateCpuBackend();
  std::vector<float> x = {1, 2, 3, 4, 5, 6};
  const std::vector<float> bias = {10, 20, 30};
  backend->AddBias(2, 3, bias.data(), x.data());
  EXPECT_EQ(x, (std::vector<float>{11, 22, 33, 14, 25, 36}));
  std::vector<float> sums(3);
  backend->ColumnSums(2, 3, x.data(), sums.data());
  EXPECT_EQ(sums, (std::vector<float>{25, 47, 69}));
  const std::vector<float> labels = {2, 0};
  std::vector<float> correct(2);
  backend->CountCorrect(AccuracyKind::kSparseCategorical, 2, 3, x.data(), labels.data(), 0.5f,
                        correct.data());
  EXPECT_EQ(correct, (std::vector<float>{1, 0}));
}

double Dot(const std::vector<float>& a, const std::vector<float>& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += static_cast<double>(a[i]) * b[i];
  return sum;
}

// Col2Im is Im2Col's transpose, and the pooling backwards are their forwards' (linear at a
// fixed argmax): <F(x), g> == <x, B(g)> for every window shape, padding and stride.
TEST(CpuBackendTest, WindowOpsBackwardsAreTheForwardsTransposes) {
  auto backend = CreateCpuBackend();
  Window2D w;
  w.batch = 2;
  w.in_h = 7;
  w.in_w = 6;
  w.channels = 3;
  for (int64_t k : {1, 2, 3}) {
    for (int64_t s : {1, 2}) {
      // As TensorFlow pads: less than a window, so no window is all padding.
      for (int64_t pad = 0; pad < k; ++pad) {
        w.k_h = k;
        w.k_w = k + 1;
        w.stride_h = s;
        w.stride_w = 1;
        w.pad_top = pad;
        w.pad_left = pad;
        w.out_h = (w.in_h + 2 * pad - w.k_h) / s + 1;
        w.out_w = (w.in_w + 2 * pad - w.k_w) + 1;
        const size_t in = w.batch * w.in_h * w.in_w * w.channels;
        const size_t out = w.batch * w.out_h * w.out_w * w.channels;
        const size_t cols = out * w.k_h * w.k_w;
        const std::vector<float> x = RandomVector(in, 1), g_cols = RandomVector(cols, 2),
                                 g = RandomVector(out, 3);
        std::vector<float> c(cols), dx(in), y(out), arg(out);
        backend->Im2Col(w, x.data(), c.data());
        backend->Col2Im(w, g_cols.data(), dx.data());
        EXPECT_NEAR(Dot(c, g_cols), Dot(x, dx), 1e-3) << "im2col k=" << k << " s=" << s;
        backend->AvgPoolForward(w, x.data(), y.data());
        backend->AvgPoolBackward(w, g.data(), dx.data());
        EXPECT_NEAR(Dot(y, g), Dot(x, dx), 1e-3) << "avg pool k=" << k << " s=" << s;
        backend->MaxPoolForward(w, x.data(), y.data(), arg.data());
        backend->MaxPoolBackward(w, g.data(), arg.data(), dx.data());
        EXPECT_NEAR(Dot(y, g), Dot(x, dx), 1e-3) << "max pool k=" << k << " s=" << s;
      }
    }
  }
}

}  // namespace
}  // namespace pstrain
