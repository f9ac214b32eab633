#ifndef PSTRAIN_DEPLOY_LOCAL_FREE_PORT_H_
#define PSTRAIN_DEPLOY_LOCAL_FREE_PORT_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace pstrain {

// `count` distinct TCP ports for a cluster's tasks, reserved for the rest of the calling
// process's life: nothing else on the machine takes one of them between this call and
// the moment a daemon (started later, told the port in its TF_CONFIG) binds it.
//
// Why not bind port 0 and let the daemon report what it got: TF_CONFIG names every
// task's address before any task starts, so the ports must be known up front. Why not
// bind port 0, read the port and close the socket (what this did before): until the
// daemon binds, the kernel may hand that port to anyone else, since it lies in the
// ephemeral range that every outgoing connect() and every bind(0) draws from, and the
// daemons bind exclusively, so the cluster then fails to start. So:
//  - Ports are chosen outside the kernel's ephemeral range
//    (/proc/sys/net/ipv4/ip_local_port_range) and above 10000 (below it lie many
//    well-known services): no connect() or bind(0) on this machine is ever given one.
//  - Each port is reserved across processes by an exclusive lock on its byte of one
//    lock file (PortReservationLockFile()), held by this process until it exits; two
//    processes picking at once (tests run in parallel, two launchers) never get the
//    same port, and a port locked by a process that died is free again at once.
//  - A port is picked only if it is free now on every address (127.0.0.1 and ::1 alike:
//    "localhost" is both, and a client may try either), so one that some other program
//    listens on is skipped.
// Only a program that binds a fixed port of its own in that range can still collide.
// The launcher and the tests hold their ports for as long as their cluster runs, as they
// live as long as it does. Thread-safe; a forked child reserves its own ports apart from
// its parent's.
// Errors: UNAVAILABLE the lock file cannot be opened, or not enough ports are free;
//         FAILED_PRECONDITION no port lies outside the ephemeral range.
absl::StatusOr<std::vector<int>> PickFreePorts(int count);

// The lock file of the reservations: $PSTRAIN_PORT_LOCK_FILE when set, else
// /tmp/pstrain-ports.lock (shared by every user: created mode 0666).
std::string PortReservationLockFile();

// The kernel's ephemeral port range [first, last], from
// /proc/sys/net/ipv4/ip_local_port_range (Linux's default 32768-60999 when unreadable).
std::pair<int, int> EphemeralPortRange();

}  // namespace pstrain

#endif  // PSTRAIN_DEPLOY_LOCAL_FREE_PORT_H_
