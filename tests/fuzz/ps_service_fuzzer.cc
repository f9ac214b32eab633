// The ps service core fed parsed requests, as its gRPC handlers receive them: each input
// is a sequence of calls (a method byte, a 2-byte length, that many bytes of the request
// message) run against a fresh VariableStore behind PsServiceImpl. No call may crash, and
// after every call the store's variables still hold finite values of their shapes.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/memory_budget.h"
#include "ps_server/rpc/ps_service.h"

namespace {

template <typename Request>
bool Parse(const uint8_t* data, size_t size, Request* request) {
  return request->ParseFromArray(data, static_cast<int>(size));
}

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "ps_service_fuzzer: %s\n", what.c_str());
  std::abort();
}

void CheckStore(const pstrain::VariableStore& store) {
  std::vector<std::string> names;
  for (const auto& info : store.List()) names.push_back(info.name);
  absl::StatusOr<std::vector<pstrain::VariableSnapshot>> state = store.ReadState(names);
  if (!state.ok()) Fail("ReadState failed: " + state.status().ToString());
  for (const pstrain::VariableSnapshot& s : *state) {
    if (s.value.num_elements() != pstrain::NumElements(s.value.shape())) {
      Fail("variable " + s.name + " does not hold its shape's element count");
    }
    for (float v : s.value.values()) {
      // Nothing non-finite gets in.
      if (!std::isfinite(v)) Fail("variable " + s.name + " holds " + std::to_string(v));
    }
    for (const pstrain::NamedTensor& slot : s.slots) {
      for (float v : slot.tensor.values()) {
        if (!std::isfinite(v)) {
          Fail("slot " + slot.name + " of " + s.name + " holds " + std::to_string(v));
        }
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A create may carry initializers, which the ps draws itself: a few bytes can ask for
  // as many values as the memory budget allows. 64 MiB keeps every input fast.
  pstrain::SetMemoryBudgetForTesting(int64_t{64} << 20);
  pstrain::VariableStore store;
  pstrain::PsServiceImpl service(&store, [](const std::string&) {});
  size_t at = 0;
  for (int calls = 0; calls < 16 && at + 3 <= size; ++calls) {
    const uint8_t method = data[at];
    const size_t length = std::min<size_t>(size - at - 3, data[at + 1] | (data[at + 2] << 8));
    const uint8_t* body = data + at + 3;
    at += 3 + length;
    switch (method % 7) {
      case 0: {
        pstrain::CreateVariablesRequest request;
        pstrain::CreateVariablesResponse response;
        if (!Parse(body, length, &request)) break;
        // A consistency wait is bounded by the request; keep it short for the fuzzer.
        if (request.consistency().timeout_ms() > 5) request.mutable_consistency()->set_timeout_ms(5);
        (void)service.CreateVariables(nullptr, &request, &response);
        break;
      }
      case 1: {
        pstrain::PullRequest request;
        pstrain::PullResponse response;
        if (Parse(body, length, &request)) (void)service.Pull(nullptr, &request, &response);
        break;
      }
      case 2: {
        pstrain::PushRequest request;
        pstrain::PushResponse response;
        if (Parse(body, length, &request)) (void)service.Push(nullptr, &request, &response);
        break;
      }
      case 3: {
        pstrain::PushPullRequest request;
        pstrain::PushPullResponse response;
        if (Parse(body, length, &request)) (void)service.PushPull(nullptr, &request, &response);
        break;
      }
      case 4: {
        pstrain::ReadStateRequest request;
        pstrain::ReadStateResponse response;
        if (Parse(body, length, &request)) (void)service.ReadState(nullptr, &request, &response);
        break;
      }
      case 5: {
        pstrain::RestoreStateRequest request;
        pstrain::RestoreStateResponse response;
        if (Parse(body, length, &request)) {
          (void)service.RestoreState(nullptr, &request, &response);
        }
        break;
      }
      default: {
        pstrain::PsStatusRequest request;
        pstrain::PsStatusResponse response;
        (void)service.GetStatus(nullptr, &request, &response);
        break;
      }
    }
    CheckStore(store);
  }
  return 0;
}
