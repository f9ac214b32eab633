#ifndef PSTRAIN_TESTS_IN_PROCESS_CLUSTER_H_
#define PSTRAIN_TESTS_IN_PROCESS_CLUSTER_H_

// A whole cluster in one process for tests: every ps and worker task of a loopback cluster
// runs as a thread with its own real gRPC server, configured by TF_CONFIG as the daemons
// are, and the chief on the calling thread.

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "chief/chief_task.h"

namespace pstrain {

// Runs `chief` (its daemon configured from `cluster`, as the others) until the job ends,
// with every ps and worker task of `cluster` (LoopbackCluster's form) as threads; the
// chief's epoch lines go to `out`. Returns every task's exit code once all have exited:
// the chief's, then the ps tasks', then the workers'.
std::vector<int> RunInProcessCluster(
    const std::vector<std::pair<std::string, std::vector<std::string>>>& cluster,
    const ChiefOptions& chief, std::ostream& out);

}  // namespace pstrain

#endif  // PSTRAIN_TESTS_IN_PROCESS_CLUSTER_H_
