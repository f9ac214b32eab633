#include "common/checkpoint/keras_weights_h5.h"

#include <hdf5/serial/hdf5.h>

#include <regex>
#include <set>
#include <utility>

#include "absl/base/const_init.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"

namespace pstrain {
namespace {

// Debian's libhdf5 is not built thread-safe: one caller at a time.
ABSL_CONST_INIT absl::Mutex hdf5_mu(absl::kConstInit);

// Closes an HDF5 identifier on scope exit (groups, datasets, dataspaces, lists, files).
class Hid {
 public:
  Hid(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Hid() {
    if (id_ >= 0) close_(id_);
  }
  Hid(const Hid&) = delete;
  Hid& operator=(const Hid&) = delete;
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

absl::Status Hdf5Error(const std::string& call, const std::string& path) {
  return absl::InternalError(absl::StrCat("HDF5 ", call, " failed for \"", path, "\""));
}

absl::Status CheckObjects(absl::Span<const KerasSaveableWeights> objects) {
  std::set<std::string> seen;
  for (const KerasSaveableWeights& object : objects) {
    if (!seen.insert(object.path).second) {
      return absl::InvalidArgumentError(absl::StrCat("repeated path \"", object.path, "\""));
    }
    if (!object.path.empty()) {
      for (absl::string_view part : absl::StrSplit(object.path, '/')) {
        if (part.empty()) {
          return absl::InvalidArgumentError(
              absl::StrCat("path \"", object.path, "\" has an empty component"));
        }
      }
    }
    for (size_t i = 0; i < object.variables.size(); ++i) {
      const Tensor* t = object.variables[i];
      int64_t elements = 1;
      if (t != nullptr) {
        for (int64_t d : t->shape()) elements = d < 0 ? -1 : elements * d;
      }
      if (t == nullptr || elements != t->num_elements()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "variable ", i, " of \"", object.path, "\" is not a complete tensor"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status WriteDataset(hid_t group, const std::string& name, const Tensor& tensor,
                          const std::string& path) {
  const std::vector<hsize_t> dims(tensor.shape().begin(), tensor.shape().end());
  Hid space(dims.empty() ? H5Screate(H5S_SCALAR)
                         : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
            H5Sclose);
  if (!space.ok()) return Hdf5Error("H5Screate", path);
  Hid dataset(H5Dcreate2(group, name.c_str(), H5T_IEEE_F32LE, space.get(), H5P_DEFAULT,
                         H5P_DEFAULT, H5P_DEFAULT),
              H5Dclose);
  if (!dataset.ok()) return Hdf5Error("H5Dcreate2", path);
  if (tensor.num_elements() > 0 &&
      H5Dwrite(dataset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT,
               tensor.data()) < 0) {
    return Hdf5Error("H5Dwrite", path);
  }
  return absl::OkStatus();
}

// Creates "<path>/vars" (intermediate groups too) and its datasets "0", "1", ...
absl::Status WriteObject(hid_t file, hid_t make_parents, const KerasSaveableWeights& object) {
  const std::string vars = object.path.empty() ? "vars" : absl::StrCat(object.path, "/vars");
  Hid group(H5Gcreate2(file, vars.c_str(), make_parents, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  if (!group.ok()) return Hdf5Error("H5Gcreate2", vars);
  for (size_t i = 0; i < object.variables.size(); ++i) {
    const std::string name = absl::StrCat(i);
    PS_RETURN_IF_ERROR(
        WriteDataset(group.get(), name, *object.variables[i], absl::StrCat(vars, "/", name)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> WriteKerasWeightsH5(absl::Span<const KerasSaveableWeights> objects) {
  PS_RETURN_IF_ERROR(CheckObjects(objects));
  absl::MutexLock lock(&hdf5_mu);
  // Errors come back as statuses; the library's own stack printing would only add noise.
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  Hid access(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (!access.ok()) return Hdf5Error("H5Pcreate", "file access");
  // In memory, growing 1 MiB at a time, never written to disk.
  if (H5Pset_fapl_core(access.get(), size_t{1} << 20, /*backing_store=*/0) < 0) {
    return Hdf5Error("H5Pset_fapl_core", "model.weights.h5");
  }
  Hid make_parents(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  if (!make_parents.ok() || H5Pset_create_intermediate_group(make_parents.get(), 1) < 0) {
    return Hdf5Error("H5Pset_create_intermediate_group", "link creation");
  }
  Hid file(H5Fcreate("model.weights.h5", H5F_ACC_TRUNC, H5P_DEFAULT, access.get()), H5Fclose);
  if (!file.ok()) return Hdf5Error("H5Fcreate", "model.weights.h5");

  bool has_root = false;
  for (const KerasSaveableWeights& object : objects) has_root |= object.path.empty();
  if (!has_root) PS_RETURN_IF_ERROR(WriteObject(file.get(), make_parents.get(), {"", {}}));
  for (const KerasSaveableWeights& object : objects) {
    PS_RETURN_IF_ERROR(WriteObject(file.get(), make_parents.get(), object));
  }
  if (H5Fflush(file.get(), H5F_SCOPE_GLOBAL) < 0) return Hdf5Error("H5Fflush", "model.weights.h5");
  const ssize_t size = H5Fget_file_image(file.get(), nullptr, 0);
  if (size <= 0) return Hdf5Error("H5Fget_file_image", "model.weights.h5");
  std::string image(static_cast<size_t>(size), '\0');
  if (H5Fget_file_image(file.get(), image.data(), image.size()) != size) {
    return Hdf5Error("H5Fget_file_image", "model.weights.h5");
  }
  return image;
}

namespace {

absl::Status BadWeights(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("model.weights.h5: ", what));
}

bool LinkExists(hid_t location, const std::string& path) {
  // H5Lexists needs every parent to exist: check one component at a time.
  std::string prefix;
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    prefix = prefix.empty() ? std::string(part) : absl::StrCat(prefix, "/", part);
    if (H5Lexists(location, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
  }
  return true;
}

absl::StatusOr<Tensor> ReadDataset(hid_t file, const std::string& name,
                                   const std::vector<int64_t>& shape) {
  if (!LinkExists(file, name)) return BadWeights(absl::StrCat("no dataset ", name));
  Hid dataset(H5Dopen2(file, name.c_str(), H5P_DEFAULT), H5Dclose);
  if (!dataset.ok()) return BadWeights(absl::StrCat(name, " is not a dataset"));
  Hid type(H5Dget_type(dataset.get()), H5Tclose);
  const H5T_class_t type_class = type.ok() ? H5Tget_class(type.get()) : H5T_NO_CLASS;
  if (type_class != H5T_FLOAT && type_class != H5T_INTEGER) {
    return BadWeights(absl::StrCat(name, " holds neither floats nor integers"));
  }
  Hid space(H5Dget_space(dataset.get()), H5Sclose);
  const int rank = space.ok() ? H5Sget_simple_extent_ndims(space.get()) : -1;
  if (rank < 0 || rank > 32) return BadWeights(absl::StrCat(name, " has no simple shape"));
  std::vector<hsize_t> dims(rank);
  if (rank > 0 && H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) != rank) {
    return BadWeights(absl::StrCat(name, " has no simple shape"));
  }
  const std::vector<int64_t> found(dims.begin(), dims.end());
  if (found != shape) {
    return BadWeights(absl::StrCat(name, " has shape [", absl::StrJoin(found, ","),
                                   "], the model's variable is [", absl::StrJoin(shape, ","),
                                   "]"));
  }
  Tensor tensor(shape);
  if (tensor.num_elements() > 0 &&
      H5Dread(dataset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, tensor.data()) < 0) {
    return BadWeights(absl::StrCat(name, " cannot be read"));
  }
  return tensor;
}

}  // namespace

absl::StatusOr<std::vector<std::vector<Tensor>>> ReadKerasWeightsH5(
    const std::string& image, absl::Span<const KerasSaveableShapes> objects) {
  absl::MutexLock lock(&hdf5_mu);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  if (image.size() < 8 || image.compare(0, 8, std::string("\x89HDF\r\n\x1a\n", 8)) != 0) {
    return BadWeights("not an HDF5 file");
  }
  Hid access(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (!access.ok() || H5Pset_fapl_core(access.get(), size_t{1} << 20, 0) < 0 ||
      H5Pset_file_image(access.get(), const_cast<char*>(image.data()), image.size()) < 0) {
    return Hdf5Error("H5Pset_file_image", "model.weights.h5");
  }
  Hid file(H5Fopen("model.weights.h5", H5F_ACC_RDONLY, access.get()), H5Fclose);
  if (!file.ok()) return BadWeights("not a readable HDF5 file");
  std::vector<std::vector<Tensor>> out;
  for (const KerasSaveableShapes& object : objects) {
    const std::string vars = object.path.empty() ? "vars" : absl::StrCat(object.path, "/vars");
    std::vector<Tensor> tensors;
    for (size_t i = 0; i < object.shapes.size(); ++i) {
      PS_ASSIGN_OR_RETURN(Tensor t,
                          ReadDataset(file.get(), absl::StrCat(vars, "/", i), object.shapes[i]));
      tensors.push_back(std::move(t));
    }
    const std::string extra = absl::StrCat(vars, "/", object.shapes.size());
    if (LinkExists(file.get(), extra)) {
      return BadWeights(absl::StrCat(extra, " is one more variable than the model's ",
                                     object.shapes.size(), " for ", object.path));
    }
    out.push_back(std::move(tensors));
  }
  return out;
}

std::string KerasSnakeCase(const std::string& class_name) {
  // keras/src/utils/naming.py to_snake_case, regex for regex.
  static const std::regex* const kNonWord = new std::regex(R"(\W+)");
  static const std::regex* const kWordStart = new std::regex("(.)([A-Z][a-z]+)");
  static const std::regex* const kLowerUpper = new std::regex("([a-z])([A-Z])");
  std::string name = std::regex_replace(class_name, *kNonWord, "");
  name = std::regex_replace(name, *kWordStart, "$1_$2");
  name = std::regex_replace(name, *kLowerUpper, "$1_$2");
  return absl::AsciiStrToLower(name);
}

}  // namespace pstrain
