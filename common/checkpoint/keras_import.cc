#include "common/checkpoint/keras_import.h"

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

absl::StatusOr<KerasModelFile> ReadKerasFile(const std::string& path) {
  auto bad = [&path](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
  };
  PS_ASSIGN_OR_RETURN(std::vector<ZipMember> members,
                      ReadZipArchive(path, kMaxKerasMemberBytes));
  const ZipMember* config = nullptr;
  const ZipMember* weights = nullptr;
  for (const ZipMember& member : members) {
    if (member.name == "config.json") config = &member;
    if (member.name == "model.weights.h5") weights = &member;
  }
  if (config == nullptr) return bad("no config.json (not a Keras 3 .keras file)");
  if (weights == nullptr) {
    return bad("no model.weights.h5 (only the HDF5 weights format is read, not .npz)");
  }
  KerasModelFile file;
  file.model = json::parse(config->bytes, nullptr, /*allow_exceptions=*/false);
  if (file.model.is_discarded() || !file.model.is_object()) {
    return bad("config.json is not a JSON object");
  }
  if (auto c = file.model.find("compile_config"); c != file.model.end()) {
    file.compile_config = *c;
    file.model.erase(c);
  }
  absl::StatusOr<std::unique_ptr<Model>> model = Model::FromKerasJson(file.model, nullptr);
  if (!model.ok()) return bad(model.status().message());

  const std::vector<std::string> paths = KerasLayerPaths(**model);
  std::vector<KerasSaveableShapes> wanted;
  for (const std::string& p : paths) wanted.push_back({p, {}});
  for (const VariableSpec& variable : (*model)->variables()) {
    wanted.at(variable.layer).shapes.push_back(variable.shape);
  }
  absl::StatusOr<std::vector<std::vector<Tensor>>> per_layer =
      ReadKerasWeightsH5(weights->bytes, wanted);
  if (!per_layer.ok()) return bad(per_layer.status().message());
  for (std::vector<Tensor>& layer : *per_layer) {
    for (Tensor& t : layer) file.weights.push_back(std::move(t));
  }
  return file;
}

}  // namespace pstrain
