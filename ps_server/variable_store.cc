#include "ps_server/variable_store.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <functional>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/finite.h"
#include "common/logging.h"
#include "common/memory_budget.h"
#include "common/status_macros.h"
#include "common/training/consistency_config.h"
#include "google/protobuf/util/message_differencer.h"

namespace pstrain {
namespace {

// Async configs differ only in fields async ignores: compare them as one.
ConsistencyConfig Normalized(const ConsistencyConfig& config) {
  if (config.mode() != CONSISTENCY_ASYNC) return config;
  return ConsistencyConfig();
}

}  // namespace

absl::Status VariableStore::CreateVariables(std::vector<NamedTensor> variables,
                                            const OptimizerConfig& optimizer,
                                            const ConsistencyConfig& consistency) {
  return CreateVariables(std::move(variables), {}, optimizer, consistency);
}

absl::Status VariableStore::CreateVariables(std::vector<NamedTensor> variables,
                                            std::vector<InitialShard> drawn,
                                            const OptimizerConfig& optimizer,
                                            const ConsistencyConfig& consistency_in) {
  PS_RETURN_IF_ERROR(ValidateConsistency(consistency_in));
  const ConsistencyConfig consistency = Normalized(consistency_in);
  absl::flat_hash_set<std::string> seen;
  auto check_name = [&seen](const std::string& name) -> absl::Status {
    if (name.empty()) return absl::InvalidArgumentError("variable with an empty name");
    if (!seen.insert(name).second) {
      return absl::InvalidArgumentError(absl::StrCat("variable \"", name, "\" given twice"));
    }
    return absl::OkStatus();
  };
  for (const NamedTensor& v : variables) {
    PS_RETURN_IF_ERROR(check_name(v.name));
    if (absl::Status finite =
            CheckFinite(v.tensor.values(), absl::StrCat("initial value of \"", v.name, "\""));
        !finite.ok()) {
      return RefuseNonFinite(std::move(finite));
    }
  }
  // Drawn values are checked as a hostile request must be, before anything is
  // allocated: the initializers (sizes, rows, parameters), then under the lock what a
  // create checks, the memory budget among it, for every variable at once. The values
  // are then drawn without the lock (a large table takes seconds), and the create below
  // checks again what may have changed meanwhile.
  if (!drawn.empty()) {
    std::vector<RequestedVariable> requested;
    for (const NamedTensor& v : variables) requested.push_back({v.name, v.tensor.shape()});
    for (const InitialShard& d : drawn) {
      PS_RETURN_IF_ERROR(check_name(d.name));
      if (absl::Status valid = ValidateRowRange(d.init, d.row_begin, d.row_end); !valid.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("initializer of variable \"", d.name, "\": ", valid.message()));
      }
      requested.push_back({d.name, RowRangeShape(d.init.shape, d.row_begin, d.row_end)});
    }
    std::vector<bool> exists(drawn.size());
    {
      absl::ReaderMutexLock lock(&mu_);
      std::unique_ptr<UpdateRules> unused;
      PS_RETURN_IF_ERROR(CheckCreate(requested, optimizer, consistency, &unused));
      for (size_t i = 0; i < drawn.size(); ++i) exists[i] = variables_.contains(drawn[i].name);
    }
    for (size_t i = 0; i < drawn.size(); ++i) {
      // One that exists has the shape asked for (checked above) and keeps its value.
      if (exists[i]) continue;
      PS_ASSIGN_OR_RETURN(Tensor value, DrawShard(drawn[i]));
      variables.push_back({std::move(drawn[i].name), std::move(value)});
    }
  }
  std::vector<RequestedVariable> requested;
  requested.reserve(variables.size());
  for (const NamedTensor& v : variables) requested.push_back({v.name, v.tensor.shape()});
  absl::MutexLock lock(&mu_);
  std::unique_ptr<UpdateRules> new_rules;
  PS_RETURN_IF_ERROR(CheckCreate(requested, optimizer, consistency, &new_rules));
  if (new_rules != nullptr) {
    update_rules_ = std::move(new_rules);
    optimizer_config_ = optimizer;
  }
  if (!consistency_set_) {
    consistency_set_ = true;
    consistency_config_ = consistency;
    const absl::Duration timeout = absl::Milliseconds(consistency.timeout_ms());
    if (consistency.mode() == CONSISTENCY_BOUNDED_STALENESS) {
      mode_ = Mode::kBoundedStaleness;
      gate_ = std::make_unique<StalenessGate>(consistency.staleness(), timeout);
    } else if (consistency.mode() == CONSISTENCY_SYNC) {
      mode_ = Mode::kSync;
      aggregator_ = std::make_unique<SyncAggregator>(
          std::max(1, consistency.replicas_to_aggregate()), timeout);
    }
  }
  for (NamedTensor& v : variables) {
    if (variables_.contains(v.name)) continue;
    auto variable = std::make_unique<Variable>(std::move(v.tensor));
    absl::MutexLock var_lock(&variable->mu);
    variable->optimizer = &update_rules_->For(v.name);
    variable->state = variable->optimizer->NewState(variable->value.num_elements());
    variables_.emplace(v.name, std::move(variable));
  }
  return absl::OkStatus();
}

absl::Status VariableStore::CheckCreate(const std::vector<RequestedVariable>& requested,
                                        const OptimizerConfig& optimizer,
                                        const ConsistencyConfig& consistency,
                                        std::unique_ptr<UpdateRules>* new_rules) const {
  if (update_rules_ == nullptr) {
    PS_ASSIGN_OR_RETURN(*new_rules, UpdateRules::Create(optimizer));
  } else if (!google::protobuf::util::MessageDifferencer::Equals(optimizer, optimizer_config_)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "this ps already runs optimizer \"", update_rules_->optimizer().name(),
        "\" with other settings; one ps serves one optimizer configuration"));
  }
  if (consistency_set_ &&
      !google::protobuf::util::MessageDifferencer::Equals(consistency, consistency_config_)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "this ps already runs consistency mode \"", ConsistencyModeName(consistency_config_.mode()),
        "\" with other settings; one ps serves one consistency configuration"));
  }
  for (const RequestedVariable& v : requested) {
    auto it = variables_.find(v.name);
    if (it == variables_.end()) continue;
    // The shape never changes once created: read without the variable's lock.
    if (it->second->shape != v.shape) {
      return absl::AlreadyExistsError(absl::StrCat("variable \"", v.name, "\" exists with shape ",
                                                   ShapeToString(it->second->shape), ", not ",
                                                   ShapeToString(v.shape)));
    }
  }
  // The optimizer's slots bound every variable's (a moving average has none).
  return CheckVariablesFit(
      requested, *new_rules != nullptr ? (*new_rules)->optimizer() : update_rules_->optimizer(),
      consistency.mode() == CONSISTENCY_SYNC);
}

absl::Status VariableStore::CheckVariablesFit(const std::vector<RequestedVariable>& requested,
                                              const Optimizer& optimizer, bool sync) const {
  // Per element: the value (already here) and each optimizer slot, twice (the second
  // copy is what a dense update is computed into before it is swapped in), and in sync
  // mode the aggregate of pending gradients, with a row index per row when it is
  // aggregated by rows.
  const int64_t copies =
      2 * (1 + static_cast<int64_t>(optimizer.NewState(1)->slots().size())) + (sync ? 1 : 0);
  auto bytes_of = [copies, sync](const std::vector<int64_t>& shape, int64_t elements) {
    const int64_t index_bytes = sync && !shape.empty() ? SaturatingMul(shape[0], 8) : 0;
    return SaturatingAdd(SaturatingMul(elements, copies * 4), index_bytes);
  };
  int64_t total = 0;
  for (const auto& [name, v] : variables_) {
    total = SaturatingAdd(total, bytes_of(v->shape, v->num_elements));
  }
  const RequestedVariable* largest = nullptr;
  int64_t largest_elements = 0;
  for (const RequestedVariable& v : requested) {
    if (variables_.contains(v.name)) continue;
    // Validated shapes: no overflow (a negative count would saturate).
    const int64_t elements = NumElements(v.shape);
    total = SaturatingAdd(total, bytes_of(v.shape, elements));
    if (largest == nullptr || elements > largest_elements) {
      largest = &v;
      largest_elements = elements;
    }
  }
  if (largest == nullptr) return absl::OkStatus();
  return CheckMemoryBudget(
      total, absl::StrCat("this ps's variables with the new ones (the largest \"", largest->name,
                          "\" ", ShapeToString(largest->shape), "; values and ", copies - 1,
                          " more arrays per element)"));
}

absl::StatusOr<VariableStore::Variable*> VariableStore::Find(const std::string& name) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = variables_.find(name);
  if (it == variables_.end()) {
    return absl::NotFoundError(absl::StrCat("no variable \"", name, "\" on this ps"));
  }
  return it->second.get();
}

absl::StatusOr<std::vector<Tensor>> VariableStore::Pull(absl::Span<const std::string> names,
                                                        std::vector<int64_t>* versions,
                                                        int64_t max_bytes) const {
  std::vector<Variable*> found;
  found.reserve(names.size());
  absl::flat_hash_set<absl::string_view> seen;
  int64_t bytes = 0;
  for (const std::string& name : names) {
    if (!seen.insert(name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("variable \"", name, "\" named twice in one pull"));
    }
    PS_ASSIGN_OR_RETURN(Variable * v, Find(name));
    // Each value fits an int64 of bytes (kMaxTensorElements); their sum is checked
    // before it is formed.
    const int64_t value_bytes = v->num_elements * static_cast<int64_t>(sizeof(float));
    if (value_bytes > max_bytes - bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "pulling ", names.size(), " variables needs more than ", max_bytes,
          " bytes in one answer; pull fewer at a time"));
    }
    bytes += value_bytes;
    found.push_back(v);
  }
  std::vector<Tensor> values;
  values.reserve(found.size());
  if (versions != nullptr) versions->clear();
  for (Variable* v : found) {
    absl::MutexLock lock(&v->mu);
    values.push_back(v->value);
    if (versions != nullptr) versions->push_back(v->version);
  }
  ++pulls_;
  return values;
}

absl::Status VariableStore::RefuseNonFinite(absl::Status problem) {
  ++nonfinite_refused_;
  if (!logged_nonfinite_.exchange(true)) {
    LogError(absl::StrCat("refused: ", problem.message(), " (logged once; counted in psctl ps)"));
  }
  return problem;
}

absl::Status VariableStore::Push(absl::Span<const NamedTensor> gradients,
                                 const PushContext& context) {
  return OncePerRequest(context, [&] { return PushOnce(gradients, context); });
}

absl::Status VariableStore::PushRows(absl::Span<const SparseGradient> gradients,
                                     const PushContext& context) {
  return OncePerRequest(context, [&] { return PushRowsOnce(gradients, context); });
}

template <typename PushFn>
absl::Status VariableStore::OncePerRequest(const PushContext& context, PushFn push) {
  if (context.request_id == 0) return push();
  switch (requests_.Begin(context.request_id, absl::Seconds(10))) {
    case RequestLog::Claim::kDuplicate:
      ++duplicate_pushes_;
      return absl::OkStatus();
    case RequestLog::Claim::kBusy:
      return absl::AbortedError(absl::StrCat("push ", context.request_id,
                                             " is still being applied by an earlier call"));
    case RequestLog::Claim::kApply:
      break;
  }
  absl::Status pushed = push();
  requests_.Finish(context.request_id, pushed.ok());
  return pushed;
}

absl::StatusOr<VariableStore::PushSettings> VariableStore::SettingsForPush() const {
  absl::ReaderMutexLock lock(&mu_);
  if (update_rules_ == nullptr) {
    return absl::FailedPreconditionError("no variables have been created on this ps yet");
  }
  return PushSettings{&update_rules_->optimizer(), mode_, gate_.get(), aggregator_.get()};
}

template <typename PrepareFn, typename CommitFn>
int64_t VariableStore::ApplyAllOrNone(absl::Span<Variable* const> found, PrepareFn prepare,
                                      CommitFn commit) {
  // One order for every holder of more than one variable lock (only pushes are), so two
  // pushes of overlapping variables never deadlock. The names of a push are distinct, so
  // are its variables.
  absl::InlinedVector<Variable*, 4> order(found.begin(), found.end());
  std::sort(order.begin(), order.end(), std::less<Variable*>());
  for (Variable* v : order) v->mu.Lock();
  int64_t overflowing = -1;
  for (size_t i = 0; i < found.size() && overflowing < 0; ++i) {
    if (!prepare(i, *found[i])) overflowing = static_cast<int64_t>(i);
  }
  if (overflowing < 0) {
    for (size_t i = 0; i < found.size(); ++i) {
      commit(i, *found[i]);
      ++found[i]->version;
    }
  }
  for (Variable* v : order) v->mu.Unlock();
  return overflowing;
}

bool VariableStore::PrepareDenseUpdate(Variable& v, absl::Span<const float> gradient) {
  if (v.next_state == nullptr) {
    v.next_value = Tensor(v.value.shape());
    v.next_state = v.optimizer->NewState(v.num_elements);
  }
  return v.optimizer->ApplyInto(gradient, v.value.values(), *v.state, v.next_value.values(),
                                v.next_state.get());
}

void VariableStore::CommitDenseUpdate(Variable& v) {
  std::swap(v.value, v.next_value);
  std::swap(v.state, v.next_state);
}

absl::Status VariableStore::CheckSyncVersions(const PushContext& context, size_t gradients) {
  if (context.versions.size() == gradients) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "sync mode needs the version each gradient was computed at: got ",
      context.versions.size(), " versions for ", gradients, " gradients"));
}

std::vector<SyncAggregator::Variable*> VariableStore::AsSyncVariables(
    std::vector<SyncView>& views) {
  std::vector<SyncAggregator::Variable*> out;
  out.reserve(views.size());
  for (SyncView& view : views) out.push_back(&view);
  return out;
}

absl::Status VariableStore::UpdateOverflows(absl::string_view name) {
  return absl::InvalidArgumentError(absl::StrCat(
      "the update of \"", name,
      "\" by this gradient overflows a float (its value or an optimizer slot would not be "
      "finite)"));
}

absl::Status VariableStore::DropNonFinitePush(absl::Status problem, const Optimizer& optimizer) {
  if (optimizer.config().nonfinite() != NONFINITE_SKIP) return RefuseNonFinite(std::move(problem));
  ++nonfinite_skipped_;
  if (!logged_nonfinite_.exchange(true)) {
    LogInfo(absl::StrCat("skipped a push: ", problem.message(),
                         " (nonfinite: skip; logged once, counted in psctl ps)"));
  }
  return absl::OkStatus();
}

namespace {

// The rows of a rank >= 1 variable of `shape` and the elements in each.
struct RowShape {
  int64_t rows = 0;
  int64_t width = 1;
};

absl::StatusOr<RowShape> RowShapeOf(const std::string& name, const std::vector<int64_t>& shape) {
  if (shape.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("variable \"", name, "\" is a scalar: it has no rows"));
  }
  RowShape r;
  r.rows = shape[0];
  // The variable exists, so its element count fits (kMaxTensorElements).
  for (size_t i = 1; i < shape.size(); ++i) r.width *= shape[i];
  return r;
}

// Rows in range; none at all only where `none_ok` (sync mode: a pusher whose batch
// missed the table still joins its aggregate, and learns its version by a pull of none).
absl::Status CheckRows(const std::string& name, absl::Span<const int64_t> rows,
                       int64_t num_rows, bool none_ok) {
  if (rows.empty() && !none_ok) {
    return absl::InvalidArgumentError(absl::StrCat("no rows of \"", name, "\" given"));
  }
  for (int64_t row : rows) {
    if (row < 0 || row >= num_rows) {
      return absl::InvalidArgumentError(absl::StrCat("row ", row, " of \"", name,
                                                     "\" is outside [0, ", num_rows, ")"));
    }
  }
  return absl::OkStatus();
}

// Pulled rows must be distinct: an answer is then never larger than its variable.
absl::Status CheckDistinctRows(const std::string& name, absl::Span<const int64_t> rows) {
  absl::flat_hash_set<int64_t> seen;
  seen.reserve(rows.size());
  for (int64_t row : rows) {
    if (!seen.insert(row).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "row ", row, " of \"", name, "\" is asked more than once in one pull; ask each once"));
    }
  }
  return absl::OkStatus();
}

// `rows` distinct and ascending, with the values of repeated rows summed (in the order
// they were given).
void SumRepeatedRows(absl::Span<const int64_t> rows, absl::Span<const float> values,
                     int64_t width, std::vector<int64_t>* unique_rows,
                     std::vector<float>* summed) {
  std::vector<size_t> order(rows.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return rows[a] < rows[b]; });
  unique_rows->clear();
  summed->clear();
  for (size_t i : order) {
    const float* v = values.data() + i * width;
    if (!unique_rows->empty() && unique_rows->back() == rows[i]) {
      float* out = summed->data() + summed->size() - width;
      for (int64_t k = 0; k < width; ++k) out[k] += v[k];
    } else {
      unique_rows->push_back(rows[i]);
      summed->insert(summed->end(), v, v + width);
    }
  }
}

// What a push's messages call each kind of gradient, its values, and whether its shape
// fits a variable of `shape`, for CheckPush.
std::string Describe(const NamedTensor& g) { return absl::StrCat("gradient for \"", g.name, "\""); }
std::string Describe(const SparseGradient& g) {
  return absl::StrCat("row gradient for \"", g.name, "\"");
}
absl::Span<const float> ValuesOf(const NamedTensor& g) { return g.tensor.values(); }
absl::Span<const float> ValuesOf(const SparseGradient& g) { return g.values.values(); }

absl::Status CheckGradientShape(const NamedTensor& g, const std::vector<int64_t>& shape,
                                bool /*rows may be none: a dense gradient has none*/) {
  if (g.tensor.shape() == shape) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("gradient for \"", g.name, "\" has shape ",
                                                 g.tensor.ShapeString(), ", variable has ",
                                                 ShapeToString(shape)));
}

absl::Status CheckGradientShape(const SparseGradient& g, const std::vector<int64_t>& shape,
                                bool no_rows_ok) {
  PS_ASSIGN_OR_RETURN(const RowShape row_shape, RowShapeOf(g.name, shape));
  std::vector<int64_t> want = shape;
  want[0] = static_cast<int64_t>(g.rows.size());
  if (g.values.shape() != want) {
    return absl::InvalidArgumentError(absl::StrCat(
        "row gradient for \"", g.name, "\" has shape ", g.values.ShapeString(), " for ",
        g.rows.size(), " rows; want [", absl::StrJoin(want, ","), "]"));
  }
  return CheckRows(g.name, g.rows, row_shape.rows, no_rows_ok);
}

}  // namespace

absl::StatusOr<Tensor> VariableStore::PullRows(const std::string& name,
                                               absl::Span<const int64_t> rows,
                                               int64_t* version, int64_t max_bytes) const {
  PS_ASSIGN_OR_RETURN(Variable * v, Find(name));
  std::vector<int64_t> shape;
  {
    absl::MutexLock lock(&v->mu);
    shape = v->value.shape();
  }
  PS_ASSIGN_OR_RETURN(const RowShape row_shape, RowShapeOf(name, shape));
  PS_RETURN_IF_ERROR(
      CheckRows(name, rows, row_shape.rows, consistency_mode() == CONSISTENCY_SYNC));
  PS_RETURN_IF_ERROR(CheckDistinctRows(name, rows));
  // rows.size() rows of `width` floats, checked without overflow before it is formed.
  const int64_t row_bytes = row_shape.width * static_cast<int64_t>(sizeof(float));
  if (row_bytes > 0 && static_cast<int64_t>(rows.size()) > max_bytes / row_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "pulling ", rows.size(), " rows of \"", name, "\" needs more than ", max_bytes,
        " bytes in one answer; pull fewer at a time"));
  }
  shape[0] = static_cast<int64_t>(rows.size());
  Tensor out(shape);
  float* dst = out.data();
  {
    absl::MutexLock lock(&v->mu);
    const float* src = v->value.data();
    for (int64_t row : rows) {
      std::copy_n(src + row * row_shape.width, row_shape.width, dst);
      dst += row_shape.width;
    }
    if (version != nullptr) *version = v->version;
  }
  ++pulls_;
  return out;
}

template <typename Gradient>
absl::StatusOr<VariableStore::CheckedPush> VariableStore::CheckPush(
    absl::Span<const Gradient> gradients, const PushSettings& settings) {
  const Optimizer& optimizer = *settings.optimizer;
  CheckedPush checked;
  checked.variables.reserve(gradients.size());
  checked.shapes.reserve(gradients.size());
  absl::flat_hash_set<absl::string_view> seen;
  for (const Gradient& g : gradients) {
    if (!seen.insert(g.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("gradient for \"", g.name, "\" given twice in one push"));
    }
    PS_ASSIGN_OR_RETURN(Variable * v, Find(g.name));
    std::vector<int64_t> shape;
    {
      absl::MutexLock lock(&v->mu);
      shape = v->value.shape();
    }
    // Shapes never change after creation, so this still holds when the push applies.
    PS_RETURN_IF_ERROR(CheckGradientShape(g, shape, settings.mode == Mode::kSync));
    checked.variables.push_back(v);
    checked.shapes.push_back(std::move(shape));
  }
  // After the shapes: one pass over each gradient, whose bytes were just read anyway.
  for (const Gradient& g : gradients) {
    absl::Status finite = CheckFinite(ValuesOf(g), Describe(g));
    if (finite.ok()) continue;
    PS_RETURN_IF_ERROR(DropNonFinitePush(std::move(finite), optimizer));
    checked.dropped = true;
    break;
  }
  return checked;
}

absl::Status VariableStore::PushOnce(absl::Span<const NamedTensor> gradients,
                                     const PushContext& context) {
  PS_ASSIGN_OR_RETURN(const PushSettings settings, SettingsForPush());
  PS_ASSIGN_OR_RETURN(const CheckedPush checked, CheckPush(gradients, settings));
  if (checked.dropped) return absl::OkStatus();
  const std::vector<Variable*>& found = checked.variables;
  if (settings.mode == Mode::kSync) {
    PS_RETURN_IF_ERROR(CheckSyncVersions(context, gradients.size()));
    std::vector<SyncView> views(found.begin(), found.end());
    settings.aggregator->Push(context, AsSyncVariables(views), gradients, context.versions);
    CountPush(context);
    ++pushes_;
    return absl::OkStatus();
  }
  if (settings.mode == Mode::kBoundedStaleness) settings.gate->Wait(context);
  // The versions a push carries are information only here: its lag is read under the
  // variables' locks, as the update applies, and counted once it did (CountPushLag).
  const bool has_versions = context.versions.size() == gradients.size();
  int64_t lag = has_versions ? 0 : -1;
  // A finite gradient can still overflow its update (Adam squares it, SGD scales it by the
  // learning rate), and a non-finite value or slot is never repaired: every update is
  // computed aside and checked, then all are swapped in, under the locks of every
  // variable pushed.
  const int64_t overflowing = ApplyAllOrNone(
      found,
      [&](size_t i, Variable& v) {
        v.mu.AssertHeld();
        if (has_versions && lag >= 0) {
          // A hostile or stale-ps version (negative, or ahead of the variable's after a
          // restart) is not a lag: the push is left out of the count, never refused.
          const int64_t pushed = context.versions[i];
          lag = pushed < 0 || pushed > v.version ? -1 : std::max(lag, v.version - pushed);
        }
        return PrepareDenseUpdate(v, gradients[i].tensor.values());
      },
      [&](size_t, Variable& v) {
        v.mu.AssertHeld();
        CommitDenseUpdate(v);
      });
  if (overflowing >= 0) {
    return DropNonFinitePush(UpdateOverflows(gradients[overflowing].name), *settings.optimizer);
  }
  CountPushLag(lag);
  CountPush(context);
  ++pushes_;
  return absl::OkStatus();
}

void VariableStore::CountPushLag(int64_t lag) {
  if (lag < 0) return;
  ++push_lag_pushes_;
  push_lag_sum_ += lag;
  int64_t max = push_lag_max_.load();
  while (lag > max && !push_lag_max_.compare_exchange_weak(max, lag)) {
  }
}

absl::Status VariableStore::PushRowsOnce(absl::Span<const SparseGradient> gradients,
                                         const PushContext& context) {
  PS_ASSIGN_OR_RETURN(const PushSettings settings, SettingsForPush());
  const Optimizer* optimizer = settings.optimizer;
  PS_ASSIGN_OR_RETURN(const CheckedPush checked, CheckPush(gradients, settings));
  if (checked.dropped) return absl::OkStatus();
  const std::vector<Variable*>& found = checked.variables;
  if (settings.mode == Mode::kSync) {
    PS_RETURN_IF_ERROR(CheckSyncVersions(context, gradients.size()));
  }
  // Repeated rows summed once, before anything changes: a sum of finite rows can
  // overflow, and so can the update of a finite sum (as Push: every update checked, then
  // all applied, under the locks of every variable pushed).
  std::vector<std::vector<int64_t>> rows(found.size());
  std::vector<std::vector<float>> summed(found.size());
  std::vector<int64_t> widths(found.size());
  for (size_t i = 0; i < found.size(); ++i) {
    PS_ASSIGN_OR_RETURN(const RowShape row_shape, RowShapeOf(gradients[i].name, checked.shapes[i]));
    widths[i] = row_shape.width;
    SumRepeatedRows(gradients[i].rows, gradients[i].values.values(), row_shape.width, &rows[i],
                    &summed[i]);
    absl::Status finite = CheckFinite(
        summed[i], absl::StrCat("the sum of repeated rows of \"", gradients[i].name, "\""));
    if (!finite.ok()) return DropNonFinitePush(std::move(finite), *optimizer);
  }
  if (settings.mode == Mode::kSync) {
    // Each gradient joins its variable's aggregate by rows (sync_aggregator.h).
    std::vector<SyncAggregator::RowGradient> aggregated(found.size());
    for (size_t i = 0; i < found.size(); ++i) {
      aggregated[i].name = gradients[i].name;
      aggregated[i].rows = rows[i];
      aggregated[i].values = summed[i];
      aggregated[i].width = widths[i];
    }
    std::vector<SyncView> views(found.begin(), found.end());
    settings.aggregator->PushRows(context, AsSyncVariables(views), aggregated, context.versions);
    CountPush(context);
    ++pushes_;
    return absl::OkStatus();
  }
  if (settings.mode == Mode::kBoundedStaleness) settings.gate->Wait(context);
  // Only the rows pushed are touched: they are checked, then updated in place (a copy
  // of the variable to compute into would cost more than the second pass over them).
  const int64_t overflowing = ApplyAllOrNone(
      found,
      [&](size_t i, Variable& v) {
        v.mu.AssertHeld();
        return v.optimizer->RowUpdatesStayFinite(rows[i], summed[i], v.value.values(),
                                                 *v.state);
      },
      [&](size_t i, Variable& v) {
        v.mu.AssertHeld();
        v.optimizer->ApplyRows(rows[i], summed[i], v.value.values(), v.state.get());
      });
  if (overflowing >= 0) {
    return DropNonFinitePush(UpdateOverflows(gradients[overflowing].name), *optimizer);
  }
  CountPush(context);
  ++pushes_;
  return absl::OkStatus();
}

int64_t VariableStore::SyncView::version() {
  v_->mu.AssertHeld();
  return v_->version;
}

SyncAggregator::Pending& VariableStore::SyncView::pending() {
  v_->mu.AssertHeld();
  return v_->pending;
}

bool VariableStore::SyncView::ApplyMean(absl::Span<const float> mean) {
  v_->mu.AssertHeld();
  if (!PrepareDenseUpdate(*v_, mean)) return false;
  CommitDenseUpdate(*v_);
  return true;
}

bool VariableStore::SyncView::ApplyRowsMean(absl::Span<const int64_t> rows,
                                            absl::Span<const float> row_means) {
  v_->mu.AssertHeld();
  if (rows.empty()) {
    // Every pusher missed the table: the dense mean would be zeros, which moves nothing
    // but counts (a learning-rate schedule reads the count).
    v_->state->set_iterations(v_->state->iterations() + 1);
    return true;
  }
  if (!v_->optimizer->RowUpdatesStayFinite(rows, row_means, v_->value.values(), *v_->state)) {
    return false;
  }
  v_->optimizer->ApplyRows(rows, row_means, v_->value.values(), v_->state.get());
  return true;
}

void VariableStore::SyncView::BumpVersion() {
  v_->mu.AssertHeld();
  ++v_->version;
}

void VariableStore::CountPush(const PushContext& context) {
  PusherCounts* counts = nullptr;
  {
    absl::ReaderMutexLock lock(&pushers_mu_);
    auto it = pushers_.find(context.worker);
    if (it != pushers_.end()) counts = it->second.get();
  }
  if (counts == nullptr) {
    absl::MutexLock lock(&pushers_mu_);
    const std::string& name =
        pushers_.size() < kMaxTrackedPushers || pushers_.contains(context.worker)
            ? context.worker
            : std::string("(other workers)");
    std::unique_ptr<PusherCounts>& entry = pushers_[name];
    if (entry == nullptr) entry = std::make_unique<PusherCounts>();
    counts = entry.get();
  }
  counts->pushes.fetch_add(1, std::memory_order_relaxed);
  counts->epoch.store(context.epoch, std::memory_order_relaxed);
  counts->step.store(context.step, std::memory_order_relaxed);
}

std::vector<VariableStore::WorkerPushes> VariableStore::pushes_by_worker() const {
  std::vector<WorkerPushes> result;
  {
    absl::ReaderMutexLock lock(&pushers_mu_);
    for (const auto& [worker, entry] : pushers_) {
      result.push_back({worker, entry->pushes.load(std::memory_order_relaxed),
                        entry->epoch.load(std::memory_order_relaxed),
                        entry->step.load(std::memory_order_relaxed)});
    }
  }
  std::sort(result.begin(), result.end(),
            [](const WorkerPushes& a, const WorkerPushes& b) { return a.worker < b.worker; });
  return result;
}

absl::StatusOr<std::vector<VariableStore::Snapshot>> VariableStore::ReadState(
    absl::Span<const std::string> names_in) const {
  std::vector<std::string> names(names_in.begin(), names_in.end());
  if (names.empty()) {
    absl::ReaderMutexLock lock(&mu_);
    for (const auto& [name, v] : variables_) names.push_back(name);
    std::sort(names.begin(), names.end());
  }
  std::vector<Variable*> found;
  found.reserve(names.size());
  absl::flat_hash_set<absl::string_view> seen;
  for (const std::string& name : names) {
    if (!seen.insert(name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("variable \"", name, "\" named twice in one read"));
    }
    PS_ASSIGN_OR_RETURN(Variable * v, Find(name));
    found.push_back(v);
  }
  std::vector<Snapshot> snapshots(found.size());
  for (size_t i = 0; i < found.size(); ++i) {
    Variable* v = found[i];
    Snapshot& out = snapshots[i];
    out.name = names[i];
    absl::MutexLock lock(&v->mu);
    out.value = v->value;
    out.version = v->version;
    out.iterations = v->state->iterations();
    for (const auto& [slot_name, slot] : v->state->slots()) {
      out.slots.push_back({slot_name, Tensor(v->value.shape(), *slot)});
    }
  }
  return snapshots;
}

absl::Status VariableStore::VisitState(
    const std::string& name, absl::FunctionRef<absl::Status(const StateView&)> visit) const {
  PS_ASSIGN_OR_RETURN(Variable * v, Find(name));
  absl::ReaderMutexLock lock(&v->mu);
  StateView view;
  view.value = absl::MakeConstSpan(v->value.data(), v->value.num_elements());
  view.shape = v->shape;
  view.version = v->version;
  view.iterations = v->state->iterations();
  for (const auto& [slot_name, slot] : v->state->slots()) {
    view.slots.emplace_back(slot_name, absl::MakeConstSpan(*slot));
  }
  return visit(view);
}

absl::StatusOr<std::vector<VariableStore::Variable*>> VariableStore::FindRestoreTargets(
    absl::Span<const RestoreTarget> targets) const {
  std::string optimizer_name;
  {
    absl::ReaderMutexLock lock(&mu_);
    if (update_rules_ == nullptr) {
      return absl::FailedPreconditionError("no variables have been created on this ps yet");
    }
    // Read now: mu_ is never taken while a variable's lock is held.
    optimizer_name = update_rules_->optimizer().name();
  }
  std::vector<Variable*> found;
  found.reserve(targets.size());
  absl::flat_hash_set<std::string> seen;
  for (const RestoreTarget& t : targets) {
    if (!seen.insert(t.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("state for \"", t.name, "\" given twice in one restore"));
    }
    if (t.version < 0 || t.iterations < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("state for \"", t.name, "\" has a negative version or iterations"));
    }
    PS_ASSIGN_OR_RETURN(Variable * v, Find(t.name));
    absl::MutexLock lock(&v->mu);
    absl::flat_hash_set<std::string> seen_slots;
    for (const std::string& slot : t.slots) {
      if (!seen_slots.insert(slot).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("slot \"", slot, "\" of \"", t.name, "\" given twice"));
      }
      if (v->state->slot(slot) == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat("variable \"", t.name,
                                                       "\" has no optimizer slot \"", slot,
                                                       "\" (this ps runs ", optimizer_name, ")"));
      }
    }
    found.push_back(v);
  }
  return found;
}

absl::Status VariableStore::RestoreInPlace(const std::vector<InPlaceRestore>& restores) {
  std::vector<RestoreTarget> targets;
  for (const InPlaceRestore& r : restores) {
    targets.push_back({r.name, r.version, r.iterations, r.slots});
  }
  PS_ASSIGN_OR_RETURN(const std::vector<Variable*> found, FindRestoreTargets(targets));
  // Names and slot sets never change after creation, so the checks above still hold.
  for (size_t i = 0; i < found.size(); ++i) {
    Variable* v = found[i];
    const InPlaceRestore& r = restores[i];
    absl::MutexLock lock(&v->mu);
    std::vector<absl::Span<float>> targets;
    targets.reserve(1 + r.slots.size());
    targets.push_back(v->value.values());
    for (const std::string& slot : r.slots)
      targets.push_back(absl::MakeSpan(*v->state->slot(slot)));
    if (absl::Status filled = r.fill(targets); !filled.ok()) {
      return absl::Status(
          filled.code(), absl::StrCat("restore stopped part-way (", i, " of ", found.size(),
                                      " variables restored, the next partly): ", filled.message()));
    }
    v->version = r.version;
    v->state->set_iterations(r.iterations);
    // Gradients aggregated against the old value mean nothing for the restored one.
    v->pending.Clear();
  }
  return absl::OkStatus();
}

absl::Status VariableStore::RestoreState(std::vector<Snapshot> snapshots) {
  std::vector<RestoreTarget> targets;
  for (const Snapshot& s : snapshots) {
    RestoreTarget& t = targets.emplace_back();
    t.name = s.name;
    t.version = s.version;
    t.iterations = s.iterations;
    for (const NamedTensor& slot : s.slots) t.slots.push_back(slot.name);
  }
  PS_ASSIGN_OR_RETURN(const std::vector<Variable*> found, FindRestoreTargets(targets));
  // What the snapshots carry: shapes that fit, finite values.
  for (size_t i = 0; i < found.size(); ++i) {
    Variable* v = found[i];
    const Snapshot& s = snapshots[i];
    absl::MutexLock lock(&v->mu);
    if (v->value.shape() != s.value.shape()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "restored value of \"", s.name, "\" has shape ", s.value.ShapeString(),
          ", variable has ", v->value.ShapeString()));
    }
    if (absl::Status finite =
            CheckFinite(s.value.values(), absl::StrCat("restored value of \"", s.name, "\""));
        !finite.ok()) {
      return RefuseNonFinite(std::move(finite));
    }
    for (const NamedTensor& slot : s.slots) {
      if (slot.tensor.shape() != v->value.shape()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "slot \"", slot.name, "\" of \"", s.name, "\" has shape ",
            slot.tensor.ShapeString(), ", variable has ", v->value.ShapeString()));
      }
      if (absl::Status finite = CheckFinite(
              slot.tensor.values(), absl::StrCat("slot \"", slot.name, "\" of \"", s.name, "\""));
          !finite.ok()) {
        return RefuseNonFinite(std::move(finite));
      }
    }
  }
  // Shapes and slot sets never change after creation, so the checks above still hold.
  for (size_t i = 0; i < found.size(); ++i) {
    Variable* v = found[i];
    Snapshot& s = snapshots[i];
    absl::MutexLock lock(&v->mu);
    v->value = std::move(s.value);
    v->version = s.version;
    v->state->set_iterations(s.iterations);
    for (const NamedTensor& slot : s.slots) {
      std::vector<float>* target = v->state->slot(slot.name);
      target->assign(slot.tensor.values().begin(), slot.tensor.values().end());
    }
    // Gradients aggregated against the old value mean nothing for the restored one.
    v->pending.Clear();
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int64_t>> VariableStore::ShapeOf(const std::string& name) const {
  PS_ASSIGN_OR_RETURN(Variable * v, Find(name));
  absl::MutexLock lock(&v->mu);
  return v->value.shape();
}

std::vector<VariableStore::VariableInfo> VariableStore::List() const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<VariableInfo> infos;
  for (const auto& [name, v] : variables_) {
    absl::MutexLock var_lock(&v->mu);
    infos.push_back({name, v->value.shape(), v->version});
  }
  std::sort(infos.begin(), infos.end(),
            [](const VariableInfo& a, const VariableInfo& b) { return a.name < b.name; });
  return infos;
}

int64_t VariableStore::num_pushes() const { return pushes_.load(); }

int64_t VariableStore::num_pulls() const { return pulls_.load(); }

int64_t VariableStore::stale_gradients() const {
  absl::ReaderMutexLock lock(&mu_);
  return aggregator_ != nullptr ? aggregator_->stale() : 0;
}

// One mode is set per store, so at most one of the gate and the aggregator counts.
int64_t VariableStore::consistency_timeouts() const {
  absl::ReaderMutexLock lock(&mu_);
  return (gate_ != nullptr ? gate_->timeouts() : 0) +
         (aggregator_ != nullptr ? aggregator_->timeouts() : 0);
}

int64_t VariableStore::consistency_waits() const {
  absl::ReaderMutexLock lock(&mu_);
  return (gate_ != nullptr ? gate_->waits() : 0) +
         (aggregator_ != nullptr ? aggregator_->waits() : 0);
}

int64_t VariableStore::sync_full_updates() const {
  absl::ReaderMutexLock lock(&mu_);
  return aggregator_ != nullptr ? aggregator_->full_updates() : 0;
}

int64_t VariableStore::sync_partial_updates() const {
  absl::ReaderMutexLock lock(&mu_);
  return aggregator_ != nullptr ? aggregator_->partial_updates() : 0;
}

int64_t VariableStore::sync_aggregated_gradients() const {
  absl::ReaderMutexLock lock(&mu_);
  return aggregator_ != nullptr ? aggregator_->aggregated_gradients() : 0;
}

int64_t VariableStore::max_staleness_applied() const {
  absl::ReaderMutexLock lock(&mu_);
  return gate_ != nullptr ? gate_->max_lead() : 0;
}

int64_t VariableStore::nonfinite_skipped() const {
  absl::ReaderMutexLock lock(&mu_);
  return nonfinite_skipped_.load() + (aggregator_ != nullptr ? aggregator_->nonfinite_dropped() : 0);
}

ConsistencyMode VariableStore::consistency_mode() const {
  absl::ReaderMutexLock lock(&mu_);
  return consistency_set_ ? consistency_config_.mode() : CONSISTENCY_ASYNC;
}

bool VariableStore::pushes_never_wait() const {
  absl::ReaderMutexLock lock(&mu_);
  return consistency_set_ && consistency_config_.mode() == CONSISTENCY_ASYNC;
}

OptimizerConfig VariableStore::optimizer_config() const {
  absl::ReaderMutexLock lock(&mu_);
  return optimizer_config_;
}

std::string VariableStore::optimizer_name() const {
  absl::ReaderMutexLock lock(&mu_);
  // The resolved name: a client may have sent only the kind.
  return update_rules_ != nullptr ? update_rules_->optimizer().name() : "";
}

PsStatusResponse DescribeStore(const VariableStore& store) {
  PsStatusResponse response;
  for (const VariableStore::VariableInfo& info : store.List()) {
    VariableInfo* out = response.add_variables();
    out->set_name(info.name);
    for (int64_t d : info.shape) out->add_shape(d);
    out->set_version(info.version);
  }
  response.set_pushes(store.num_pushes());
  response.set_pulls(store.num_pulls());
  response.set_optimizer(store.optimizer_name());
  response.set_stale_gradients(store.stale_gradients());
  response.set_consistency_timeouts(store.consistency_timeouts());
  response.set_consistency_mode(store.consistency_mode());
  response.set_nonfinite_refused(store.nonfinite_refused());
  response.set_nonfinite_skipped(store.nonfinite_skipped());
  response.set_duplicate_pushes(store.duplicate_pushes());
  response.set_sync_full_updates(store.sync_full_updates());
  response.set_sync_partial_updates(store.sync_partial_updates());
  response.set_sync_aggregated_gradients(store.sync_aggregated_gradients());
  response.set_consistency_waits(store.consistency_waits());
  response.set_max_staleness_applied(store.max_staleness_applied());
  response.set_push_lag_pushes(store.push_lag_pushes());
  response.set_push_lag_sum(store.push_lag_sum());
  response.set_push_lag_max(store.push_lag_max());
  for (const VariableStore::WorkerPushes& w : store.pushes_by_worker()) {
    WorkerPushes* out = response.add_workers();
    out->set_worker(w.worker);
    out->set_pushes(w.pushes);
    out->set_epoch(w.epoch);
    out->set_step(w.step);
  }
  return response;
}

}  // namespace pstrain
