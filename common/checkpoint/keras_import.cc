#include "common/checkpoint/keras_import.h"

#include <unistd.h>

#include <map>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/keras_weights_h5.h"
#include "common/checkpoint/zip_archive.h"
#include "common/model/model.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace pstrain {

using nlohmann::json;

std::vector<std::string> KerasLayerPaths(const Model& model) {
  std::vector<std::string> paths;
  std::map<std::string, int> used;  // snake-case class name -> times seen
  for (const auto& layer : model.layers()) {
    std::string name = KerasSnakeCase(layer->class_name());
    const int seen = used[name]++;
    if (seen > 0) name = absl::StrCat(name, "_", seen);
    paths.push_back(absl::StrCat("layers/", name));
  }
  return paths;
}

std::vector<std::string> KerasWeightDatasets(const Model& model) {
  const std::vector<std::string> paths = KerasLayerPaths(model);
  std::vector<int> per_layer(paths.size(), 0);
  std::vector<std::string> datasets;
  for (const VariableSpec& variable : model.variables()) {
    datasets.push_back(
        absl::StrCat(paths.at(variable.layer), "/vars/", per_layer.at(variable.layer)++));
  }
  return datasets;
}

absl::StatusOr<KerasModelFile> ReadKerasFile(const std::string& path, bool read_weights) {
  auto bad = [&path](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
  };
  // One member at a time: the weights (gigabytes for a large table) only when wanted.
  absl::StatusOr<std::string> config_bytes =
      ReadZipMember(path, "config.json", kMaxKerasMemberBytes);
  // NOT_FOUND is the file's absence only: a missing member is a bad file.
  if (absl::IsNotFound(config_bytes.status()) && ::access(path.c_str(), F_OK) == 0) {
    return bad("no config.json (not a Keras 3 .keras file)");
  }
  if (!config_bytes.ok()) return config_bytes.status();
  absl::StatusOr<ZipMemberInfo> weights_info = StatZipMember(path, kKerasWeightsMember);
  if (absl::IsNotFound(weights_info.status())) {
    return bad("no model.weights.h5 (only the HDF5 weights format is read, not .npz)");
  }
  if (!weights_info.ok()) return weights_info.status();
  KerasModelFile file;
  file.model = json::parse(*config_bytes, nullptr, /*allow_exceptions=*/false);
  if (file.model.is_discarded() || !file.model.is_object()) {
    return bad("config.json is not a JSON object");
  }
  if (auto c = file.model.find("compile_config"); c != file.model.end()) {
    file.compile_config = *c;
    file.model.erase(c);
  }
  absl::StatusOr<std::unique_ptr<Model>> model = Model::FromKerasJson(file.model, nullptr);
  if (!model.ok()) return bad(model.status().message());
  if (!read_weights) return file;
  PS_ASSIGN_OR_RETURN(const std::string weights,
                      ReadZipMember(path, kKerasWeightsMember, kMaxKerasMemberBytes));

  const std::vector<std::string> paths = KerasLayerPaths(**model);
  std::vector<KerasSaveableShapes> wanted;
  for (const std::string& p : paths) wanted.push_back({p, {}});
  for (const VariableSpec& variable : (*model)->variables()) {
    wanted.at(variable.layer).shapes.push_back(variable.shape);
  }
  absl::StatusOr<std::vector<std::vector<Tensor>>> per_layer =
      ReadKerasWeightsH5(weights, wanted);
  if (!per_layer.ok()) return bad(per_layer.status().message());
  for (std::vector<Tensor>& layer : *per_layer) {
    for (Tensor& t : layer) file.weights.push_back(std::move(t));
  }
  return file;
}

}  // namespace pstrain
