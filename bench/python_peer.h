#ifndef PSTRAIN_BENCH_PYTHON_PEER_H_
#define PSTRAIN_BENCH_PYTHON_PEER_H_

// The benchmarks measure a Python peer (PyTorch, gloo) in the same run as our figures:
// finding its script and reading its result lines is the same for every benchmark.

#include <functional>
#include <string>

namespace pstrain {

// The script `relative` (e.g. "bench/torch_baseline.py"): `flag` when set, else the copy
// in the working directory, else the one in the binary's runfiles; "" when none exists.
std::string FindPeerScript(const std::string& flag, const std::string& relative,
                           const char* argv0);

// Runs `command` with stderr merged into stdout. Each output line goes to `parse`; a line
// it does not take (returns false) is printed indented: a version line, "skipped", an
// error. Returns false when the command cannot be started.
bool RunPeer(const std::string& command, const std::function<bool(const char* line)>& parse);

}  // namespace pstrain

#endif  // PSTRAIN_BENCH_PYTHON_PEER_H_
