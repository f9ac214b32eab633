#ifndef PSTRAIN_COMMON_MEMORY_BUDGET_H_
#define PSTRAIN_COMMON_MEMORY_BUDGET_H_

// The memory a process may plan to use (--max_memory), checked before a model, its
// optimizer state or a dataset is allocated, so that a model or data set too large for
// the machine fails at once with a message naming what is too large, instead of
// std::bad_alloc (or the machine swapping) after every task has registered.
//
// --max_memory takes bytes with an optional K, M, G or T suffix (powers of 1024:
// "16G", "512M", "1073741824") or a share of the machine's memory ("80%"). The default
// is 80% of the machine's memory: the smaller of its RAM and the cgroup's memory limit
// (a container's, a Kubernetes pod's).
//
// Each check compares one allocation plan (a model with its state and activations, a
// data set) with the budget; they are not added up across the process.

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/flags/declare.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pstrain {

// The flag's value: a byte count, or a percentage of the machine's memory.
struct MemorySize {
  int64_t bytes = 0;       // used when percent == 0
  double percent = 0.0;    // (0, 100]
};
bool AbslParseFlag(absl::string_view text, MemorySize* size, std::string* error);
std::string AbslUnparseFlag(const MemorySize& size);

// "16G", "512M", "1048576", "80%". Errors: INVALID_ARGUMENT for anything else, a size of
// 0, a percentage outside (0, 100], or more than 2^63 - 1 bytes.
absl::StatusOr<MemorySize> ParseMemorySize(absl::string_view text);

// RAM, or the cgroup's memory limit when that is lower.
int64_t MachineMemoryBytes();

// The budget in bytes: --max_memory resolved against MachineMemoryBytes().
int64_t MemoryBudgetBytes();

// For tests: overrides --max_memory (0 restores the flag's value).
void SetMemoryBudgetForTesting(int64_t bytes);

// "876.2 GiB", "12.0 MiB", "512 bytes" (powers of 1024, as --max_memory reads them).
std::string FormatBytes(int64_t bytes);

// OK when `bytes` fits the budget. Errors: RESOURCE_EXHAUSTED "<what> needs <N>, more
// than the memory budget of <M> (--max_memory)". A negative `bytes` (a size that
// overflowed) counts as too large.
absl::Status CheckMemoryBudget(int64_t bytes, absl::string_view what);

// a * b and a + b for sizes, saturating at INT64_MAX (and treating a negative input as
// that), so that a budget check on an absurd shape never overflows.
int64_t SaturatingMul(int64_t a, int64_t b);
int64_t SaturatingAdd(int64_t a, int64_t b);

// Memory a server holds for requests in flight (a stream's buffered tensors, an answer
// being built), charged before it is allocated, so that callers together can never make
// it hold more than `limit` bytes: a charge that does not fit is refused at once (the
// caller gets RESOURCE_EXHAUSTED), never waited for. Thread-safe.
class MemoryLedger {
 public:
  // `name` says in refusals what the limit is ("the ps's request buffers (a quarter of
  // --max_memory)").
  MemoryLedger(int64_t limit_bytes, std::string name);
  MemoryLedger(const MemoryLedger&) = delete;
  MemoryLedger& operator=(const MemoryLedger&) = delete;

  // Bytes charged to a ledger, given back when it is destroyed. Movable; an empty one
  // (default, or moved from) holds nothing. Must not outlive its ledger.
  class Charge {
   public:
    Charge() = default;
    Charge(Charge&& other) noexcept;
    Charge& operator=(Charge&& other) noexcept;
    ~Charge();
    int64_t bytes() const { return bytes_; }

   private:
    friend class MemoryLedger;
    Charge(MemoryLedger* ledger, int64_t bytes) : ledger_(ledger), bytes_(bytes) {}
    MemoryLedger* ledger_ = nullptr;  // Not owned.
    int64_t bytes_ = 0;
  };

  // Charges `bytes` for `what` ("a push-pull stream of 3 gradients").
  // Errors: RESOURCE_EXHAUSTED they do not fit what is free now (a negative `bytes`, a
  // size that overflowed, never fits), naming `what`, the bytes, the free and the limit.
  absl::StatusOr<Charge> Reserve(int64_t bytes, absl::string_view what);

  int64_t limit() const { return limit_; }
  // Bytes charged now, the most ever charged at once, and the charges refused.
  int64_t in_use() const { return in_use_.load(); }
  int64_t peak() const { return peak_.load(); }
  int64_t refused() const { return refused_.load(); }

 private:
  void Release(int64_t bytes);

  const int64_t limit_;
  const std::string name_;
  std::atomic<int64_t> in_use_{0};
  std::atomic<int64_t> peak_{0};
  std::atomic<int64_t> refused_{0};
};

}  // namespace pstrain

ABSL_DECLARE_FLAG(pstrain::MemorySize, max_memory);

#endif  // PSTRAIN_COMMON_MEMORY_BUDGET_H_
