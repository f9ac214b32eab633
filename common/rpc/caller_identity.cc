#include "common/rpc/caller_identity.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace pstrain {

absl::StatusOr<Role> RoleFromName(absl::string_view name) {
  if (name == RoleName(Role::kAdmin)) return Role::kAdmin;
  // The task types are TF_CONFIG's (one parser: common/cluster_spec.h); an evaluator runs
  // no pstrain daemon, so it is no caller.
  absl::StatusOr<Role> role = RoleFromTaskType(name);
  if (role.ok() && *role != Role::kEvaluator) return role;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown role \"", name, "\" (expected chief, worker, ps or admin)"));
}

std::string FormatIdentity(const CallerIdentity& identity) {
  // The operator is one identity, whatever its index.
  if (identity.role == Role::kAdmin) return "admin";
  return absl::StrCat(RoleName(identity.role), "-", identity.index);
}

absl::StatusOr<CallerIdentity> ParseIdentity(absl::string_view text) {
  CallerIdentity identity;
  const size_t dash = text.rfind('-');
  const absl::string_view role = dash == absl::string_view::npos ? text : text.substr(0, dash);
  absl::StatusOr<Role> parsed = RoleFromName(role);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("identity \"", text.substr(0, 64), "\": ", parsed.status().message()));
  }
  identity.role = *parsed;
  if (dash == absl::string_view::npos) {
    if (identity.role == Role::kChief || identity.role == Role::kAdmin) return identity;
    return absl::InvalidArgumentError(
        absl::StrCat("identity \"", text.substr(0, 64), "\" has no task index (e.g. worker-1)"));
  }
  if (!absl::SimpleAtoi(text.substr(dash + 1), &identity.index) || identity.index < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("identity \"", text.substr(0, 64), "\": the index is not a number >= 0"));
  }
  return identity;
}

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  // Every byte of the longer one is looked at, whatever the other holds.
  const size_t n = a.size() > b.size() ? a.size() : b.size();
  unsigned char difference = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    difference |= x ^ y;
  }
  return difference == 0;
}

}  // namespace pstrain
