#include "common/math/backend_factory.h"

#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/math/cpu_backend.h"

// PSTRAIN_WITH_CUDA is set by BUILD (local_defines) only under --config=cuda, together with
// the dependency on :cuda_backend; a plain build never includes CUDA code.
#ifdef PSTRAIN_WITH_CUDA
#include "common/math/cuda_backend.h"
#endif

namespace pstrain {
namespace {

constexpr char kAccepted[] = "expected cpu, auto, cuda or cuda:N";

enum class DeviceKind { kCpu, kAuto, kCuda };

struct ParsedDevice {
  DeviceKind kind = DeviceKind::kCpu;
  int ordinal = 0;
};

absl::StatusOr<ParsedDevice> ParseDevice(absl::string_view device) {
  ParsedDevice parsed;
  if (device == "cpu") return parsed;
  if (device == "auto") {
    parsed.kind = DeviceKind::kAuto;
    return parsed;
  }
  parsed.kind = DeviceKind::kCuda;
  if (device == "cuda") return parsed;
  if (absl::StartsWith(device, "cuda:")) {
    const absl::string_view digits = device.substr(5);
    // Digits only: SimpleAtoi would also take "+1" or " 1".
    bool all_digits = !digits.empty() && digits.size() <= 9;
    for (char c : digits) all_digits = all_digits && absl::ascii_isdigit(c);
    if (all_digits && absl::SimpleAtoi(digits, &parsed.ordinal)) return parsed;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("invalid device \"", absl::CEscape(device), "\": ", kAccepted));
}

std::unique_ptr<Backend> Cpu(std::string* note, std::string why) {
  if (note != nullptr) *note = std::move(why);
  return CreateCpuBackend();
}

}  // namespace

bool BuiltWithCuda() {
#ifdef PSTRAIN_WITH_CUDA
  return true;
#else
  return false;
#endif
}

int CudaDeviceCount() {
#ifdef PSTRAIN_WITH_CUDA
  const absl::StatusOr<int> count = QueryCudaDeviceCount();
  return count.ok() ? *count : 0;
#else
  return 0;
#endif
}

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(absl::string_view device,
                                                       std::string* note) {
  if (note != nullptr) note->clear();
  const absl::StatusOr<ParsedDevice> parsed = ParseDevice(device);
  if (!parsed.ok()) return parsed.status();
  if (parsed->kind == DeviceKind::kCpu) return CreateCpuBackend();

#ifdef PSTRAIN_WITH_CUDA
  const absl::StatusOr<int> count = QueryCudaDeviceCount();
  if (parsed->kind == DeviceKind::kAuto) {
    if (!count.ok()) {
      return Cpu(note, absl::StrCat("no CUDA device answered (", count.status().message(),
                                    "); using the CPU"));
    }
    if (*count == 0) return Cpu(note, "no CUDA device found; using the CPU");
    absl::StatusOr<std::unique_ptr<Backend>> cuda = CreateCudaBackend(0);
    if (!cuda.ok()) {
      // A device answered but could not be used (out of memory, broken driver state):
      // "auto" promises a working backend, so say why and take the CPU.
      return Cpu(note, absl::StrCat("CUDA device 0 is not usable (", cuda.status().message(),
                                    "); using the CPU"));
    }
    return cuda;
  }
  if (!count.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "device ", device, ": no CUDA device answered (", count.status().message(), ")"));
  }
  if (parsed->ordinal >= *count) {
    return absl::FailedPreconditionError(
        absl::StrCat("device ", device, ": no such CUDA device (", *count,
                     " device(s) answered)"));
  }
  return CreateCudaBackend(parsed->ordinal);
#else
  if (parsed->kind == DeviceKind::kAuto) {
    return Cpu(note, "this binary was built without CUDA (build with --config=cuda); using the CPU");
  }
  return absl::FailedPreconditionError(
      absl::StrCat("device ", device,
                   ": this binary was built without CUDA support (rebuild with "
                   "--config=cuda), use --device=cpu or --device=auto"));
#endif
}

}  // namespace pstrain
