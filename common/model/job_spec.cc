#include "common/model/job_spec.h"

#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/checkpoint/keras_import.h"
#include "common/model/model.h"
#include "common/model/optimizer.h"
#include "common/status_macros.h"
#include "common/training/consistency_config.h"
#include "nlohmann/json.hpp"

namespace pstrain {

using json = nlohmann::json;

namespace {

absl::Status Bad(const std::string& msg) {
  return absl::InvalidArgumentError(absl::StrCat("job spec: ", msg));
}

absl::StatusOr<int64_t> GetInt(const json& obj, const char* section, const char* key,
                               int64_t def, int64_t min, int64_t max) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return def;
  if (!it->is_number_integer()) {
    return Bad(absl::StrCat(section, key, " must be an integer, got ", it->dump()));
  }
  if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(max)) {
    return Bad(absl::StrCat(section, key, " ", it->dump(), " is out of range"));
  }
  const int64_t v = it->get<int64_t>();
  if (v < min || v > max) {
    return Bad(absl::StrCat(section, key, " ", v, " is out of range [", min, ", ", max, "]"));
  }
  return v;
}

std::string FullPath(const std::string& path, const std::string& base_dir) {
  return (!path.empty() && path[0] == '/') || base_dir.empty() ? path : base_dir + "/" + path;
}

absl::StatusOr<json> ReadModelFile(const std::string& path, const std::string& base_dir) {
  const std::string full = FullPath(path, base_dir);
  std::ifstream in(full, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("job spec: cannot read model file ", full));
  std::stringstream ss;
  ss << in.rdbuf();
  json j = json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Bad(absl::StrCat("model file ", full, " is not valid JSON"));
  return j;
}

// A Keras 3 compile_config's optimizer, loss and metrics as a job's "compile" (the
// serialized objects without their "module" and "registered_name").
json CompileFromKeras(const json& compile_config) {
  auto plain = [](json object) {
    if (object.is_object()) {
      object.erase("module");
      object.erase("registered_name");
      if (object.contains("config") && object["config"].is_object()) {
        json& rate = object["config"]["learning_rate"];
        if (rate.is_object()) {
          rate.erase("module");
          rate.erase("registered_name");
        } else if (rate.is_null()) {
          object["config"].erase("learning_rate");
        }
      }
    }
    return object;
  };
  json compile = json::object();
  for (const char* key : {"optimizer", "loss", "metrics"}) {
    auto it = compile_config.find(key);
    if (it != compile_config.end() && !it->is_null()) compile[key] = plain(*it);
  }
  return compile;
}

bool KnownMetric(const std::string& m) {
  return m == "accuracy" || m == "acc" || m == "sparse_categorical_accuracy" ||
         m == "categorical_accuracy" || m == "binary_accuracy";
}

// The "model" section: a Keras model object, a model JSON file, or a .keras file (whose
// compile_config and weights come along: `*keras_compile`, spec->initial_weights).
// Returns the model built once to check it (the loss is checked against it).
absl::StatusOr<std::unique_ptr<Model>> ReadModelSection(const json& root,
                                                        const std::string& base_dir,
                                                        JobSpec* spec, json* keras_compile,
                                                        bool read_weights) {
  auto model = root.find("model");
  if (model == root.end() || model->is_null()) return Bad("missing \"model\"");
  if (model->is_string() && absl::EndsWith(model->get<std::string>(), ".keras")) {
    const std::string path = FullPath(model->get<std::string>(), base_dir);
    absl::StatusOr<KerasModelFile> file = ReadKerasFile(path, read_weights);
    if (!file.ok()) {
      return absl::Status(file.status().code(),
                          absl::StrCat("job spec: model: ", file.status().message()));
    }
    *spec->model = std::move(file->model);
    *keras_compile = std::move(file->compile_config);
    if (read_weights) {
      spec->initial_weights =
          std::make_shared<const std::vector<Tensor>>(std::move(file->weights));
    }
    std::error_code error;
    const std::filesystem::path absolute = std::filesystem::absolute(path, error);
    spec->initial_weights_file = error ? path : absolute.lexically_normal().string();
  } else if (model->is_string()) {
    PS_ASSIGN_OR_RETURN(*spec->model, ReadModelFile(model->get<std::string>(), base_dir));
  } else if (model->is_object()) {
    *spec->model = *model;
  } else {
    return Bad("\"model\" must be a Keras model object or a file path");
  }
  auto built = Model::FromKerasJson(spec->model, /*backend=*/nullptr);
  if (!built.ok()) return Bad(std::string(built.status().message()));
  return std::move(*built);
}

// compile.metrics: a list of the metric names Fit computes.
absl::Status ReadMetrics(const json& compile, JobSpec* spec) {
  auto m = compile.find("metrics");
  if (m == compile.end() || m->is_null()) return absl::OkStatus();
  if (!m->is_array()) return Bad("compile.metrics must be a list of strings");
  for (const json& e : *m) {
    if (!e.is_string()) {
      return Bad(absl::StrCat("compile.metrics entry ", e.dump(), " is not a string"));
    }
    if (!KnownMetric(e.get<std::string>())) {
      return Bad(absl::StrCat("unsupported metric \"", e.get<std::string>(), "\""));
    }
    spec->metrics.push_back(e.get<std::string>());
  }
  return absl::OkStatus();
}

// The "compile" section (else a .keras file's compile_config): optimizer (rmsprop when
// absent, as Keras), loss (required, and it must fit `model`'s output), metrics.
absl::Status ReadCompileSection(const json& root, const json& keras_compile, Model* model,
                                JobSpec* spec) {
  json compile = json::object();
  auto c = root.find("compile");
  if (c != root.end() && !c->is_null()) {
    if (!c->is_object()) return Bad("\"compile\" must be an object");
    compile = *c;
  } else if (keras_compile.is_object()) {
    compile = CompileFromKeras(keras_compile);
  }
  for (auto it = compile.begin(); it != compile.end(); ++it) {
    if (it.key() != "optimizer" && it.key() != "loss" && it.key() != "metrics") {
      return Bad(absl::StrCat("unknown key compile.", it.key()));
    }
  }
  auto o = compile.find("optimizer");
  auto optimizer =
      OptimizerConfigFromKeras(o == compile.end() || o->is_null() ? json("rmsprop") : *o);
  if (!optimizer.ok()) {
    return Bad(absl::StrCat("compile.optimizer: ", optimizer.status().message()));
  }
  spec->optimizer = *optimizer;
  auto l = compile.find("loss");
  if (l == compile.end() || l->is_null()) return Bad("missing \"compile.loss\"");
  auto loss = LossConfigFromKeras(*l);
  if (!loss.ok()) return Bad(absl::StrCat("compile.loss: ", loss.status().message()));
  spec->loss = *loss;
  absl::Status fits = model->SetLoss(spec->loss);
  if (!fits.ok()) return Bad(absl::StrCat("compile.loss: ", fits.message()));
  return ReadMetrics(compile, spec);
}

// The "fit" section: epochs, batch_size, steps_per_epoch, shuffle (verbose accepted).
absl::Status ReadFitSection(const json& root, JobSpec* spec) {
  json fit = json::object();
  auto f = root.find("fit");
  if (f != root.end() && !f->is_null()) {
    if (!f->is_object()) return Bad("\"fit\" must be an object");
    fit = *f;
  }
  for (auto it = fit.begin(); it != fit.end(); ++it) {
    const std::string& k = it.key();
    if (k != "epochs" && k != "batch_size" && k != "steps_per_epoch" && k != "shuffle" &&
        k != "verbose") {
      return Bad(absl::StrCat("unknown key fit.", k));
    }
  }
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  int64_t v;
  PS_ASSIGN_OR_RETURN(v, GetInt(fit, "fit.", "epochs", 1, 1, kIntMax));
  spec->epochs = static_cast<int>(v);
  PS_ASSIGN_OR_RETURN(v, GetInt(fit, "fit.", "batch_size", 32, 1, kIntMax));
  spec->batch_size = static_cast<int>(v);
  PS_ASSIGN_OR_RETURN(spec->steps_per_epoch,
                      GetInt(fit, "fit.", "steps_per_epoch", 0, 0,
                             std::numeric_limits<int64_t>::max()));
  auto sh = fit.find("shuffle");
  if (sh != fit.end() && !sh->is_null()) {
    if (!sh->is_boolean()) {
      return Bad(absl::StrCat("fit.shuffle must be a bool, got ", sh->dump()));
    }
    spec->shuffle = sh->get<bool>();
  }
  return absl::OkStatus();
}

// seed, strategy, nonfinite, wire_dtype, one_hot_labels, scale_learning_rate and overlap.
absl::Status ReadJobOptions(const json& root, JobSpec* spec) {
  auto seed = root.find("seed");
  if (seed != root.end() && !seed->is_null()) {
    if (!seed->is_number_integer() || (!seed->is_number_unsigned() && seed->get<int64_t>() < 0)) {
      return Bad(absl::StrCat("seed must be a non-negative integer, got ", seed->dump()));
    }
    spec->seed = seed->get<uint64_t>();
  }
  auto strategy = root.find("strategy");
  if (strategy != root.end() && !strategy->is_null()) {
    if (!strategy->is_string()) {
      return Bad(absl::StrCat("strategy must be a string, got ", strategy->dump()));
    }
    // "" leaves the choice to the caller, as a missing key does.
    const std::string name = strategy->get<std::string>();
    if (!name.empty()) {
      absl::StatusOr<StrategyKind> kind = ParseStrategyKind(name);
      if (!kind.ok()) return Bad(std::string(kind.status().message()));
      spec->strategy = *kind;
    }
  }
  auto nonfinite = root.find("nonfinite");
  if (nonfinite != root.end() && !nonfinite->is_null()) {
    const std::string policy = nonfinite->is_string() ? nonfinite->get<std::string>() : "";
    if (policy == "error") {
      spec->optimizer.set_nonfinite(NONFINITE_REFUSE);
    } else if (policy == "skip") {
      spec->optimizer.set_nonfinite(NONFINITE_SKIP);
    } else {
      return Bad(absl::StrCat("nonfinite ", nonfinite->dump(),
                              " is unknown (want \"error\", the default, or \"skip\")"));
    }
  }
  auto wire = root.find("wire_dtype");
  if (wire != root.end() && !wire->is_null()) {
    if (!wire->is_string()) {
      return Bad(absl::StrCat("wire_dtype must be a string, got ", wire->dump().substr(0, 64)));
    }
    absl::StatusOr<WirePrecision> precision = ParseWirePrecision(wire->get<std::string>());
    if (!precision.ok()) return Bad(std::string(precision.status().message()));
    spec->wire_precision = *precision;
  }
  for (auto [key, field] :
       {std::pair<const char*, bool*>{"one_hot_labels", &spec->one_hot_labels},
        {"scale_learning_rate", &spec->scale_learning_rate},
        {"overlap", &spec->overlap}}) {
    auto it = root.find(key);
    if (it == root.end() || it->is_null()) continue;
    if (!it->is_boolean()) return Bad(absl::StrCat(key, " must be true or false, got ", it->dump()));
    *field = it->get<bool>();
  }
  return absl::OkStatus();
}

// The parameter-server settings: "consistency" and "placement".
absl::Status ReadParameterServerSettings(const json& root, JobSpec* spec) {
  auto it = root.find("consistency");
  auto consistency = ConsistencyConfigFromJson(it == root.end() ? json() : *it);
  if (!consistency.ok()) return Bad(std::string(consistency.status().message()));
  spec->consistency = *std::move(consistency);
  // An overlapped step is computed on values one of the worker's own pushes behind.
  if (spec->overlap && spec->consistency.mode() == CONSISTENCY_SYNC) {
    return Bad("overlap is refused with \"sync\" consistency, which must stay exact "
               "(each step computed at the versions it aggregates)");
  }
  if (spec->overlap && spec->consistency.mode() == CONSISTENCY_BOUNDED_STALENESS &&
      spec->consistency.staleness() < 1) {
    return Bad(absl::StrCat("overlap needs staleness >= 1 (an overlapped step is one of the "
                            "worker's own pushes behind), got bounded_staleness with "
                            "staleness ",
                            spec->consistency.staleness()));
  }
  it = root.find("placement");
  auto placement = PlacementPolicyFromJson(it == root.end() ? json() : *it);
  if (!placement.ok()) return Bad(std::string(placement.status().message()));
  spec->placement = *placement;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<JobSpec> ParseJobSpec(const std::string& json_text, const std::string& base_dir) {
  return ParseJobSpec(json_text, base_dir, ParseJobSpecOptions());
}

absl::StatusOr<JobSpec> ParseJobSpec(const std::string& json_text, const std::string& base_dir,
                                     const ParseJobSpecOptions& options) {
  json root = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return Bad("malformed JSON");
  if (!root.is_object()) return Bad("top level must be an object");
  JobSpec spec;
  json keras_compile;  // a .keras file's compile_config
  PS_ASSIGN_OR_RETURN(std::unique_ptr<Model> model,
                      ReadModelSection(root, base_dir, &spec, &keras_compile,
                                       options.read_initial_weights));
  PS_RETURN_IF_ERROR(ReadCompileSection(root, keras_compile, model.get(), &spec));
  PS_RETURN_IF_ERROR(ReadFitSection(root, &spec));
  PS_RETURN_IF_ERROR(ReadJobOptions(root, &spec));
  PS_RETURN_IF_ERROR(ReadParameterServerSettings(root, &spec));
  auto data = root.find("data");
  if (data != root.end()) *spec.data = *data;
  *spec.raw = root;
  (*spec.raw)["model"] = *spec.model;
  return spec;
}

std::string SerializeJobSpec(const JobSpec& spec) {
  json out = spec.raw->is_object() ? *spec.raw : json::object();
  out["model"] = *spec.model;
  out["compile"] = json{{"optimizer", OptimizerConfigToKeras(spec.optimizer)},
                        {"loss", LossConfigToKeras(spec.loss)},
                        {"metrics", spec.metrics}};
  out["fit"] = json{{"epochs", spec.epochs},
                    {"batch_size", spec.batch_size},
                    {"steps_per_epoch", spec.steps_per_epoch},
                    {"shuffle", spec.shuffle}};
  out["seed"] = spec.seed;
  if (spec.strategy.has_value()) out["strategy"] = std::string(StrategyKindName(*spec.strategy));
  out["consistency"] = ConsistencyConfigToJson(spec.consistency);
  out["placement"] = PlacementPolicyToJson(spec.placement);
  if (spec.wire_precision != WirePrecision::kFloat32) {
    out["wire_dtype"] = std::string(WirePrecisionName(spec.wire_precision));
  }
  if (spec.data->is_null()) {
    out.erase("data");
  } else {
    out["data"] = *spec.data;
  }
  return out.dump();
}

std::string DescribeGlobalBatch(int batch_size, int replicas) {
  // Replica r takes rows [b*r/R, b*(r+1)/R) of each global batch (distribute/distributed_dataset.cc).
  const int smallest = batch_size / replicas;
  const int largest = (batch_size + replicas - 1) / replicas;
  return absl::StrCat("global batch ", batch_size, " (",
                      smallest == largest ? absl::StrCat(smallest)
                                          : absl::StrCat(smallest, "-", largest),
                      " per replica x ", replicas, ")");
}

std::string DescribePerWorkerBatch(int batch_size, int workers) {
  return absl::StrCat("batch ", batch_size, " per worker (",
                      static_cast<int64_t>(batch_size) * workers, " per round of ", workers,
                      workers == 1 ? " worker)" : " workers)");
}

}  // namespace pstrain
