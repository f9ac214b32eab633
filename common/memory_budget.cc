#include "common/memory_budget.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <fstream>
#include <limits>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

ABSL_FLAG(pstrain::MemorySize, max_memory, (pstrain::MemorySize{0, 80.0}),
          "Memory this process may plan to use, checked before a model or data set is "
          "allocated: bytes with a K/M/G/T suffix (\"16G\") or a share of the machine's "
          "memory (\"80%\", the default; the machine's memory is the smaller of its RAM and "
          "its cgroup's limit)");

namespace pstrain {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

std::atomic<int64_t> budget_for_testing{0};

// A cgroup memory limit file's value ("max" or bytes), or kMax.
int64_t CgroupLimit(const char* path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text)) return kMax;
  int64_t bytes;
  return absl::SimpleAtoi(text, &bytes) && bytes > 0 ? bytes : kMax;
}

}  // namespace

absl::StatusOr<MemorySize> ParseMemorySize(absl::string_view text_in) {
  absl::string_view text = absl::StripAsciiWhitespace(text_in);
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("memory size \"", text_in, "\" ", why,
                     " (want bytes with an optional K, M, G or T suffix, or a percentage "
                     "such as 80%)"));
  };
  MemorySize size;
  if (absl::ConsumeSuffix(&text, "%")) {
    double percent;
    if (!absl::SimpleAtod(text, &percent) || !(percent > 0.0 && percent <= 100.0)) {
      return bad("is not a percentage in (0, 100]");
    }
    size.percent = percent;
    return size;
  }
  int shift = 0;
  if (!text.empty()) {
    switch (absl::ascii_toupper(text.back())) {
      case 'K': shift = 10; break;
      case 'M': shift = 20; break;
      case 'G': shift = 30; break;
      case 'T': shift = 40; break;
      default: break;
    }
    if (shift > 0) text.remove_suffix(1);
  }
  int64_t count;
  if (!absl::SimpleAtoi(text, &count) || count <= 0) return bad("is not a positive size");
  if (count > (kMax >> shift)) return bad("is too large");
  size.bytes = count << shift;
  return size;
}

bool AbslParseFlag(absl::string_view text, MemorySize* size, std::string* error) {
  absl::StatusOr<MemorySize> parsed = ParseMemorySize(text);
  if (!parsed.ok()) {
    *error = std::string(parsed.status().message());
    return false;
  }
  *size = *parsed;
  return true;
}

std::string AbslUnparseFlag(const MemorySize& size) {
  if (size.percent > 0) return absl::StrCat(size.percent, "%");
  return absl::StrCat(size.bytes);
}

int64_t MachineMemoryBytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGESIZE);
  int64_t ram = pages > 0 && page_size > 0 ? SaturatingMul(pages, page_size) : kMax;
  ram = std::min(ram, CgroupLimit("/sys/fs/cgroup/memory.max"));                     // v2
  ram = std::min(ram, CgroupLimit("/sys/fs/cgroup/memory/memory.limit_in_bytes"));  // v1
  return ram;
}

int64_t MemoryBudgetBytes() {
  if (const int64_t forced = budget_for_testing.load(); forced > 0) return forced;
  const MemorySize size = absl::GetFlag(FLAGS_max_memory);
  if (size.percent <= 0) return size.bytes;
  return static_cast<int64_t>(static_cast<double>(MachineMemoryBytes()) * size.percent / 100.0);
}

void SetMemoryBudgetForTesting(int64_t bytes) { budget_for_testing.store(bytes); }

std::string FormatBytes(int64_t bytes) {
  if (bytes < 0 || bytes == kMax) return "more than 8 EiB";
  if (bytes < 1024) return absl::StrCat(bytes, " bytes");
  const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes) / 1024.0;
  int unit = 0;
  while (value >= 1024.0 && unit < 5) {
    value /= 1024.0;
    ++unit;
  }
  return absl::StrFormat("%.1f %s", value, units[unit]);
}

absl::Status CheckMemoryBudget(int64_t bytes, absl::string_view what) {
  const int64_t budget = MemoryBudgetBytes();
  if (bytes >= 0 && bytes <= budget) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(what, " needs ", FormatBytes(bytes),
                                                   ", more than the memory budget of ",
                                                   FormatBytes(budget), " (--max_memory)"));
}

int64_t SaturatingMul(int64_t a, int64_t b) {
  if (a < 0 || b < 0) return kMax;
  if (a != 0 && b > kMax / a) return kMax;
  return a * b;
}

int64_t SaturatingAdd(int64_t a, int64_t b) {
  if (a < 0 || b < 0 || a > kMax - b) return kMax;
  return a + b;
}

MemoryLedger::MemoryLedger(int64_t limit_bytes, std::string name)
    : limit_(std::max<int64_t>(0, limit_bytes)), name_(std::move(name)) {}

absl::StatusOr<MemoryLedger::Charge> MemoryLedger::Reserve(int64_t bytes,
                                                           absl::string_view what) {
  if (bytes == 0) return Charge(this, 0);
  int64_t used = in_use_.load();
  while (bytes > 0 && bytes <= limit_ - used) {
    if (in_use_.compare_exchange_weak(used, used + bytes)) {
      int64_t peak = peak_.load();
      while (used + bytes > peak && !peak_.compare_exchange_weak(peak, used + bytes)) {
      }
      return Charge(this, bytes);
    }
  }
  ++refused_;
  return absl::ResourceExhaustedError(
      absl::StrCat(what, " needs ", FormatBytes(bytes), ", but only ",
                   FormatBytes(std::max<int64_t>(0, limit_ - used)), " of ", name_, " (",
                   FormatBytes(limit_), ") are free; try again later or with less"));
}

void MemoryLedger::Release(int64_t bytes) { in_use_ -= bytes; }

MemoryLedger::Charge::Charge(Charge&& other) noexcept
    : ledger_(other.ledger_), bytes_(other.bytes_) {
  other.ledger_ = nullptr;
  other.bytes_ = 0;
}

MemoryLedger::Charge& MemoryLedger::Charge::operator=(Charge&& other) noexcept {
  if (this != &other) {
    if (ledger_ != nullptr) ledger_->Release(bytes_);
    ledger_ = other.ledger_;
    bytes_ = other.bytes_;
    other.ledger_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

MemoryLedger::Charge::~Charge() {
  if (ledger_ != nullptr) ledger_->Release(bytes_);
}

}  // namespace pstrain
