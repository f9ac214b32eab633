#ifndef PSTRAIN_TESTS_PS_FINAL_STATUS_H_
#define PSTRAIN_TESTS_PS_FINAL_STATUS_H_

// Reading back what each ps task logged as it exited. Apart from tests/cluster_test_util
// because it links pstrain's protos, which a reflection-only client must not
// (tests/reflection/).

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "proto/chief.pb.h"
#include "proto/ps.pb.h"

namespace pstrain {

// The status each ps task logged as it exited ("ps task N final status: {json}", the
// GetStatus answer in protobuf's JSON), by task index; a line that does not parse fails
// the test. Its counters and versions are the ps's own account of the whole run.
std::map<int, PsStatusResponse> FinalPsStatuses(const std::string& log);

// The status the chief logged as it exited ("chief final status: {json}", its GetStatus
// answer in protobuf's JSON): the chief's own memory then, and each task's as its last
// heartbeat reported it. Errors: NOT_FOUND no such line; INVALID_ARGUMENT one that does
// not parse.
absl::StatusOr<ChiefStatusResponse> FinalChiefStatus(const std::string& log);

}  // namespace pstrain

#endif  // PSTRAIN_TESTS_PS_FINAL_STATUS_H_
