#ifndef PSTRAIN_PS_SERVER_VARIABLE_STORE_H_
#define PSTRAIN_PS_SERVER_VARIABLE_STORE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/model/optimizer.h"
#include "common/tensor.h"
#include "proto/ps.pb.h"

namespace pstrain {

// The variables one ps task owns, with the optimizer that updates them. Knows nothing
// of gRPC (ps_server/rpc/ adapts it).
//
// Thread-safe. Each variable has its own lock, so pushes to different variables proceed
// in parallel and a pull never sees a half-applied update; the map itself is guarded by
// a reader/writer lock taken only briefly to find a variable.
class VariableStore {
 public:
  struct VariableInfo {
    std::string name;
    std::vector<int64_t> shape;
    int64_t version = 0;
  };

  VariableStore() = default;
  VariableStore(const VariableStore&) = delete;
  VariableStore& operator=(const VariableStore&) = delete;

  // Creates variables with initial values; the first call also sets the optimizer.
  // All-or-nothing. Re-creating a variable with the same shape keeps its current value
  // (a restarted chief repeats the call).
  // Errors: INVALID_ARGUMENT empty or duplicate name, unknown optimizer, or an optimizer
  //         that differs from the one already set; ALREADY_EXISTS same name, other shape.
  absl::Status CreateVariables(std::vector<NamedTensor> variables,
                               const OptimizerConfig& optimizer);

  // Current values of `names`, in order; `versions` (may be null) gets each variable's
  // count of applied updates. Errors: NOT_FOUND an unknown name.
  absl::StatusOr<std::vector<Tensor>> Pull(absl::Span<const std::string> names,
                                           std::vector<int64_t>* versions) const;

  // Applies every gradient with the optimizer. Every gradient is validated before any is
  // applied, so a bad request changes nothing.
  // Errors: NOT_FOUND unknown variable; INVALID_ARGUMENT a shape differs from the
  //         variable's or a name repeats; FAILED_PRECONDITION no variables created yet.
  absl::Status Push(absl::Span<const NamedTensor> gradients);

  std::vector<VariableInfo> List() const;
  int64_t num_pushes() const;
  int64_t num_pulls() const;
  std::string optimizer_name() const;

 private:
  struct Variable {
    explicit Variable(Tensor initial) : value(std::move(initial)) {}
    mutable absl::Mutex mu;
    Tensor value ABSL_GUARDED_BY(mu);
    std::unique_ptr<OptimizerState> state ABSL_GUARDED_BY(mu);
    int64_t version ABSL_GUARDED_BY(mu) = 0;
  };

  absl::StatusOr<Variable*> Find(const std::string& name) const ABSL_LOCKS_EXCLUDED(mu_);

  // State below is protected by mu_. Variables are never removed, so a Variable* found
  // under mu_ stays valid after mu_ is released.
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<Variable>> variables_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<Optimizer> optimizer_ ABSL_GUARDED_BY(mu_);
  OptimizerConfig optimizer_config_ ABSL_GUARDED_BY(mu_);

  // Counters for status pages; atomics so that counting never serialises requests.
  std::atomic<int64_t> pushes_{0};
  mutable std::atomic<int64_t> pulls_{0};
};

// The store's variables, versions and counters as the GetStatus RPC reports them.
PsStatusResponse DescribeStore(const VariableStore& store);

}  // namespace pstrain

#endif  // PSTRAIN_PS_SERVER_VARIABLE_STORE_H_
