#ifndef PSTRAIN_TESTS_REFLECTION_REFLECTION_CLIENT_H_
#define PSTRAIN_TESTS_REFLECTION_REFLECTION_CLIENT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace pstrain {

// What a client with nothing but server reflection can do, as grpcurl does: it has no
// .proto of the server's compiled in (only the reflection protocol's own).

// The services the server at `address` lists. Errors: the RPC's, with the address.
absl::StatusOr<std::vector<std::string>> ListServicesByReflection(const std::string& address,
                                                                  absl::Duration timeout);

// Calls grpc.health.v1.Health/Check (service "") at `address`: asks reflection for the
// file that defines grpc.health.v1.Health (and the files it imports), builds the request
// and reads the reply as protobuf DynamicMessages from those descriptors, and sends it
// through a generic stub. Returns the reply's status by name ("SERVING").
// Errors: NOT_FOUND reflection does not know the health service (the server's reflection
//         cannot describe it); the RPCs' errors, with the address.
absl::StatusOr<std::string> HealthCheckByReflection(const std::string& address,
                                                    absl::Duration timeout);

}  // namespace pstrain

#endif  // PSTRAIN_TESTS_REFLECTION_REFLECTION_CLIENT_H_
