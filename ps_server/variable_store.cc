#include "ps_server/variable_store.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "google/protobuf/util/message_differencer.h"

namespace pstrain {

absl::Status VariableStore::CreateVariables(std::vector<NamedTensor> variables,
                                            const OptimizerConfig& optimizer) {
  absl::flat_hash_set<std::string> seen;
  for (const NamedTensor& v : variables) {
    if (v.name.empty()) return absl::InvalidArgumentError("variable with an empty name");
    if (!seen.insert(v.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("variable \"", v.name, "\" given twice"));
    }
  }
  absl::MutexLock lock(&mu_);
  std::unique_ptr<Optimizer> new_optimizer;
  if (optimizer_ == nullptr) {
    PS_ASSIGN_OR_RETURN(new_optimizer, Optimizer::Create(optimizer));
  } else if (!google::protobuf::util::MessageDifferencer::Equals(optimizer, optimizer_config_)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "this ps already runs optimizer \"", optimizer_config_.name(),
        "\" with other settings; one ps serves one optimizer configuration"));
  }
  for (const NamedTensor& v : variables) {
    auto it = variables_.find(v.name);
    if (it == variables_.end()) continue;
    absl::MutexLock var_lock(&it->second->mu);
    if (it->second->value.shape() != v.tensor.shape()) {
      return absl::AlreadyExistsError(absl::StrCat(
          "variable \"", v.name, "\" exists with shape ", it->second->value.ShapeString(),
          ", not ", v.tensor.ShapeString()));
    }
  }
  if (new_optimizer != nullptr) {
    optimizer_ = std::move(new_optimizer);
    optimizer_config_ = optimizer;
  }
  for (NamedTensor& v : variables) {
    if (variables_.contains(v.name)) continue;
    auto variable = std::make_unique<Variable>(std::move(v.tensor));
    absl::MutexLock var_lock(&variable->mu);
    variable->state = optimizer_->NewState(variable->value.num_elements());
    variables_.emplace(v.name, std::move(variable));
  }
  return absl::OkStatus();
}

absl::StatusOr<VariableStore::Variable*> VariableStore::Find(const std::string& name) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = variables_.find(name);
  if (it == variables_.end()) {
    return absl::NotFoundError(absl::StrCat("no variable \"", name, "\" on this ps"));
  }
  return it->second.get();
}

absl::StatusOr<std::vector<Tensor>> VariableStore::Pull(absl::Span<const std::string> names,
                                                        std::vector<int64_t>* versions) const {
  std::vector<Variable*> found;
  found.reserve(names.size());
  for (const std::string& name : names) {
    PS_ASSIGN_OR_RETURN(Variable * v, Find(name));
    found.push_back(v);
  }
  std::vector<Tensor> values;
  values.reserve(found.size());
  if (versions != nullptr) versions->clear();
  for (Variable* v : found) {
    absl::MutexLock lock(&v->mu);
    values.push_back(v->value);
    if (versions != nullptr) versions->push_back(v->version);
  }
  ++pulls_;
  return values;
}

absl::Status VariableStore::Push(absl::Span<const NamedTensor> gradients) {
  const Optimizer* optimizer;
  {
    absl::ReaderMutexLock lock(&mu_);
    optimizer = optimizer_.get();
  }
  if (optimizer == nullptr) {
    return absl::FailedPreconditionError("no variables have been created on this ps yet");
  }
  std::vector<Variable*> found;
  found.reserve(gradients.size());
  absl::flat_hash_set<std::string> seen;
  for (const NamedTensor& g : gradients) {
    if (!seen.insert(g.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("gradient for \"", g.name, "\" given twice in one push"));
    }
    PS_ASSIGN_OR_RETURN(Variable * v, Find(g.name));
    absl::MutexLock lock(&v->mu);
    if (v->value.shape() != g.tensor.shape()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "gradient for \"", g.name, "\" has shape ", g.tensor.ShapeString(),
          ", variable has ", v->value.ShapeString()));
    }
    found.push_back(v);
  }
  // Shapes never change after creation, so the checks above still hold here.
  for (size_t i = 0; i < found.size(); ++i) {
    Variable* v = found[i];
    absl::MutexLock lock(&v->mu);
    optimizer->Apply(gradients[i].tensor.values(), v->value.values(), v->state.get());
    ++v->version;
  }
  ++pushes_;
  return absl::OkStatus();
}

std::vector<VariableStore::VariableInfo> VariableStore::List() const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<VariableInfo> infos;
  for (const auto& [name, v] : variables_) {
    absl::MutexLock var_lock(&v->mu);
    infos.push_back({name, v->value.shape(), v->version});
  }
  std::sort(infos.begin(), infos.end(),
            [](const VariableInfo& a, const VariableInfo& b) { return a.name < b.name; });
  return infos;
}

int64_t VariableStore::num_pushes() const { return pushes_.load(); }

int64_t VariableStore::num_pulls() const { return pulls_.load(); }

std::string VariableStore::optimizer_name() const {
  absl::ReaderMutexLock lock(&mu_);
  return optimizer_config_.name();
}

PsStatusResponse DescribeStore(const VariableStore& store) {
  PsStatusResponse response;
  for (const VariableStore::VariableInfo& info : store.List()) {
    VariableInfo* out = response.add_variables();
    out->set_name(info.name);
    for (int64_t d : info.shape) out->add_shape(d);
    out->set_version(info.version);
  }
  response.set_pushes(store.num_pushes());
  response.set_pulls(store.num_pulls());
  response.set_optimizer(store.optimizer_name());
  return response;
}

}  // namespace pstrain
