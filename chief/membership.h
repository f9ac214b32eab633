#ifndef PSTRAIN_CHIEF_MEMBERSHIP_H_
#define PSTRAIN_CHIEF_MEMBERSHIP_H_

// The chief daemon's membership is distribute/membership.h, the one component the custom
// loop uses too: chief/rpc/chief_service.h feeds it from RegisterTask and Heartbeat, the
// coordinator reports the workers it loses. What is left here is the chief's view of it
// on the wire (ChiefStatusResponse.tasks) and its options.

#include <vector>

#include "absl/time/time.h"
#include "distribute/membership.h"
#include "proto/chief.pb.h"

namespace pstrain {

using Membership = distribute::Membership;

// The chief's membership options: ps and worker tasks, lost once their heartbeats have
// been missing for `lost_after`; a return goes to the chief's log.
distribute::Membership::Options ChiefMembershipOptions(absl::Duration lost_after);

// Every member as ChiefStatusResponse.tasks lists it, in Snapshot's order.
std::vector<TaskState> TaskStates(const distribute::Membership& membership);

}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_MEMBERSHIP_H_
