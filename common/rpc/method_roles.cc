#include "common/rpc/method_roles.h"

#include <initializer_list>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pstrain {
namespace {

// One bit per role.
using RoleSet = unsigned;
constexpr RoleSet Bit(Role role) { return 1u << static_cast<unsigned>(role); }
constexpr RoleSet kChief = Bit(Role::kChief);
constexpr RoleSet kWorker = Bit(Role::kWorker);
constexpr RoleSet kPs = Bit(Role::kPs);
constexpr RoleSet kAdmin = Bit(Role::kAdmin);
constexpr RoleSet kAnyRole = kChief | kWorker | kPs | kAdmin;

const absl::flat_hash_map<std::string, RoleSet>& RoleTable() {
  static const auto* table = new absl::flat_hash_map<std::string, RoleSet>({
      {"/pstrain.ParameterServer/CreateVariables", kChief},
      {"/pstrain.ParameterServer/RestoreState", kChief},
      {"/pstrain.ParameterServer/ReadState", kChief | kAdmin},
      // Files in the shared checkpoint folder: the chief only (an admin takes a
      // checkpoint through the chief's SaveCheckpoint).
      {"/pstrain.ParameterServer/WriteCheckpointShard", kChief},
      {"/pstrain.ParameterServer/RestoreCheckpointShard", kChief},
      {"/pstrain.ParameterServer/Shutdown", kChief | kAdmin},
      {"/pstrain.ParameterServer/Pull", kChief | kWorker},
      {"/pstrain.ParameterServer/PullRows", kChief | kWorker},
      {"/pstrain.ParameterServer/Push", kWorker},
      {"/pstrain.ParameterServer/PushPull", kWorker},
      {"/pstrain.ParameterServer/PushPullStream", kWorker},
      {"/pstrain.ParameterServer/PushRows", kWorker},
      {"/pstrain.ParameterServer/GetStatus", kAnyRole},
      {"/pstrain.Chief/RegisterTask", kPs | kWorker},
      {"/pstrain.Chief/Heartbeat", kPs | kWorker},
      {"/pstrain.Chief/Report", kPs | kWorker},
      {"/pstrain.Chief/SaveCheckpoint", kChief | kAdmin},
      {"/pstrain.Chief/GetStatus", kAnyRole},
      {"/pstrain.Collective/PushChunk", kChief | kWorker},
      {"/pstrain.Collective/ChunkStream", kChief | kWorker},
      {"/pstrain.FunctionWorker/RunFunction", kChief},
      // An operator may stop a worker, as it may a ps (the worker daemon's only service).
      {"/pstrain.FunctionWorker/Shutdown", kChief | kAdmin},
      {"/pstrain.FunctionWorker/GetStatus", kAnyRole},
  });
  return *table;
}

std::string RoleNames(RoleSet roles) {
  std::vector<std::string> names;
  for (Role role : {Role::kChief, Role::kWorker, Role::kPs, Role::kAdmin}) {
    if (roles & Bit(role)) names.emplace_back(RoleName(role));
  }
  return absl::StrJoin(names, " or ");
}

}  // namespace

bool IsOpenMethod(absl::string_view method) {
  return absl::StartsWith(method, "/grpc.health.v1.Health/") ||
         absl::StartsWith(method, "/grpc.reflection.v1alpha.ServerReflection/") ||
         absl::StartsWith(method, "/grpc.reflection.v1.ServerReflection/");
}

absl::Status AuthorizeMethod(absl::string_view method, const CallerIdentity& caller) {
  if (IsOpenMethod(method)) return absl::OkStatus();
  const auto& table = RoleTable();
  const auto it = table.find(method);
  if (it == table.end()) {
    return absl::PermissionDeniedError(
        absl::StrCat(method.substr(0, 128), " is not open to any caller"));
  }
  if ((it->second & Bit(caller.role)) == 0) {
    return absl::PermissionDeniedError(absl::StrCat(method, " is for the ", RoleNames(it->second),
                                                    ", not a ", RoleName(caller.role)));
  }
  return absl::OkStatus();
}

std::vector<std::string> MethodsWithRoles() {
  std::vector<std::string> methods;
  for (const auto& [method, roles] : RoleTable()) methods.push_back(method);
  return methods;
}

}  // namespace pstrain
