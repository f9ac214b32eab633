#include "common/data/data_spec.h"

#include <sys/stat.h>

#include <cmath>
#include <limits>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/data/csv_reader.h"
#include "common/data/idx_reader.h"
#include "common/data/npy_reader.h"
#include "common/data/synthetic.h"
#include "common/data/zipf_ids.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

using Json = nlohmann::json;

absl::Status Bad(absl::string_view type, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("data source \"", type, "\": ", message));
}

// Rejects keys outside `allowed` so a typo ("sample") fails loudly.
absl::Status CheckKeys(const Json& source, absl::string_view type,
                       const std::set<std::string>& allowed) {
  for (auto it = source.begin(); it != source.end(); ++it) {
    if (allowed.count(it.key()) == 0) {
      return Bad(type, absl::StrCat("unknown field \"", it.key(),
                                    "\" (allowed: ", absl::StrJoin(allowed, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> GetInt(const Json& source, absl::string_view type, const char* key,
                               int64_t fallback) {
  auto it = source.find(key);
  if (it == source.end()) return fallback;
  if (it->is_number_unsigned()) {
    const uint64_t v = it->get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Bad(type, absl::StrCat("\"", key, "\" is too large"));
    }
    return static_cast<int64_t>(v);
  }
  if (it->is_number_integer()) return it->get<int64_t>();
  return Bad(type, absl::StrCat("\"", key, "\" must be an integer, not ", it->type_name()));
}

absl::StatusOr<float> GetFloat(const Json& source, absl::string_view type, const char* key,
                               float fallback) {
  auto it = source.find(key);
  if (it == source.end()) return fallback;
  if (!it->is_number()) {
    return Bad(type, absl::StrCat("\"", key, "\" must be a number, not ", it->type_name()));
  }
  const double v = it->get<double>();
  if (!std::isfinite(v)) return Bad(type, absl::StrCat("\"", key, "\" must be finite"));
  return static_cast<float>(v);
}

absl::StatusOr<bool> GetBool(const Json& source, absl::string_view type, const char* key,
                             bool fallback) {
  auto it = source.find(key);
  if (it == source.end()) return fallback;
  if (!it->is_boolean()) {
    return Bad(type, absl::StrCat("\"", key, "\" must be true or false, not ", it->type_name()));
  }
  return it->get<bool>();
}

// A string field; required when `fallback` is null.
absl::StatusOr<std::string> GetString(const Json& source, absl::string_view type, const char* key,
                                      const char* fallback) {
  auto it = source.find(key);
  if (it == source.end()) {
    if (fallback == nullptr) return Bad(type, absl::StrCat("missing \"", key, "\""));
    return std::string(fallback);
  }
  if (!it->is_string()) {
    return Bad(type, absl::StrCat("\"", key, "\" must be a string, not ", it->type_name()));
  }
  return it->get<std::string>();
}

std::string Resolve(const std::string& path, const std::string& base_dir) {
  if (path.empty() || path.front() == '/' || base_dir.empty()) return path;
  return base_dir.back() == '/' ? base_dir + path : base_dir + "/" + path;
}

absl::StatusOr<Dataset> LoadSynthetic(const Json& source) {
  constexpr absl::string_view kType = "synthetic";
  PS_RETURN_IF_ERROR(CheckKeys(source, kType, {"type", "samples", "features", "classes", "seed"}));
  SyntheticOptions options;
  PS_ASSIGN_OR_RETURN(options.samples, GetInt(source, kType, "samples", options.samples));
  PS_ASSIGN_OR_RETURN(options.features, GetInt(source, kType, "features", options.features));
  PS_ASSIGN_OR_RETURN(options.classes, GetInt(source, kType, "classes", options.classes));
  PS_ASSIGN_OR_RETURN(int64_t seed, GetInt(source, kType, "seed", 0));
  if (seed < 0) return Bad(kType, "\"seed\" must be >= 0");
  options.seed = static_cast<uint64_t>(seed);
  absl::StatusOr<Dataset> data = MakeSyntheticDataset(options);
  if (!data.ok()) return Bad(kType, data.status().message());
  return data;
}

absl::StatusOr<Dataset> LoadZipfIds(const Json& source) {
  constexpr absl::string_view kType = "zipf_ids";
  PS_RETURN_IF_ERROR(CheckKeys(source, kType,
                               {"type", "samples", "ids_per_example", "vocabulary", "classes",
                                "exponent", "noise", "seed", "stream"}));
  ZipfIdsOptions o;
  PS_ASSIGN_OR_RETURN(o.samples, GetInt(source, kType, "samples", o.samples));
  PS_ASSIGN_OR_RETURN(o.ids_per_example,
                      GetInt(source, kType, "ids_per_example", o.ids_per_example));
  PS_ASSIGN_OR_RETURN(o.vocabulary, GetInt(source, kType, "vocabulary", o.vocabulary));
  PS_ASSIGN_OR_RETURN(o.classes, GetInt(source, kType, "classes", o.classes));
  PS_ASSIGN_OR_RETURN(float exponent, GetFloat(source, kType, "exponent", 1.1f));
  PS_ASSIGN_OR_RETURN(float noise, GetFloat(source, kType, "noise", 0.3f));
  o.exponent = exponent;
  o.noise = noise;
  PS_ASSIGN_OR_RETURN(int64_t seed, GetInt(source, kType, "seed", 0));
  PS_ASSIGN_OR_RETURN(int64_t stream, GetInt(source, kType, "stream", 0));
  if (seed < 0 || stream < 0) return Bad(kType, "\"seed\" and \"stream\" must be >= 0");
  o.seed = static_cast<uint64_t>(seed);
  o.stream = static_cast<uint64_t>(stream);
  absl::StatusOr<Dataset> data = MakeZipfIdsDataset(o);
  if (!data.ok()) return Bad(kType, data.status().message());
  return data;
}

absl::StatusOr<Dataset> LoadIdx(const Json& source, const std::string& base_dir) {
  constexpr absl::string_view kType = "idx";
  PS_RETURN_IF_ERROR(CheckKeys(source, kType, {"type", "images", "labels", "scale"}));
  PS_ASSIGN_OR_RETURN(std::string images, GetString(source, kType, "images", nullptr));
  PS_ASSIGN_OR_RETURN(std::string labels, GetString(source, kType, "labels", nullptr));
  PS_ASSIGN_OR_RETURN(float scale, GetFloat(source, kType, "scale", 1.0f));
  return ReadIdxDataset(Resolve(images, base_dir), Resolve(labels, base_dir), scale);
}

absl::StatusOr<Dataset> LoadFashionMnist(const Json& source) {
  constexpr absl::string_view kType = "fashion_mnist";
  PS_RETURN_IF_ERROR(CheckKeys(source, kType, {"type", "split", "scale", "dir"}));
  PS_ASSIGN_OR_RETURN(std::string split, GetString(source, kType, "split", nullptr));
  PS_ASSIGN_OR_RETURN(float scale, GetFloat(source, kType, "scale", 1.0f / 255.0f));
  PS_ASSIGN_OR_RETURN(std::string dir, GetString(source, kType, "dir", kFashionMnistDir));
  std::string prefix;
  if (split == "train") {
    prefix = "train";
  } else if (split == "test") {
    prefix = "t10k";
  } else {
    return Bad(kType, absl::StrCat("\"split\" must be \"train\" or \"test\", not \"", split, "\""));
  }
  const std::string images = absl::StrCat(dir, "/", prefix, "-images-idx3-ubyte.gz");
  const std::string labels = absl::StrCat(dir, "/", prefix, "-labels-idx1-ubyte.gz");
  for (const std::string& path : {images, labels}) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) {
      return absl::NotFoundError(absl::StrCat("Fashion-MNIST file ", path,
                                              " is missing: install the Debian package "
                                              "dataset-fashion-mnist"));
    }
  }
  return ReadIdxDataset(images, labels, scale);
}

absl::StatusOr<Dataset> LoadCsv(const Json& source, const std::string& base_dir) {
  constexpr absl::string_view kType = "csv";
  PS_RETURN_IF_ERROR(CheckKeys(
      source, kType, {"type", "path", "label_column", "header", "delimiter", "scale", "classes"}));
  CsvOptions options;
  PS_ASSIGN_OR_RETURN(std::string path, GetString(source, kType, "path", nullptr));
  PS_ASSIGN_OR_RETURN(options.label_column,
                      GetInt(source, kType, "label_column", options.label_column));
  PS_ASSIGN_OR_RETURN(options.header, GetBool(source, kType, "header", options.header));
  PS_ASSIGN_OR_RETURN(std::string delimiter, GetString(source, kType, "delimiter", ","));
  if (delimiter.size() != 1) return Bad(kType, "\"delimiter\" must be one character");
  options.delimiter = delimiter[0];
  PS_ASSIGN_OR_RETURN(options.scale, GetFloat(source, kType, "scale", options.scale));
  PS_ASSIGN_OR_RETURN(options.num_classes, GetInt(source, kType, "classes", 0));
  if (options.num_classes < 0) return Bad(kType, "\"classes\" must be >= 0");
  return ReadCsvDataset(Resolve(path, base_dir), options);
}

absl::StatusOr<Dataset> LoadNpy(const Json& source, const std::string& base_dir) {
  constexpr absl::string_view kType = "npy";
  PS_RETURN_IF_ERROR(CheckKeys(source, kType, {"type", "x", "y", "scale", "classes"}));
  PS_ASSIGN_OR_RETURN(std::string x, GetString(source, kType, "x", nullptr));
  PS_ASSIGN_OR_RETURN(std::string y, GetString(source, kType, "y", nullptr));
  PS_ASSIGN_OR_RETURN(float scale, GetFloat(source, kType, "scale", 1.0f));
  PS_ASSIGN_OR_RETURN(int64_t classes, GetInt(source, kType, "classes", 0));
  if (classes < 0) return Bad(kType, "\"classes\" must be >= 0");
  return ReadNpyDataset(Resolve(x, base_dir), Resolve(y, base_dir), scale, classes);
}

}  // namespace

absl::StatusOr<Dataset> LoadDataset(const nlohmann::json& source, const std::string& base_dir) {
  if (!source.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("data source must be a JSON object, not ", source.type_name()));
  }
  auto type_it = source.find("type");
  if (type_it == source.end() || !type_it->is_string()) {
    return absl::InvalidArgumentError("data source needs a string \"type\"");
  }
  const std::string& type = type_it->get_ref<const std::string&>();
  if (type == "synthetic") return LoadSynthetic(source);
  if (type == "idx") return LoadIdx(source, base_dir);
  if (type == "fashion_mnist") return LoadFashionMnist(source);
  if (type == "csv") return LoadCsv(source, base_dir);
  if (type == "npy") return LoadNpy(source, base_dir);
  if (type == "zipf_ids") return LoadZipfIds(source);
  return absl::InvalidArgumentError(
      absl::StrCat("unknown data source type \"", type,
                   "\" (want synthetic, zipf_ids, idx, fashion_mnist, csv or npy)"));
}

absl::StatusOr<Dataset> LoadJobDataset(const nlohmann::json& source, const std::string& base_dir,
                                       const std::string& what, bool one_hot) {
  absl::StatusOr<Dataset> loaded = LoadDataset(source, base_dir);
  if (loaded.ok() && one_hot) loaded = loaded->OneHot();
  if (!loaded.ok()) {
    return absl::Status(loaded.status().code(), absl::StrCat(what, ": ", loaded.status().message()));
  }
  return loaded;
}

}  // namespace pstrain
