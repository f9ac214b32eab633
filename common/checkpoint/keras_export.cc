#include "common/checkpoint/keras_export.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/checkpoint/keras_import.h"
#include "common/checkpoint/keras_weights_h5.h"
#include "common/checkpoint/zip_archive.h"
#include "common/model/job_spec.h"
#include "common/model/loss.h"
#include "common/model/model.h"
#include "common/model/optimizer.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

using nlohmann::json;

// A {"class_name", "config"} object as serialize_keras_object writes it.
json KerasObject(const std::string& module, json object) {
  return {{"module", module},
          {"class_name", object.value("class_name", "")},
          {"config", object.value("config", json::object())},
          {"registered_name", nullptr}};
}

// pstrain keeps hyperparameters as float, so 0.002 reaches JSON as 0.0020000000949949026.
// Keras wrote 0.002: every number that is exactly a float becomes the shortest decimal
// that reads back as that float.
void ShortestFloats(json& value) {
  if (value.is_structured()) {
    for (json& child : value) ShortestFloats(child);
    return;
  }
  if (!value.is_number_float()) return;
  const double d = value.get<double>();
  const float f = static_cast<float>(d);
  if (!std::isfinite(d) || static_cast<double>(f) != d) return;
  for (int digits = 1; digits <= 9; ++digits) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.*g", digits, d);
    const double shorter = std::strtod(text, nullptr);
    if (static_cast<float>(shorter) == f) {
      value = shorter;
      return;
    }
  }
}

json CompileConfig(const JobSpec& spec) {
  json optimizer = KerasObject("keras.optimizers", OptimizerConfigToKeras(spec.optimizer));
  json& rate = optimizer["config"]["learning_rate"];
  if (rate.is_object()) rate = KerasObject("keras.optimizers.schedules", rate);
  return {{"optimizer", optimizer},
          {"loss", KerasObject("keras.losses", LossConfigToKeras(spec.loss))},
          {"loss_weights", nullptr},
          {"metrics", spec.metrics},
          {"weighted_metrics", nullptr},
          {"run_eagerly", false},
          {"steps_per_execution", 1},
          {"jit_compile", false}};
}

struct ParsedCheckpoint {
  JobSpec spec;
  std::unique_ptr<Model> model;  // built without a backend: shapes and configs only
};

absl::StatusOr<ParsedCheckpoint> ParseCheckpointModel(const CheckpointReader& checkpoint) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(checkpoint.job_spec().dump(), ".");
  if (!spec.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint ", checkpoint.path(), ": its job spec does not parse: ", spec.status().message()));
  }
  absl::StatusOr<std::unique_ptr<Model>> model = Model::FromKerasJson(spec->model, nullptr);
  if (!model.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint ", checkpoint.path(), ": its model does not parse: ", model.status().message()));
  }
  return ParsedCheckpoint{*std::move(spec), *std::move(model)};
}

// Rows [row_begin, row_end) of model variable `variable` (Model::variables() order) into
// `out`: a checkpoint's rows, or weights held in memory.
using VariableRows = std::function<absl::Status(size_t variable, int64_t row_begin,
                                                int64_t row_end, float* out)>;

// Removes a file on scope exit (the weights file once it is in the archive, or on an error).
struct RemoveOnExit {
  std::string path;
  ~RemoveOnExit() { ::unlink(path.c_str()); }
};

absl::Status WriteKerasFile(const JobSpec& spec, const Model& model, const VariableRows& rows,
                            int64_t step, const std::string& out_path,
                            const KerasExportOptions& options) {
  PS_RETURN_IF_ERROR(CheckKerasPath(out_path));
  json config = model.ToKerasJson();
  config["compile_config"] = CompileConfig(spec);
  ShortestFloats(config);
  // Each layer's variables at Keras's path for the layer, in the layer's order; the
  // writer counts them object by object, `order` maps that count to the model's.
  std::vector<KerasSaveableShapes> objects;
  for (const std::string& path : KerasLayerPaths(model)) objects.push_back({path, {}});
  std::vector<std::vector<size_t>> per_layer(objects.size());
  for (size_t i = 0; i < model.variables().size(); ++i) {
    const VariableSpec& variable = model.variables()[i];
    objects.at(variable.layer).shapes.push_back(variable.shape);
    per_layer.at(variable.layer).push_back(i);
  }
  std::vector<size_t> order;
  for (const std::vector<size_t>& layer : per_layer) order.insert(order.end(), layer.begin(), layer.end());
  // The weights file on disk beside the output, written by blocks of rows and streamed
  // into the archive: no step holds a whole variable, let alone the file.
  const RemoveOnExit h5{absl::StrCat(out_path, ".weights-", ::getpid(), ".h5")};
  PS_RETURN_IF_ERROR(WriteKerasWeightsH5File(
      h5.path, objects, [&](size_t index, int64_t row_begin, int64_t row_end, float* out) {
        return rows(order.at(index), row_begin, row_end, out);
      }));
  json metadata = {
      {"keras_version", kKerasFormatVersion},
      {"date_saved", absl::FormatTime("%Y-%m-%d@%H:%M:%S", options.date_saved,
                                      absl::LocalTimeZone())},
      // Keras reads neither key below; they say where the file came from.
      {"exported_by", "pstrain"}};
  if (step >= 0) metadata["checkpoint_step"] = step;
  return WriteZipArchive(out_path, {{"metadata.json", metadata.dump()},
                                    {"config.json", config.dump()},
                                    {kKerasWeightsMember, "", h5.path}});
}

}  // namespace

absl::Status CheckKerasPath(absl::string_view path, absl::string_view what) {
  if (absl::EndsWith(path, ".keras")) return absl::OkStatus();
  const std::string named =
      what.empty() ? absl::StrCat("\"", path, "\"") : absl::StrCat(what, path);
  return absl::InvalidArgumentError(
      absl::StrCat(named, " does not end in .keras (Keras loads only those)"));
}

absl::Status ExportKeras(const CheckpointReader& checkpoint, const std::string& out_path,
                         const KerasExportOptions& options) {
  PS_RETURN_IF_ERROR(CheckKerasPath(out_path));
  PS_ASSIGN_OR_RETURN(ParsedCheckpoint parsed, ParseCheckpointModel(checkpoint));
  // The model's variables only, checked first, then read a block of rows at a time (a
  // sharded checkpoint opened without its tensors reads them from its shard files, each
  // block's CRC verified; its optimizer slots are never read).
  const std::vector<VariableSpec>& variables = parsed.model->variables();
  for (const VariableSpec& variable : variables) {
    PS_ASSIGN_OR_RETURN(std::vector<int64_t> shape, checkpoint.Shape(variable.name));
    if (shape != variable.shape) {
      return absl::FailedPreconditionError(absl::StrCat(
          "checkpoint ", checkpoint.path(), ": ", variable.name, " has shape [",
          absl::StrJoin(shape, ","), "], the model's is [",
          absl::StrJoin(variable.shape, ","), "]"));
    }
  }
  return WriteKerasFile(
      parsed.spec, *parsed.model,
      [&](size_t i, int64_t row_begin, int64_t row_end, float* out) {
        return checkpoint.ReadRows(variables[i].name, row_begin, row_end, out);
      },
      checkpoint.step(), out_path, options);
}

absl::Status ExportKerasModel(const JobSpec& job, absl::Span<const Tensor> weights,
                              const std::string& out_path, const KerasExportOptions& options) {
  absl::StatusOr<std::unique_ptr<Model>> model = Model::FromKerasJson(job.model, nullptr);
  if (!model.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the job's model does not parse: ", model.status().message()));
  }
  const std::vector<VariableSpec>& variables = (*model)->variables();
  if (weights.size() != variables.size()) {
    return absl::InvalidArgumentError(absl::StrCat("got ", weights.size(), " weights for ",
                                                   variables.size(), " model variables"));
  }
  for (size_t i = 0; i < weights.size(); ++i) {
    if (weights[i].shape() != variables[i].shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          variables[i].name, " has shape [", absl::StrJoin(weights[i].shape(), ","),
          "], the model's is [", absl::StrJoin(variables[i].shape, ","), "]"));
    }
  }
  return WriteKerasFile(
      job, **model,
      [&weights](size_t i, int64_t row_begin, int64_t row_end, float* out) {
        const Tensor& t = weights[i];
        const int64_t row = t.shape().size() <= 1 ? 1 : t.num_elements() / t.shape()[0];
        std::copy(t.data() + row_begin * row, t.data() + row_end * row, out);
        return absl::OkStatus();
      },
      /*step=*/-1, out_path, options);
}

}  // namespace pstrain
