#include "common/model/optimizer.h"

#include <algorithm>
#include <cctype>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/finite.h"
#include "nlohmann/json.hpp"

namespace pstrain {

using json = nlohmann::json;

std::vector<float>* OptimizerState::AddSlot(const std::string& name, float initial_value) {
  slots_.emplace_back(name, std::vector<float>(num_elements_, initial_value));
  return &slots_.back().second;
}

std::vector<float>* OptimizerState::slot(const std::string& name) {
  for (auto& s : slots_) {
    if (s.first == name) return &s.second;
  }
  return nullptr;
}

const std::vector<float>* OptimizerState::slot(const std::string& name) const {
  for (const auto& s : slots_) {
    if (s.first == name) return &s.second;
  }
  return nullptr;
}

std::vector<std::pair<std::string, std::vector<float>*>> OptimizerState::slots() {
  std::vector<std::pair<std::string, std::vector<float>*>> out;
  for (auto& s : slots_) out.emplace_back(s.first, &s.second);
  return out;
}

namespace {

std::string Lower(const std::string& s) {
  std::string out;
  for (char c : s) out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  return out;
}

// The kind `in` names: its kind, or a name from a client that sends no kind.
absl::StatusOr<OptimizerKind> ResolveKind(const OptimizerConfig& in) {
  if (in.kind() == OPTIMIZER_KIND_UNSPECIFIED) return OptimizerKindFromName(in.name());
  if (!OptimizerKind_IsValid(in.kind()) || OptimizerKindName(in.kind()).empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown optimizer kind ", static_cast<int>(in.kind()),
        " (supported: sgd, adam, adagrad, rmsprop; a client newer than this ps?)"));
  }
  if (!in.name().empty()) {
    absl::StatusOr<OptimizerKind> named = OptimizerKindFromName(in.name());
    if (!named.ok() || *named != in.kind()) {
      return absl::InvalidArgumentError(absl::StrCat("optimizer name \"", in.name(),
                                                     "\" and kind ", OptimizerKindName(in.kind()),
                                                     " disagree; send one of them"));
    }
  }
  return in.kind();
}

// Fills Keras's defaults into the fields that are not set; a field that is set keeps its
// value and is range-checked below (an explicit learning_rate 0 is refused, never
// replaced by the default).
absl::StatusOr<OptimizerConfig> Resolve(const OptimizerConfig& in) {
  OptimizerConfig c = in;
  absl::StatusOr<OptimizerKind> kind = ResolveKind(in);
  if (!kind.ok()) return kind.status();
  c.set_kind(*kind);
  c.set_name(std::string(OptimizerKindName(*kind)));
  const std::string& n = c.name();
  float default_lr = 0.001f;
  switch (*kind) {
    case OPTIMIZER_SGD:
      default_lr = 0.01f;
      break;
    case OPTIMIZER_ADAM:
      if (!c.has_beta_1()) c.set_beta_1(0.9f);
      if (!c.has_beta_2()) c.set_beta_2(0.999f);
      if (!c.has_epsilon()) c.set_epsilon(1e-7f);
      break;
    case OPTIMIZER_ADAGRAD:
      if (!c.has_initial_accumulator_value()) c.set_initial_accumulator_value(0.1f);
      if (!c.has_epsilon()) c.set_epsilon(1e-7f);
      break;
    case OPTIMIZER_RMSPROP:
      if (!c.has_rho()) c.set_rho(0.9f);
      if (!c.has_epsilon()) c.set_epsilon(1e-7f);
      break;
    default:  // ResolveKind returns only the kinds above
      break;
  }
  if (!c.has_learning_rate()) c.set_learning_rate(default_lr);
  if (!c.has_momentum()) c.set_momentum(0.0f);
  // The fields an optimizer does not use stay as given (unset); each must still be in
  // range, so that a config that other code reads the same way is valid everywhere.
  auto bad = [&n](const char* field, float v, const char* want) {
    return absl::InvalidArgumentError(absl::StrCat("optimizer ", n, ": ", field, " ",
                                                   DescribeFloat(v), " is out of range (want ",
                                                   want, ")"));
  };
  if (!(c.learning_rate() > 0.0f) || !std::isfinite(c.learning_rate())) {
    return bad("learning_rate", c.learning_rate(), "a finite number > 0");
  }
  if (!(c.momentum() >= 0.0f && c.momentum() <= 1.0f)) {
    return bad("momentum", c.momentum(), "in [0, 1]");
  }
  if (!(c.beta_1() >= 0.0f && c.beta_1() < 1.0f)) return bad("beta_1", c.beta_1(), "in [0, 1)");
  if (!(c.beta_2() >= 0.0f && c.beta_2() < 1.0f)) return bad("beta_2", c.beta_2(), "in [0, 1)");
  if (!(c.rho() >= 0.0f && c.rho() < 1.0f)) return bad("rho", c.rho(), "in [0, 1)");
  // 0 divides 0 by 0 for a gradient of 0 (Adam's m / (sqrt(v) + epsilon)): NaN weights.
  if (c.has_epsilon() && !(c.epsilon() > 0.0f && std::isfinite(c.epsilon()))) {
    return bad("epsilon", c.epsilon(), "a finite number > 0");
  }
  if (!(c.initial_accumulator_value() >= 0.0f) ||
      !std::isfinite(c.initial_accumulator_value())) {
    return bad("initial_accumulator_value", c.initial_accumulator_value(),
               "a finite number >= 0");
  }
  if (!NonFinitePolicy_IsValid(c.nonfinite())) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer ", n, ": unknown nonfinite policy ", c.nonfinite()));
  }
  if (c.lr_schedule() == "exponential_decay") {
    if (!(c.decay_steps() > 0.0f) || !std::isfinite(c.decay_steps())) {
      return bad("decay_steps", c.decay_steps(), "a finite number > 0");
    }
    if (!(c.decay_rate() > 0.0f) || !std::isfinite(c.decay_rate())) {
      return bad("decay_rate", c.decay_rate(), "a finite number > 0");
    }
  } else if (!c.lr_schedule().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer ", n, ": unknown learning-rate schedule \"", c.lr_schedule(),
        "\" (supported: a constant, exponential_decay)"));
  }
  return c;
}

}  // namespace

absl::StatusOr<OptimizerKind> OptimizerKindFromName(absl::string_view name) {
  const std::string lower = Lower(std::string(name));
  if (lower == "sgd") return OPTIMIZER_SGD;
  if (lower == "adam") return OPTIMIZER_ADAM;
  if (lower == "adagrad") return OPTIMIZER_ADAGRAD;
  if (lower == "rmsprop") return OPTIMIZER_RMSPROP;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown optimizer \"", name, "\" (supported: sgd, adam, adagrad, rmsprop)"));
}

absl::string_view OptimizerKindName(OptimizerKind kind) {
  switch (kind) {
    case OPTIMIZER_SGD:
      return "sgd";
    case OPTIMIZER_ADAM:
      return "adam";
    case OPTIMIZER_ADAGRAD:
      return "adagrad";
    case OPTIMIZER_RMSPROP:
      return "rmsprop";
    default:
      return "";
  }
}

float LearningRateAt(const OptimizerConfig& config, int64_t iterations) {
  if (config.lr_schedule() != "exponential_decay") return config.learning_rate();
  double exponent = static_cast<double>(iterations) / config.decay_steps();
  if (config.staircase()) exponent = std::floor(exponent);
  return static_cast<float>(config.learning_rate() * std::pow(config.decay_rate(), exponent));
}

bool Optimizer::UpdateStaysFinite(absl::Span<const float> gradient,
                                  absl::Span<const float> variable,
                                  const OptimizerState& state) const {
  std::vector<float> value(variable.begin(), variable.end());
  OptimizerState copy = state;
  Apply(gradient, absl::MakeSpan(value), &copy);
  if (FirstNonFinite(value) >= 0) return false;
  for (const auto& [name, slot] : copy.slots()) {
    if (FirstNonFinite(*slot) >= 0) return false;
  }
  return true;
}

bool Optimizer::ApplyInto(absl::Span<const float> gradient, absl::Span<const float> variable,
                          const OptimizerState& state, absl::Span<float> out_variable,
                          OptimizerState* out_state) const {
  std::copy(variable.begin(), variable.end(), out_variable.begin());
  *out_state = state;
  Apply(gradient, out_variable, out_state);
  if (FirstNonFinite(out_variable) >= 0) return false;
  for (const auto& [name, slot] : out_state->slots()) {
    if (FirstNonFinite(*slot) >= 0) return false;
  }
  return true;
}

bool Optimizer::RowUpdatesStayFinite(absl::Span<const int64_t> rows,
                                     absl::Span<const float> row_gradients,
                                     absl::Span<const float> variable,
                                     const OptimizerState& state) const {
  if (rows.empty()) return true;
  // The rows and their slots as a table of their own, rows 0..n-1.
  const size_t width = row_gradients.size() / rows.size();
  std::vector<float> value(rows.size() * width);
  OptimizerState compact(static_cast<int64_t>(value.size()));
  compact.iterations_ = state.iterations_;
  for (const auto& [name, slot] : state.slots_) compact.slots_.push_back({name, {}});
  std::vector<int64_t> compact_rows(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    compact_rows[i] = static_cast<int64_t>(i);
    const size_t from = static_cast<size_t>(rows[i]) * width;
    std::copy_n(variable.data() + from, width, value.data() + i * width);
    for (size_t k = 0; k < state.slots_.size(); ++k) {
      const std::vector<float>& slot = state.slots_[k].second;
      compact.slots_[k].second.insert(compact.slots_[k].second.end(), slot.begin() + from,
                                      slot.begin() + from + width);
    }
  }
  ApplyRows(compact_rows, row_gradients, absl::MakeSpan(value), &compact);
  if (FirstNonFinite(value) >= 0) return false;
  for (const auto& [name, slot] : compact.slots_) {
    if (FirstNonFinite(slot) >= 0) return false;
  }
  return true;
}

namespace {

// 1 when x is NaN or an infinity (its exponent bits all ones), else 0. Integer
// arithmetic that the check loops below OR together: GCC vectorises that reduction,
// where a reduction of float comparisons into a bool stayed scalar (about 4x slower).
inline uint32_t NonFinite(float x) {
  constexpr uint32_t kExponentMask = 0x7f800000u;
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return static_cast<uint32_t>((bits & kExponentMask) == kExponentMask);
}

// What every optimizer shares: its resolved config, and an Apply that hands the update
// raw pointers (absl::Span's checked operator[] keeps GCC from vectorising the loops),
// the learning rate at this step, and counts the step.
class KerasOptimizer : public Optimizer {
 public:
  explicit KerasOptimizer(OptimizerConfig c) : c_(std::move(c)) {}
  std::string name() const override { return c_.name(); }
  const OptimizerConfig& config() const override { return c_; }

  void Apply(absl::Span<const float> g, absl::Span<float> w, OptimizerState* s) const final {
    Update(g.data(), w.data(), w.size(), LearningRateAt(c_, s->iterations()), s, 0);
    s->set_iterations(s->iterations() + 1);
  }

  void ApplyRows(absl::Span<const int64_t> rows, absl::Span<const float> g, absl::Span<float> w,
                 OptimizerState* s) const final {
    if (rows.empty()) return;
    const size_t width = g.size() / rows.size();
    const float lr = LearningRateAt(c_, s->iterations());
    for (size_t i = 0; i < rows.size(); ++i) {
      const size_t offset = static_cast<size_t>(rows[i]) * width;
      Update(g.data() + i * width, w.data() + offset, width, lr, s, offset);
    }
    s->set_iterations(s->iterations() + 1);
  }

  bool ApplyInto(absl::Span<const float> g, absl::Span<const float> w, const OptimizerState& s,
                 absl::Span<float> w_out, OptimizerState* s_out) const final {
    // The kernel only reads w and s when it writes elsewhere.
    const bool finite =
        UpdateInto(g.data(), const_cast<float*>(w.data()), w_out.data(), w.size(),
                   LearningRateAt(c_, s.iterations()), const_cast<OptimizerState*>(&s), s_out);
    s_out->set_iterations(s.iterations() + 1);
    return finite;
  }

  bool UpdateStaysFinite(absl::Span<const float> g, absl::Span<const float> w,
                         const OptimizerState& s) const final {
    // The kernels store nothing when they only check, so w and the slots stay unchanged.
    return UpdateIsFinite(g.data(), const_cast<float*>(w.data()), w.size(),
                          LearningRateAt(c_, s.iterations()), const_cast<OptimizerState*>(&s), 0);
  }

  bool RowUpdatesStayFinite(absl::Span<const int64_t> rows, absl::Span<const float> g,
                            absl::Span<const float> w, const OptimizerState& s) const final {
    if (rows.empty()) return true;
    const size_t width = g.size() / rows.size();
    const float lr = LearningRateAt(c_, s.iterations());
    bool finite = true;
    for (size_t i = 0; i < rows.size(); ++i) {
      const size_t offset = static_cast<size_t>(rows[i]) * width;
      finite &= UpdateIsFinite(g.data() + i * width, const_cast<float*>(w.data()) + offset, width,
                               lr, const_cast<OptimizerState*>(&s), offset);
    }
    return finite;
  }

 protected:
  // One update of the n elements of w from gradient g: w and g start at element `offset`
  // of the variable, whose slots `s` holds (from element 0) with the count of updates
  // before this one.
  virtual void Update(const float* __restrict g, float* __restrict w, size_t n, float lr,
                      OptimizerState* s, size_t offset) const = 0;
  // The same update's arithmetic without storing it: whether every result is finite.
  // Each optimizer runs one kernel for both (kStore true or false), so the check sees
  // exactly the values Update would store.
  virtual bool UpdateIsFinite(const float* g, float* w, size_t n, float lr,
                              OptimizerState* s, size_t offset) const = 0;
  // The same update of all n elements of w and s written to w_out and s_out's slots
  // (neither overlapping the inputs; w and s only read): whether every result is finite.
  virtual bool UpdateInto(const float* g, float* w, float* w_out, size_t n, float lr,
                          OptimizerState* s, OptimizerState* s_out) const = 0;

  const OptimizerConfig c_;
};

// What a kernel does with the update it computes.
enum class KernelMode {
  kStore,  // writes it over its inputs (Apply, ApplyRows)
  kCheck,  // stores nothing, says whether every result is finite (UpdateStaysFinite)
  kInto,   // writes it to separate outputs and says whether every result is finite
           // (ApplyInto): the check and the update in one pass
};

// The Update, UpdateIsFinite and UpdateInto of an optimizer `Derived` that does all three
// with one kernel, Derived::Kernel<kMode>: the check runs exactly the arithmetic the update
// stores. Kernel(g, w, n, lr, s, offset, w_out, s_out): w_out and s_out are read only by
// kInto (null otherwise), whose outputs start at element 0 of w_out and at `offset` of
// s_out's slots, as the inputs do.
template <typename Derived>
class OneKernelOptimizer : public KerasOptimizer {
 public:
  explicit OneKernelOptimizer(OptimizerConfig c) : KerasOptimizer(std::move(c)) {}

 protected:
  void Update(const float* __restrict g, float* __restrict w, size_t n, float lr,
              OptimizerState* s, size_t offset) const final {
    static_cast<const Derived*>(this)->template Kernel<KernelMode::kStore>(g, w, n, lr, s, offset,
                                                                           nullptr, nullptr);
  }
  bool UpdateIsFinite(const float* g, float* w, size_t n, float lr, OptimizerState* s,
                      size_t offset) const final {
    return static_cast<const Derived*>(this)->template Kernel<KernelMode::kCheck>(
        g, w, n, lr, s, offset, nullptr, nullptr);
  }
  bool UpdateInto(const float* g, float* w, float* w_out, size_t n, float lr, OptimizerState* s,
                  OptimizerState* s_out) const final {
    return static_cast<const Derived*>(this)->template Kernel<KernelMode::kInto>(
        g, w, n, lr, s, 0, w_out, s_out);
  }
};

// Slot `name` of `s` from element `offset`; null when s is null (a kernel's unused output).
float* SlotData(OptimizerState* s, const char* name, size_t offset) {
  return s == nullptr ? nullptr : s->slot(name)->data() + offset;
}

class Sgd : public OneKernelOptimizer<Sgd> {
 public:
  using OneKernelOptimizer::OneKernelOptimizer;
  std::unique_ptr<OptimizerState> NewState(int64_t n) const override {
    auto s = std::make_unique<OptimizerState>(n);
    if (c_.momentum() > 0.0f) s->AddSlot("momentum", 0.0f);
    return s;
  }

 private:
  friend class OneKernelOptimizer<Sgd>;
  template <KernelMode kMode>
  bool Kernel(const float* __restrict g, float* __restrict w, size_t n, float lr,
              OptimizerState* s, size_t offset, float* __restrict w_out,
              OptimizerState* s_out) const {
    const float mu = c_.momentum();
    const bool nesterov = c_.nesterov();
    uint32_t nonfinite = 0;
    if (mu > 0.0f) {
      float* __restrict m = s->slot("momentum")->data() + offset;
      float* __restrict m_out = SlotData(s_out, "momentum", offset);
      for (size_t i = 0; i < n; ++i) {
        const float mi = mu * m[i] - lr * g[i];
        const float wi = w[i] + (nesterov ? mu * mi - lr * g[i] : mi);
        if constexpr (kMode == KernelMode::kStore) {
          m[i] = mi;
          w[i] = wi;
        } else {
          if constexpr (kMode == KernelMode::kInto) {
            m_out[i] = mi;
            w_out[i] = wi;
          }
          nonfinite |= NonFinite(mi) | NonFinite(wi);
        }
      }
    } else {
      for (size_t i = 0; i < n; ++i) {
        const float wi = w[i] - lr * g[i];
        if constexpr (kMode == KernelMode::kStore) {
          w[i] = wi;
        } else {
          if constexpr (kMode == KernelMode::kInto) w_out[i] = wi;
          nonfinite |= NonFinite(wi);
        }
      }
    }
    return nonfinite == 0;
  }
};

class Adam : public OneKernelOptimizer<Adam> {
 public:
  using OneKernelOptimizer::OneKernelOptimizer;
  std::unique_ptr<OptimizerState> NewState(int64_t n) const override {
    auto s = std::make_unique<OptimizerState>(n);
    s->AddSlot("momentum", 0.0f);
    s->AddSlot("velocity", 0.0f);
    return s;
  }

 private:
  friend class OneKernelOptimizer<Adam>;
  template <KernelMode kMode>
  bool Kernel(const float* __restrict g, float* __restrict w, size_t n, float lr,
              OptimizerState* s, size_t offset, float* __restrict w_out,
              OptimizerState* s_out) const {
    const double t = static_cast<double>(s->iterations() + 1);
    const float b1 = c_.beta_1(), b2 = c_.beta_2(), eps = c_.epsilon();
    // Keras: alpha = lr * sqrt(1 - beta_2^t) / (1 - beta_1^t); w -= alpha * m / (sqrt(v)+eps).
    const float alpha =
        static_cast<float>(lr * std::sqrt(1.0 - std::pow(b2, t)) / (1.0 - std::pow(b1, t)));
    float* __restrict m = s->slot("momentum")->data() + offset;
    float* __restrict v = s->slot("velocity")->data() + offset;
    float* __restrict m_out = SlotData(s_out, "momentum", offset);
    float* __restrict v_out = SlotData(s_out, "velocity", offset);
    uint32_t nonfinite = 0;
    for (size_t i = 0; i < n; ++i) {
      const float mi = m[i] + (g[i] - m[i]) * (1.0f - b1);
      const float vi = v[i] + (g[i] * g[i] - v[i]) * (1.0f - b2);
      const float wi = w[i] - alpha * mi / (std::sqrt(vi) + eps);
      if constexpr (kMode == KernelMode::kStore) {
        m[i] = mi;
        v[i] = vi;
        w[i] = wi;
      } else {
        if constexpr (kMode == KernelMode::kInto) {
          m_out[i] = mi;
          v_out[i] = vi;
          w_out[i] = wi;
        }
        nonfinite |= NonFinite(mi) | NonFinite(vi) | NonFinite(wi);
      }
    }
    return nonfinite == 0;
  }
};

class Adagrad : public OneKernelOptimizer<Adagrad> {
 public:
  using OneKernelOptimizer::OneKernelOptimizer;
  std::unique_ptr<OptimizerState> NewState(int64_t n) const override {
    auto s = std::make_unique<OptimizerState>(n);
    s->AddSlot("accumulator", c_.initial_accumulator_value());
    return s;
  }

 private:
  friend class OneKernelOptimizer<Adagrad>;
  template <KernelMode kMode>
  bool Kernel(const float* __restrict g, float* __restrict w, size_t n, float lr,
              OptimizerState* s, size_t offset, float* __restrict w_out,
              OptimizerState* s_out) const {
    const float eps = c_.epsilon();
    float* __restrict acc = s->slot("accumulator")->data() + offset;
    float* __restrict acc_out = SlotData(s_out, "accumulator", offset);
    uint32_t nonfinite = 0;
    for (size_t i = 0; i < n; ++i) {
      const float ai = acc[i] + g[i] * g[i];
      // Keras 3: epsilon inside the square root.
      const float wi = w[i] - lr * g[i] / std::sqrt(ai + eps);
      if constexpr (kMode == KernelMode::kStore) {
        acc[i] = ai;
        w[i] = wi;
      } else {
        if constexpr (kMode == KernelMode::kInto) {
          acc_out[i] = ai;
          w_out[i] = wi;
        }
        nonfinite |= NonFinite(ai) | NonFinite(wi);
      }
    }
    return nonfinite == 0;
  }
};

class RmsProp : public OneKernelOptimizer<RmsProp> {
 public:
  using OneKernelOptimizer::OneKernelOptimizer;
  std::unique_ptr<OptimizerState> NewState(int64_t n) const override {
    auto s = std::make_unique<OptimizerState>(n);
    s->AddSlot("velocity", 0.0f);
    if (c_.momentum() > 0.0f) s->AddSlot("momentum", 0.0f);
    return s;
  }

 private:
  friend class OneKernelOptimizer<RmsProp>;
  template <KernelMode kMode>
  bool Kernel(const float* __restrict g, float* __restrict w, size_t n, float lr,
              OptimizerState* s, size_t offset, float* __restrict w_out,
              OptimizerState* s_out) const {
    const float rho = c_.rho(), eps = c_.epsilon(), mu = c_.momentum();
    float* __restrict v = s->slot("velocity")->data() + offset;
    float* __restrict m = mu > 0.0f ? s->slot("momentum")->data() + offset : nullptr;
    float* __restrict v_out = SlotData(s_out, "velocity", offset);
    float* __restrict m_out = mu > 0.0f ? SlotData(s_out, "momentum", offset) : nullptr;
    uint32_t nonfinite = 0;
    for (size_t i = 0; i < n; ++i) {
      const float vi = rho * v[i] + (1.0f - rho) * g[i] * g[i];
      const float inc = lr * g[i] / std::sqrt(vi + eps);
      const float mi = m != nullptr ? mu * m[i] + inc : 0.0f;
      const float wi = w[i] - (m != nullptr ? mi : inc);
      if constexpr (kMode == KernelMode::kStore) {
        v[i] = vi;
        if (m != nullptr) m[i] = mi;
        w[i] = wi;
      } else {
        if constexpr (kMode == KernelMode::kInto) {
          v_out[i] = vi;
          if (m_out != nullptr) m_out[i] = mi;
          w_out[i] = wi;
        }
        nonfinite |= NonFinite(vi) | NonFinite(mi) | NonFinite(wi);
      }
    }
    return nonfinite == 0;
  }
};

}  // namespace

namespace {

// A non-trainable variable's rule: the "gradient" is an observation to average in.
class MovingAverage : public Optimizer {
 public:
  explicit MovingAverage(float momentum) {
    config_.set_name("moving_average");
    config_.set_momentum(momentum);
  }
  std::string name() const override { return "moving_average"; }
  const OptimizerConfig& config() const override { return config_; }
  std::unique_ptr<OptimizerState> NewState(int64_t n) const override {
    return std::make_unique<OptimizerState>(n);
  }
  void Apply(absl::Span<const float> observation, absl::Span<float> value,
             OptimizerState* s) const override {
    const float m = config_.momentum();
    const float* __restrict o = observation.data();
    float* __restrict v = value.data();
    // Keras's assign_moving_average: v -= (v - o) * (1 - m).
    for (size_t i = 0; i < value.size(); ++i) v[i] -= (v[i] - o[i]) * (1.0f - m);
    s->set_iterations(s->iterations() + 1);
  }
  void ApplyRows(absl::Span<const int64_t> rows, absl::Span<const float> observations,
                 absl::Span<float> value, OptimizerState* s) const override {
    if (rows.empty()) return;
    const float m = config_.momentum();
    const size_t width = observations.size() / rows.size();
    for (size_t i = 0; i < rows.size(); ++i) {
      const float* o = observations.data() + i * width;
      float* v = value.data() + static_cast<size_t>(rows[i]) * width;
      for (size_t k = 0; k < width; ++k) v[k] -= (v[k] - o[k]) * (1.0f - m);
    }
    s->set_iterations(s->iterations() + 1);
  }

 private:
  OptimizerConfig config_;
};

// "<base>/part_<digits>" -> "<base>", else "".
std::string ShardBase(const std::string& name) {
  const size_t at = name.rfind("/part_");
  if (at == std::string::npos || at + 6 == name.size()) return "";
  for (size_t i = at + 6; i < name.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return "";
  }
  return name.substr(0, at);
}

}  // namespace

absl::StatusOr<std::unique_ptr<UpdateRules>> UpdateRules::Create(const OptimizerConfig& config) {
  std::unique_ptr<UpdateRules> rules(new UpdateRules());
  auto optimizer = Optimizer::Create(config);
  if (!optimizer.ok()) return optimizer.status();
  rules->optimizer_ = std::move(*optimizer);
  for (const MovingAverageVariable& v : config.moving_averages()) {
    if (v.variable().empty()) {
      return absl::InvalidArgumentError("a moving-average variable has no name");
    }
    if (!(v.momentum() >= 0.0f && v.momentum() <= 1.0f)) {
      return absl::InvalidArgumentError(absl::StrCat("moving-average variable ", v.variable(),
                                                     ": momentum ", v.momentum(),
                                                     " is outside [0, 1]"));
    }
    for (const auto& [name, rule] : rules->moving_averages_) {
      if (name == v.variable()) {
        return absl::InvalidArgumentError(
            absl::StrCat("moving-average variable ", v.variable(), " is listed twice"));
      }
    }
    rules->moving_averages_.emplace_back(v.variable(),
                                         std::make_unique<MovingAverage>(v.momentum()));
  }
  return rules;
}

const Optimizer& UpdateRules::For(const std::string& variable) const {
  if (moving_averages_.empty()) return *optimizer_;
  const std::string base = ShardBase(variable);
  for (const auto& [name, rule] : moving_averages_) {
    if (name == variable || name == base) return *rule;
  }
  return *optimizer_;
}

void AddMovingAverageRules(const std::vector<VariableSpec>& variables, OptimizerConfig* config) {
  for (const VariableSpec& v : variables) {
    if (v.trainable) continue;
    MovingAverageVariable* rule = config->add_moving_averages();
    rule->set_variable(v.name);
    rule->set_momentum(v.moving_average_momentum);
  }
}

absl::StatusOr<std::unique_ptr<Optimizer>> Optimizer::Create(const OptimizerConfig& config) {
  auto resolved = Resolve(config);
  if (!resolved.ok()) return resolved.status();
  switch (resolved->kind()) {
    case OPTIMIZER_SGD:
      return std::unique_ptr<Optimizer>(new Sgd(*resolved));
    case OPTIMIZER_ADAM:
      return std::unique_ptr<Optimizer>(new Adam(*resolved));
    case OPTIMIZER_ADAGRAD:
      return std::unique_ptr<Optimizer>(new Adagrad(*resolved));
    default:  // Resolve returns only the four kinds
      return std::unique_ptr<Optimizer>(new RmsProp(*resolved));
  }
}

namespace {

// A JSON number that converts to a finite float (converting a larger double is undefined).
bool FitsFloat(const json& v) {
  const double d = v.get<double>();
  return std::isfinite(d) && std::fabs(d) <= static_cast<double>(FLT_MAX);
}

// keras.optimizers.schedules.ExponentialDecay as Keras serialises it inside an
// optimizer's config: {"class_name": "ExponentialDecay", "config": {...}}.
absl::Status ParseSchedule(const std::string& optimizer, const json& v, OptimizerConfig* c) {
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer ", optimizer, ": learning_rate schedule: ", what));
  };
  auto class_name = v.find("class_name");
  if (class_name == v.end() || !class_name->is_string()) return bad("no class_name");
  if (class_name->get<std::string>() != "ExponentialDecay") {
    return bad(absl::StrCat("\"", class_name->get<std::string>(),
                            "\" is unsupported (supported: ExponentialDecay)"));
  }
  auto cfg = v.find("config");
  if (cfg == v.end() || !cfg->is_object()) return bad("no config object");
  c->set_lr_schedule("exponential_decay");
  for (auto it = cfg->begin(); it != cfg->end(); ++it) {
    const std::string& key = it.key();
    const json& field = it.value();
    if (key == "name") continue;
    if (key == "staircase") {
      if (!field.is_boolean()) return bad("staircase must be a bool");
      c->set_staircase(field.get<bool>());
      continue;
    }
    if (!field.is_number()) return bad(absl::StrCat(key, " must be a number, got ", field.dump()));
    if (!FitsFloat(field)) return bad(absl::StrCat(key, " ", field.dump(), " is out of range"));
    const float f = field.get<float>();
    if (key == "initial_learning_rate") {
      c->set_learning_rate(f);
    } else if (key == "decay_steps") {
      c->set_decay_steps(f);
    } else if (key == "decay_rate") {
      c->set_decay_rate(f);
    } else {
      return bad(absl::StrCat("unsupported field \"", key, "\""));
    }
  }
  for (const char* required : {"initial_learning_rate", "decay_steps", "decay_rate"}) {
    if (!cfg->contains(required)) return bad(absl::StrCat("missing \"", required, "\""));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<OptimizerConfig> OptimizerConfigFromKeras(const json& value) {
  OptimizerConfig c;
  if (value.is_string()) {
    c.set_name(value.get<std::string>());
    return Resolve(c);
  }
  if (!value.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer must be a string or a Keras config object, got ", value.dump()));
  }
  auto cn = value.find("class_name");
  if (cn == value.end() || !cn->is_string()) {
    return absl::InvalidArgumentError("optimizer config has no string \"class_name\"");
  }
  c.set_name(cn->get<std::string>());
  // Reject an unknown optimizer before looking at its fields; the kind is read here once.
  absl::StatusOr<OptimizerKind> kind = OptimizerKindFromName(c.name());
  if (!kind.ok()) return kind.status();
  c.set_kind(*kind);
  const std::string name(OptimizerKindName(*kind));
  auto cfg = value.find("config");
  if (cfg != value.end() && !cfg->is_null()) {
    if (!cfg->is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat("optimizer ", name, ": \"config\" must be an object"));
    }
    for (auto it = cfg->begin(); it != cfg->end(); ++it) {
      const std::string& key = it.key();
      const json& v = it.value();
      auto number = [&](float* out) -> absl::Status {
        if (!v.is_number()) {
          return absl::InvalidArgumentError(absl::StrCat("optimizer ", name, ": ", key,
                                                         " must be a number, got ", v.dump()));
        }
        if (!FitsFloat(v)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "optimizer ", name, ": ", key, " ", v.dump(), " is out of range (not a float)"));
        }
        *out = v.get<float>();
        return absl::OkStatus();
      };
      auto unsupported = [&]() {
        return absl::InvalidArgumentError(
            absl::StrCat("optimizer ", name, ": ", key, " ", v.dump(), " is unsupported"));
      };
      float f = 0.0f;
      absl::Status st;
      if ((key == "learning_rate" || key == "lr") && v.is_object()) {
        st = ParseSchedule(name, v, &c);
      } else if (key == "learning_rate" || key == "lr") {
        st = number(&f);
        c.set_learning_rate(f);
      } else if (key == "momentum" && (*kind == OPTIMIZER_SGD || *kind == OPTIMIZER_RMSPROP)) {
        st = number(&f);
        c.set_momentum(f);
      } else if (key == "nesterov" && *kind == OPTIMIZER_SGD) {
        if (!v.is_boolean()) {
          return absl::InvalidArgumentError(
              absl::StrCat("optimizer ", name, ": nesterov must be a bool, got ", v.dump()));
        }
        c.set_nesterov(v.get<bool>());
      } else if (key == "beta_1" && *kind == OPTIMIZER_ADAM) {
        st = number(&f);
        c.set_beta_1(f);
      } else if (key == "beta_2" && *kind == OPTIMIZER_ADAM) {
        st = number(&f);
        c.set_beta_2(f);
      } else if (key == "epsilon" && *kind != OPTIMIZER_SGD) {
        st = number(&f);
        c.set_epsilon(f);
      } else if (key == "rho" && *kind == OPTIMIZER_RMSPROP) {
        st = number(&f);
        c.set_rho(f);
      } else if (key == "initial_accumulator_value" && *kind == OPTIMIZER_ADAGRAD) {
        st = number(&f);
        c.set_initial_accumulator_value(f);
      } else if (key == "name" || key == "is_legacy_optimizer" || key == "jit_compile" ||
                 key == "ema_momentum" || key == "ema_overwrite_frequency") {
        // Labels and compilation hints, or EMA settings that only matter with use_ema.
      } else if (key == "amsgrad" || key == "centered" || key == "use_ema") {
        if (!(v.is_null() || (v.is_boolean() && !v.get<bool>()))) return unsupported();
      } else if (key == "weight_decay" || key == "decay") {
        if (!(v.is_null() || (v.is_number() && v.get<double>() == 0.0))) return unsupported();
      } else if (key == "clipnorm" || key == "clipvalue" || key == "global_clipnorm" ||
                 key == "loss_scale_factor" || key == "gradient_accumulation_steps") {
        if (!v.is_null()) return unsupported();
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("optimizer ", name, ": unsupported field \"", key, "\""));
      }
      if (!st.ok()) return st;
    }
  }
  return Resolve(c);
}


json OptimizerConfigToKeras(const OptimizerConfig& config) {
  OptimizerConfig c = config;
  auto resolved = Resolve(config);
  if (resolved.ok()) c = *resolved;
  json cfg = json::object();
  std::string class_name = c.name();
  cfg["learning_rate"] = c.learning_rate();
  if (c.lr_schedule() == "exponential_decay") {
    cfg["learning_rate"] = json{
        {"class_name", "ExponentialDecay"},
        {"config",
         {{"initial_learning_rate", c.learning_rate()},
          {"decay_steps", c.decay_steps()},
          {"decay_rate", c.decay_rate()},
          {"staircase", c.staircase()}}}};
  }
  switch (c.kind()) {
    case OPTIMIZER_SGD:
      class_name = "SGD";
      cfg["momentum"] = c.momentum();
      cfg["nesterov"] = c.nesterov();
      break;
    case OPTIMIZER_ADAM:
      class_name = "Adam";
      cfg["beta_1"] = c.beta_1();
      cfg["beta_2"] = c.beta_2();
      cfg["epsilon"] = c.epsilon();
      break;
    case OPTIMIZER_ADAGRAD:
      class_name = "Adagrad";
      cfg["initial_accumulator_value"] = c.initial_accumulator_value();
      cfg["epsilon"] = c.epsilon();
      break;
    case OPTIMIZER_RMSPROP:
      class_name = "RMSprop";
      cfg["rho"] = c.rho();
      cfg["momentum"] = c.momentum();
      cfg["epsilon"] = c.epsilon();
      break;
    default:  // unresolvable: the name as given, the common fields only
      break;
  }
  return json{{"class_name", class_name}, {"config", cfg}};
}

}  // namespace pstrain
