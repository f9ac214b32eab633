#include "common/checkpoint/keras_weights_h5.h"

#include <fcntl.h>
#include <hdf5/serial/hdf5.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <regex>
#include <set>
#include <utility>

#include "absl/base/const_init.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
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

// Object paths as the writers take them: distinct, no empty component.
absl::Status CheckPath(const std::string& path, std::set<std::string>* seen) {
  if (!seen->insert(path).second) {
    return absl::InvalidArgumentError(absl::StrCat("repeated path \"", path, "\""));
  }
  if (!path.empty()) {
    for (absl::string_view part : absl::StrSplit(path, '/')) {
      if (part.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("path \"", path, "\" has an empty component"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckObjects(absl::Span<const KerasSaveableWeights> objects) {
  std::set<std::string> seen;
  for (const KerasSaveableWeights& object : objects) {
    PS_RETURN_IF_ERROR(CheckPath(object.path, &seen));
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

// How many rows of a variable of `shape` the weights files are read or written by at a
// time: about 16 MiB of floats (at least one row).
int64_t RowsPerBlock(const std::vector<int64_t>& shape) {
  const int64_t row = shape.size() <= 1 ? 1 : NumElements(absl::MakeConstSpan(shape).subspan(1));
  return std::max<int64_t>(1, (int64_t{16} << 20) / static_cast<int64_t>(sizeof(float)) /
                                  std::max<int64_t>(row, 1));
}

// Dataset `name` of `group`, float32 little-endian in `shape`, its values from variable
// `index` of `rows`, a block of rows at a time (a hyperslab of the file's dataspace).
absl::Status WriteDataset(hid_t group, const std::string& name, const std::vector<int64_t>& shape,
                          const KerasRowsSource& rows, size_t index, const std::string& path) {
  const std::vector<hsize_t> dims(shape.begin(), shape.end());
  Hid space(dims.empty() ? H5Screate(H5S_SCALAR)
                         : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
            H5Sclose);
  if (!space.ok()) return Hdf5Error("H5Screate", path);
  Hid dataset(H5Dcreate2(group, name.c_str(), H5T_IEEE_F32LE, space.get(), H5P_DEFAULT,
                         H5P_DEFAULT, H5P_DEFAULT),
              H5Dclose);
  if (!dataset.ok()) return Hdf5Error("H5Dcreate2", path);
  if (shape.empty()) {
    float value = 0;
    PS_RETURN_IF_ERROR(rows(index, 0, 1, &value));
    if (H5Dwrite(dataset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, &value) < 0) {
      return Hdf5Error("H5Dwrite", path);
    }
    return absl::OkStatus();
  }
  if (NumElements(shape) == 0) return absl::OkStatus();
  const int64_t per_block = RowsPerBlock(shape);
  const int64_t row_elements = NumElements(absl::MakeConstSpan(shape).subspan(1));
  std::vector<float> block(static_cast<size_t>(std::min(per_block, shape[0]) * row_elements));
  for (int64_t row = 0; row < shape[0]; row += per_block) {
    const int64_t n = std::min(per_block, shape[0] - row);
    PS_RETURN_IF_ERROR(rows(index, row, row + n, block.data()));
    std::vector<hsize_t> start(dims.size(), 0), count = dims;
    start[0] = static_cast<hsize_t>(row);
    count[0] = static_cast<hsize_t>(n);
    Hid memory_space(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr),
                     H5Sclose);
    if (!memory_space.ok() ||
        H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(),
                            nullptr) < 0 ||
        H5Dwrite(dataset.get(), H5T_NATIVE_FLOAT, memory_space.get(), space.get(), H5P_DEFAULT,
                 block.data()) < 0) {
      return Hdf5Error("H5Dwrite", path);
    }
  }
  return absl::OkStatus();
}

// Creates "<path>/vars" (intermediate groups too) and its datasets "0", "1", ..., whose
// values are variables *index, *index + 1, ... of `rows`.
absl::Status WriteObject(hid_t file, hid_t make_parents, const KerasSaveableShapes& object,
                         const KerasRowsSource& rows, size_t* index) {
  const std::string vars = object.path.empty() ? "vars" : absl::StrCat(object.path, "/vars");
  Hid group(H5Gcreate2(file, vars.c_str(), make_parents, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  if (!group.ok()) return Hdf5Error("H5Gcreate2", vars);
  for (size_t i = 0; i < object.shapes.size(); ++i) {
    const std::string name = absl::StrCat(i);
    PS_RETURN_IF_ERROR(WriteDataset(group.get(), name, object.shapes[i], rows, (*index)++,
                                    absl::StrCat(vars, "/", name)));
  }
  return absl::OkStatus();
}

// The root "vars" group (always), then every object's group in order.
absl::Status WriteWeights(hid_t file, absl::Span<const KerasSaveableShapes> objects,
                          const KerasRowsSource& rows) {
  Hid make_parents(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  if (!make_parents.ok() || H5Pset_create_intermediate_group(make_parents.get(), 1) < 0) {
    return Hdf5Error("H5Pset_create_intermediate_group", "link creation");
  }
  size_t index = 0;
  bool has_root = false;
  for (const KerasSaveableShapes& object : objects) has_root |= object.path.empty();
  if (!has_root) PS_RETURN_IF_ERROR(WriteObject(file, make_parents.get(), {"", {}}, rows, &index));
  for (const KerasSaveableShapes& object : objects) {
    PS_RETURN_IF_ERROR(WriteObject(file, make_parents.get(), object, rows, &index));
  }
  if (H5Fflush(file, H5F_SCOPE_GLOBAL) < 0) return Hdf5Error("H5Fflush", "model.weights.h5");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> WriteKerasWeightsH5(absl::Span<const KerasSaveableWeights> objects) {
  PS_RETURN_IF_ERROR(CheckObjects(objects));
  std::vector<KerasSaveableShapes> shapes;
  std::vector<const Tensor*> tensors;  // in the order WriteWeights asks for them
  for (const KerasSaveableWeights& object : objects) {
    shapes.push_back({object.path, {}});
    for (const Tensor* t : object.variables) {
      shapes.back().shapes.push_back(t->shape());
      tensors.push_back(t);
    }
  }
  const KerasRowsSource copy = [&tensors](size_t index, int64_t row_begin, int64_t row_end,
                                          float* out) {
    const Tensor& t = *tensors[index];
    const int64_t row = t.shape().size() <= 1
                            ? 1
                            : NumElements(absl::MakeConstSpan(t.shape()).subspan(1));
    std::copy(t.data() + row_begin * row, t.data() + row_end * row, out);
    return absl::OkStatus();
  };
  absl::MutexLock lock(&hdf5_mu);
  // Errors come back as statuses; the library's own stack printing would only add noise.
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  Hid access(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (!access.ok()) return Hdf5Error("H5Pcreate", "file access");
  // In memory, growing 1 MiB at a time, never written to disk.
  if (H5Pset_fapl_core(access.get(), size_t{1} << 20, /*backing_store=*/0) < 0) {
    return Hdf5Error("H5Pset_fapl_core", "model.weights.h5");
  }
  Hid file(H5Fcreate("model.weights.h5", H5F_ACC_TRUNC, H5P_DEFAULT, access.get()), H5Fclose);
  if (!file.ok()) return Hdf5Error("H5Fcreate", "model.weights.h5");
  PS_RETURN_IF_ERROR(WriteWeights(file.get(), shapes, copy));
  const ssize_t size = H5Fget_file_image(file.get(), nullptr, 0);
  if (size <= 0) return Hdf5Error("H5Fget_file_image", "model.weights.h5");
  std::string image(static_cast<size_t>(size), '\0');
  if (H5Fget_file_image(file.get(), image.data(), image.size()) != size) {
    return Hdf5Error("H5Fget_file_image", "model.weights.h5");
  }
  return image;
}

absl::Status WriteKerasWeightsH5File(const std::string& path,
                                     absl::Span<const KerasSaveableShapes> objects,
                                     const KerasRowsSource& rows) {
  std::set<std::string> seen;
  for (const KerasSaveableShapes& object : objects) {
    PS_RETURN_IF_ERROR(CheckPath(object.path, &seen));
    for (const std::vector<int64_t>& shape : object.shapes) {
      absl::StatusOr<int64_t> elements = CheckedNumElements(shape);
      if (!elements.ok() || shape.size() > 32) {
        return absl::InvalidArgumentError(absl::StrCat(
            "a variable of \"", object.path, "\" has shape ", ShapeToString(shape),
            ", not a tensor shape"));
      }
    }
  }
  absl::MutexLock lock(&hdf5_mu);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (file < 0) return Hdf5Error("H5Fcreate", path);
  absl::Status written = WriteWeights(file, objects, rows);
  // Closing writes what the library still holds: its failure is the file's.
  if (H5Fclose(file) < 0 && written.ok()) written = Hdf5Error("H5Fclose", path);
  return written;
}

namespace {

// Reading a file that came from outside: why a child process.
//
// Debian's libhdf5 (1.10.8) trusts the bytes it decodes. On corrupt files
// tests/fuzz/keras_file_fuzzer made it write through a NULL pointer (H5Lexists ->
// H5G__stab_lookup -> H5HL_protect -> H5F__accum_read: a local heap whose size no malloc
// can give; corpus/keras_file_fuzzer/null_local_heap_*.bin), lose object headers, and
// allocate 1.6 GB and spend seconds on a 10 KB file. Checking the file before the library
// walks it cannot rule that out: the superblock, object headers, B-trees and heaps it
// walks are the library's to decode, and checking them ourselves would be a second HDF5
// reader, with bugs of its own. We already read only the datasets pstrain expects and
// check each one's type and shape before reading its values (ReadDataset), which bounds
// what a well-formed file can make us allocate, but not what the library does on the way.
//
// So the library decodes untrusted files only in a short-lived child process (fork, no
// exec: nothing to install or find at run time). The child reads the datasets in order
// and sends each one's float32 values down a pipe as it reads it; the parent allocates
// each tensor from the shape it asked for, reads exactly that many bytes, and accepts the
// whole only when the child ends its answer and exits 0. A crash (a signal), an exit of
// its own, a short or malformed answer, or a run past ChildTimeout becomes one clear
// error; nothing of the parent's memory is touched by the library. The child's address
// space is capped (RLIMIT_AS: what it had at fork plus room for the image's copies, the
// largest tensor and the library), so a file that makes the library allocate without
// bound fails there instead of taking the machine's memory; it dumps no core and dies
// with its parent (PR_SET_PDEATHSIG). A file is read once, at a job's start, so the fork
// costs nothing that matters. Writing (WriteKerasWeightsH5) stays in process: it is our
// own data.
//
// The fork happens under hdf5_mu, so no other thread is inside the library (whose state
// the child inherits) at that moment. After a fork in a threaded process the child may
// only use what does not wait on another thread: glibc's malloc (reset for the child by
// fork itself), libhdf5 (serial, no locks), our own code and write(2); it never takes
// hdf5_mu, and leaves with _exit (no atexit handlers, no stdio flush, no leak check).

absl::Status BadWeights(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("model.weights.h5: ", what));
}

// How long the child may take: a file of pstrain's sizes reads in well under a second;
// the slack is for a loaded machine and a slow disk cache, and a few GB more per minute.
absl::Duration ChildTimeout(size_t image_bytes) {
  return absl::Seconds(60) + absl::Seconds(static_cast<int64_t>(image_bytes >> 25));
}

// What the child sends, per dataset in order: kDataset and its values (the parent knows
// how many from the shape it asked for), or kError (code, length, message) and nothing
// more; after the last object, kDone.
constexpr char kDataset = 'D';
constexpr char kError = 'E';
constexpr char kDone = 'K';
constexpr uint32_t kMaxErrorBytes = 1024;

bool LinkExists(hid_t location, const std::string& path) {
  // H5Lexists needs every parent to exist: check one component at a time.
  std::string prefix;
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    prefix = prefix.empty() ? std::string(part) : absl::StrCat(prefix, "/", part);
    if (H5Lexists(location, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
  }
  return true;
}

// Checks that `dataset` (named `name`) holds floats or integers in `shape`.
absl::Status CheckDataset(hid_t dataset, const std::string& name,
                          const std::vector<int64_t>& shape) {
  Hid type(H5Dget_type(dataset), H5Tclose);
  const H5T_class_t type_class = type.ok() ? H5Tget_class(type.get()) : H5T_NO_CLASS;
  if (type_class != H5T_FLOAT && type_class != H5T_INTEGER) {
    return BadWeights(absl::StrCat(name, " holds neither floats nor integers"));
  }
  Hid space(H5Dget_space(dataset), H5Sclose);
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
  return absl::OkStatus();
}

absl::StatusOr<Tensor> ReadDataset(hid_t file, const std::string& name,
                                   const std::vector<int64_t>& shape) {
  if (!LinkExists(file, name)) return BadWeights(absl::StrCat("no dataset ", name));
  Hid dataset(H5Dopen2(file, name.c_str(), H5P_DEFAULT), H5Dclose);
  if (!dataset.ok()) return BadWeights(absl::StrCat(name, " is not a dataset"));
  PS_RETURN_IF_ERROR(CheckDataset(dataset.get(), name, shape));
  Tensor tensor(shape);
  if (tensor.num_elements() > 0 &&
      H5Dread(dataset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, tensor.data()) < 0) {
    return BadWeights(absl::StrCat(name, " cannot be read"));
  }
  return tensor;
}

std::string VarsGroup(const KerasSaveableShapes& object) {
  return object.path.empty() ? "vars" : absl::StrCat(object.path, "/vars");
}

// The child's side. Returns false when the pipe failed (the parent is gone or gave up).
bool WriteAll(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool SendError(int fd, const absl::Status& status) {
  const std::string message(status.message().substr(0, kMaxErrorBytes));
  const uint32_t header[2] = {static_cast<uint32_t>(status.code()),
                              static_cast<uint32_t>(message.size())};
  return WriteAll(fd, &kError, 1) && WriteAll(fd, header, sizeof(header)) &&
         WriteAll(fd, message.data(), message.size());
}

// Reads what the parent asked for and answers on `fd` (see kDataset). Returns false when
// the pipe failed.
bool ServeRead(int fd, const std::string& image, absl::Span<const KerasSaveableShapes> objects) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  Hid access(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (!access.ok() || H5Pset_fapl_core(access.get(), size_t{1} << 20, 0) < 0 ||
      H5Pset_file_image(access.get(), const_cast<char*>(image.data()), image.size()) < 0) {
    return SendError(fd, Hdf5Error("H5Pset_file_image", "model.weights.h5"));
  }
  Hid file(H5Fopen("model.weights.h5", H5F_ACC_RDONLY, access.get()), H5Fclose);
  if (!file.ok()) return SendError(fd, BadWeights("not a readable HDF5 file"));
  for (const KerasSaveableShapes& object : objects) {
    const std::string vars = VarsGroup(object);
    for (size_t i = 0; i < object.shapes.size(); ++i) {
      absl::StatusOr<Tensor> t =
          ReadDataset(file.get(), absl::StrCat(vars, "/", i), object.shapes[i]);
      if (!t.ok()) return SendError(fd, t.status());
      if (!WriteAll(fd, &kDataset, 1) ||
          !WriteAll(fd, t->data(), sizeof(float) * static_cast<size_t>(t->num_elements()))) {
        return false;
      }
    }
    const std::string extra = absl::StrCat(vars, "/", object.shapes.size());
    if (LinkExists(file.get(), extra)) {
      return SendError(fd, BadWeights(absl::StrCat(extra,
                                                   " is one more variable than the model's ",
                                                   object.shapes.size(), " for ", object.path)));
    }
  }
  return WriteAll(fd, &kDone, 1);
}

// The file the weights member is extracted into, in $TMPDIR (else /tmp). The HDF5
// library opens files by name only (and resolves /proc/self/fd links to the name of a
// deleted file, which it then cannot open), so the file gets a name just for H5Fopen:
// it is made unnamed (O_TMPFILE), linked to `name` by the child after the extraction and
// unlinked as soon as the library has it open. So a task killed on the way leaves a
// file behind only if it dies inside H5Fopen. (A file system without O_TMPFILE gets a
// named file from the start.) The parent unlinks `name` again and closes `fd` when done.
struct TemporaryFile {
  int fd = -1;
  std::string name;
  bool named = false;  // `name` exists from the start (no O_TMPFILE)

  TemporaryFile() = default;
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;
  ~TemporaryFile() {
    if (fd < 0) return;
    unlink(name.c_str());
    close(fd);
  }
  // Errors: INTERNAL no file can be made (errno's text).
  absl::Status Open() {
    static std::atomic<uint64_t> made{0};
    const char* env = std::getenv("TMPDIR");
    const std::string dir = env != nullptr && env[0] != '\0' ? env : "/tmp";
    fd = open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    name = absl::StrCat(dir, "/pstrain-weights-", getpid(), "-", made++, "-XXXXXX");
    if (fd < 0) {
      fd = mkostemp(name.data(), O_CLOEXEC);
      named = true;
    }
    if (fd < 0) {
      return absl::InternalError(absl::StrCat("cannot make a temporary file in ", dir, " for ",
                                              kKerasWeightsMember, ": ", std::strerror(errno)));
    }
    return absl::OkStatus();
  }
  // In the child, after the extraction: gives the file `name`; false (errno set) when
  // it cannot.
  bool Link() const {
    if (named) return true;
    const std::string self = absl::StrCat("/proc/self/fd/", fd);
    return linkat(AT_FDCWD, self.c_str(), AT_FDCWD, name.c_str(), AT_SYMLINK_FOLLOW) == 0;
  }
};

// Sends `request`'s rows of the open dataset, a block of rows at a time (a hyperslab of
// the file's dataspace read into a block-sized buffer), so the child holds one block,
// never the shard. Returns false when the pipe failed; a read error is sent.
bool SendRows(int fd, hid_t dataset, const KerasRowsRequest& request) {
  const std::vector<int64_t>& shape = request.shape;
  if (shape.empty()) {
    float value = 0;
    if (H5Dread(dataset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, &value) < 0) {
      return SendError(fd, BadWeights(absl::StrCat(request.dataset, " cannot be read")));
    }
    return WriteAll(fd, &kDataset, 1) && WriteAll(fd, &value, sizeof(value));
  }
  Hid file_space(H5Dget_space(dataset), H5Sclose);
  if (!file_space.ok()) return SendError(fd, Hdf5Error("H5Dget_space", request.dataset));
  const int64_t per_block = RowsPerBlock(shape);
  const int64_t row_elements = NumElements(absl::MakeConstSpan(shape).subspan(1));
  std::vector<float> block(static_cast<size_t>(
      std::min(per_block, request.row_end - request.row_begin) * row_elements));
  if (!WriteAll(fd, &kDataset, 1)) return false;
  for (int64_t row = request.row_begin; row < request.row_end; row += per_block) {
    const int64_t rows = std::min(per_block, request.row_end - row);
    std::vector<hsize_t> start(shape.size(), 0), count(shape.begin(), shape.end());
    start[0] = static_cast<hsize_t>(row);
    count[0] = static_cast<hsize_t>(rows);
    Hid memory_space(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr),
                     H5Sclose);
    if (!memory_space.ok() ||
        H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr,
                            count.data(), nullptr) < 0 ||
        H5Dread(dataset, H5T_NATIVE_FLOAT, memory_space.get(), file_space.get(), H5P_DEFAULT,
                block.data()) < 0) {
      // Some of this dataset's values are already sent, so an error message would be
      // read as floats: exit instead, which the parent reports as the library failing on
      // a corrupt file.
      _exit(3);
    }
    if (!WriteAll(fd, block.data(), sizeof(float) * static_cast<size_t>(rows * row_elements))) {
      return false;
    }
  }
  return true;
}

// The rows reader's side: extracts model.weights.h5 from the .keras file at `keras_path`
// into `temp` (TemporaryFile), opens it with the HDF5 file driver (which
// reads from disk what it is asked for, not the whole file) and answers `requests` in
// order. Returns false when the pipe failed.
bool ServeRows(int fd, const std::string& keras_path, const ZipMemberInfo& member,
               const TemporaryFile& temp, absl::Span<const KerasRowsRequest> requests) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  if (absl::Status extracted = ExtractZipMember(keras_path, kKerasWeightsMember, member, temp.fd);
      !extracted.ok()) {
    return SendError(fd, extracted);
  }
  if (!temp.Link()) {
    return SendError(fd, absl::InternalError(absl::StrCat(
                             "cannot name the temporary file ", temp.name, ": ",
                             std::strerror(errno))));
  }
  Hid file(H5Fopen(temp.name.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  unlink(temp.name.c_str());  // the library holds it open
  if (!file.ok()) return SendError(fd, BadWeights("not a readable HDF5 file"));
  for (const KerasRowsRequest& request : requests) {
    if (!LinkExists(file.get(), request.dataset)) {
      return SendError(fd, BadWeights(absl::StrCat("no dataset ", request.dataset)));
    }
    Hid dataset(H5Dopen2(file.get(), request.dataset.c_str(), H5P_DEFAULT), H5Dclose);
    if (!dataset.ok()) {
      return SendError(fd, BadWeights(absl::StrCat(request.dataset, " is not a dataset")));
    }
    if (absl::Status checked = CheckDataset(dataset.get(), request.dataset, request.shape);
        !checked.ok()) {
      return SendError(fd, checked);
    }
    if (!SendRows(fd, dataset.get(), request)) return false;
  }
  return WriteAll(fd, &kDone, 1);
}

// The child's address-space cap: what this process maps now (the child inherits all of
// it, shared until written) plus `budget`; RLIM_INFINITY when /proc cannot say.
rlim_t AddressSpaceLimit(uint64_t budget) {
  const int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return RLIM_INFINITY;
  char text[64] = {};
  const ssize_t n = read(fd, text, sizeof(text) - 1);
  close(fd);
  uint64_t pages = 0;
  if (n <= 0 || !absl::SimpleAtoi(absl::string_view(text, n).substr(
                                      0, absl::string_view(text, n).find(' ')),
                                  &pages)) {
    return RLIM_INFINITY;
  }
  const uint64_t mapped = pages * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  if (mapped > (uint64_t{1} << 62) || budget > (uint64_t{1} << 62)) return RLIM_INFINITY;
  return static_cast<rlim_t>(mapped + budget);
}

// Runs in the child after fork; never returns.
[[noreturn]] void RunReaderChild(int fd, pid_t parent, rlim_t address_space, int cpu_seconds,
                                 const std::function<bool(int)>& serve) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);
  // A crash is reported by the parent: the default action, not a daemon's failure
  // handler or a sanitizer's report, and no core file of a copy of the parent.
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGPIPE}) signal(sig, SIG_DFL);
  const rlimit no_core = {0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  // SIGXCPU at the soft limit (reported as such), SIGKILL a second later.
  const rlimit cpu = {static_cast<rlim_t>(cpu_seconds), static_cast<rlim_t>(cpu_seconds) + 1};
  setrlimit(RLIMIT_CPU, &cpu);
  if (address_space != RLIM_INFINITY) {
    const rlimit as = {address_space, address_space};
    setrlimit(RLIMIT_AS, &as);
  }
  _exit(serve(fd) ? 0 : 1);
}

// The parent's end of the pipe, read against a deadline.
class ChildAnswer {
 public:
  ChildAnswer(int fd, absl::Time deadline) : fd_(fd), deadline_(deadline) {}
  ~ChildAnswer() { close(fd_); }
  ChildAnswer(const ChildAnswer&) = delete;
  ChildAnswer& operator=(const ChildAnswer&) = delete;

  // Fills `data` (`size` bytes); false at end of file, on an error or past the deadline.
  bool Read(void* data, size_t size) {
    char* p = static_cast<char*>(data);
    while (size > 0) {
      if (!WaitReadable()) return false;
      const ssize_t n = read(fd_, p, size);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      p += n;
      size -= static_cast<size_t>(n);
    }
    return true;
  }
  // True when the child closed its end (exited) with nothing more sent, by the deadline.
  bool AtEnd() {
    char c;
    while (WaitReadable()) {
      const ssize_t n = read(fd_, &c, 1);
      if (n < 0 && errno == EINTR) continue;
      return n == 0;
    }
    return false;
  }
  bool timed_out() const { return timed_out_; }

 private:
  bool WaitReadable() {
    while (true) {
      const absl::Duration left = deadline_ - absl::Now();
      if (left <= absl::ZeroDuration()) {
        timed_out_ = true;
        return false;
      }
      pollfd p = {fd_, POLLIN, 0};
      const int ready =
          poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
      if (ready < 0 && errno == EINTR) continue;
      if (ready < 0) return false;
      if (ready > 0) return true;
    }
  }

  const int fd_;
  const absl::Time deadline_;
  bool timed_out_ = false;
};

// The reading child, killed (if still running) and reaped however the parent leaves.
class ReaderChild {
 public:
  explicit ReaderChild(pid_t pid) : pid_(pid) {}
  ~ReaderChild() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      Wait();
    }
  }
  ReaderChild(const ReaderChild&) = delete;
  ReaderChild& operator=(const ReaderChild&) = delete;

  // Kills the child (when `kill_first`), waits for it and says how it ended: "" for an exit
  // with status 0 (or when its status cannot be had: SIGCHLD ignored), else what happened.
  std::string End(bool kill_first) {
    if (kill_first) kill(pid_, SIGKILL);
    const int status = Wait();
    pid_ = -1;
    if (status < 0 || (WIFEXITED(status) && WEXITSTATUS(status) == 0)) return "";
    if (WIFEXITED(status)) return absl::StrCat("exited with status ", WEXITSTATUS(status));
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGXCPU) return "ran out of CPU time";
    if (WIFSIGNALED(status)) {
      const char* name = sigabbrev_np(WTERMSIG(status));
      return absl::StrCat("crashed (signal ", WTERMSIG(status), name ? ", SIG" : "",
                          name ? name : "", ")");
    }
    return "ended";
  }

 private:
  int Wait() {
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0) {
      if (errno != EINTR) return -1;
    }
    return status;
  }

  pid_t pid_;
};

}  // namespace

namespace {

// Runs `serve` in a reader child (the comment above ReadKerasWeightsH5's helpers) and
// reads its answer: one tensor of each of `shapes`, in order. `budget`: what the child
// may map beyond what this process maps; `timeout`: how long it may take.
absl::StatusOr<std::vector<Tensor>> ReadInChild(const std::function<bool(int)>& serve,
                                                const std::vector<std::vector<int64_t>>& shapes,
                                                absl::Duration timeout, uint64_t budget) {
  const absl::Time deadline = absl::Now() + timeout;
  const rlim_t address_space = AddressSpaceLimit(budget);
  const int cpu_seconds = static_cast<int>(absl::ToInt64Seconds(timeout)) + 1;

  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat(
        "model.weights.h5: cannot start the HDF5 reader: pipe: ", std::strerror(errno)));
  }
  const pid_t parent = getpid();
  pid_t pid;
  {
    absl::MutexLock lock(&hdf5_mu);
    pid = fork();
    if (pid == 0) {
      close(fds[0]);
      RunReaderChild(fds[1], parent, address_space, cpu_seconds, serve);
    }
    // Closed before another reader forks, or that child would hold this pipe open too.
    const int error = errno;
    close(fds[1]);
    errno = error;
  }
  if (pid < 0) {
    const int error = errno;
    close(fds[0]);
    return absl::InternalError(absl::StrCat(
        "model.weights.h5: cannot start the HDF5 reader: fork: ", std::strerror(error)));
  }
  ReaderChild child(pid);
  ChildAnswer answer(fds[0], deadline);

  // What went wrong when the answer stops short: the child's end, in one line. (Killing
  // first is safe: a child that already died keeps the status it died with.)
  auto failed = [&](absl::string_view what) {
    const std::string end = child.End(/*kill_first=*/true);
    if (answer.timed_out()) {
      return BadWeights(absl::StrCat("the HDF5 library did not finish reading it within ",
                                     absl::FormatDuration(timeout),
                                     " (a corrupt file?); stopped"));
    }
    if (!end.empty()) {
      return BadWeights(absl::StrCat("the HDF5 library ", end, " reading it: a corrupt file"));
    }
    return absl::InternalError(
        absl::StrCat("model.weights.h5: the HDF5 reader's answer ", what));
  };

  // The child's error (its code and message, sent after kError), or why it cannot be had.
  auto read_error = [&]() -> absl::Status {
    uint32_t header[2];
    if (!answer.Read(header, sizeof(header)) || header[1] > kMaxErrorBytes) {
      return failed("has a malformed error");
    }
    std::string message(header[1], '\0');
    if (!answer.Read(message.data(), message.size())) return failed("stopped short");
    if (header[0] == 0 || header[0] > 16) return absl::InternalError(message);
    return absl::Status(static_cast<absl::StatusCode>(header[0]), message);
  };

  std::vector<Tensor> out;
  for (const std::vector<int64_t>& shape : shapes) {
    char tag = 0;
    if (!answer.Read(&tag, 1)) return failed("stopped short");
    if (tag == kError) return read_error();
    if (tag != kDataset) return failed("is malformed");
    Tensor t(shape);
    if (!answer.Read(t.data(), sizeof(float) * static_cast<size_t>(t.num_elements()))) {
      return failed("stopped short");
    }
    out.push_back(std::move(t));
  }
  char tag = 0;
  if (!answer.Read(&tag, 1)) return failed("stopped short");
  if (tag == kError) return read_error();
  if (tag != kDone || !answer.AtEnd()) return failed("is malformed");
  const std::string end = child.End(/*kill_first=*/false);
  if (!end.empty()) return BadWeights(absl::StrCat("the HDF5 reader ", end));
  return out;
}

// A path the rows reader accepts (see ReadKerasWeightRows).
absl::Status CheckKerasRowsPath(const std::string& path) {
  auto refuse = [&path](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("the .keras file \"", path.substr(0, 256), "\" ", why));
  };
  if (path.size() > 4096) return refuse("is a path over 4096 bytes");
  if (path.empty() || path[0] != '/') return refuse("is not an absolute path");
  if (!absl::EndsWith(path, ".keras")) return refuse("does not end in .keras");
  for (absl::string_view part : absl::StrSplit(path.substr(1), '/')) {
    if (part.empty() || part == "." || part == "..") {
      return refuse("is not a normalized path (an empty, \".\" or \"..\" component)");
    }
  }
  return absl::OkStatus();
}

absl::Status CheckRowsRequest(const KerasRowsRequest& request) {
  static const std::regex* const kDatasetName = new std::regex("([A-Za-z0-9_]+/)*vars/[0-9]+");
  auto refuse = [&request](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("rows of \"", request.name.substr(0, 256), "\": ", why));
  };
  if (request.name.empty()) return refuse("an empty name");
  if (request.dataset.size() > 1024 || !std::regex_match(request.dataset, *kDatasetName)) {
    return refuse(absl::StrCat("\"", request.dataset.substr(0, 256),
                               "\" is not a Keras weights dataset (<object path>/vars/<index>)"));
  }
  if (request.shape.size() > 32) return refuse("a shape of more than 32 dimensions");
  absl::StatusOr<int64_t> elements = CheckedNumElements(request.shape);
  if (!elements.ok()) return refuse(elements.status().message());
  for (int64_t d : request.shape) {
    if (d < 1) return refuse(absl::StrCat("shape ", ShapeToString(request.shape), " has an empty dimension"));
  }
  const int64_t rows = request.shape.empty() ? 1 : request.shape[0];
  if (request.row_begin < 0 || request.row_begin >= request.row_end || request.row_end > rows) {
    return refuse(absl::StrCat("rows [", request.row_begin, ", ", request.row_end,
                               ") are not within the variable's ", rows));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::vector<Tensor>>> ReadKerasWeightsH5(
    const std::string& image, absl::Span<const KerasSaveableShapes> objects) {
  if (image.size() < 8 || image.compare(0, 8, std::string("\x89HDF\r\n\x1a\n", 8)) != 0) {
    return BadWeights("not an HDF5 file");
  }
  uint64_t largest_bytes = 0;
  std::vector<std::vector<int64_t>> shapes;
  for (const KerasSaveableShapes& object : objects) {
    for (const std::vector<int64_t>& shape : object.shapes) {
      const int64_t n = NumElements(shape);
      if (n < 0 || n > kMaxTensorElements) {
        return absl::InvalidArgumentError(absl::StrCat(
            "model.weights.h5: the model's variable shape ", ShapeToString(shape),
            " of ", object.path, " is not a tensor shape"));
      }
      largest_bytes = std::max(largest_bytes, sizeof(float) * static_cast<uint64_t>(n));
      shapes.push_back(shape);
    }
  }
  // Room for the library's two copies of the image (the file-image property and the core
  // driver's buffer), one tensor with its conversion buffers, and the library itself.
  const uint64_t budget = 3 * static_cast<uint64_t>(image.size()) +
                          2 * std::min(largest_bytes, uint64_t{1} << 60) +
                          (uint64_t{512} << 20);
  PS_ASSIGN_OR_RETURN(
      std::vector<Tensor> flat,
      ReadInChild([&](int fd) { return ServeRead(fd, image, objects); }, shapes,
                  ChildTimeout(image.size()), budget));
  std::vector<std::vector<Tensor>> out;
  size_t next = 0;
  for (const KerasSaveableShapes& object : objects) {
    std::vector<Tensor> tensors;
    for (size_t i = 0; i < object.shapes.size(); ++i) tensors.push_back(std::move(flat[next++]));
    out.push_back(std::move(tensors));
  }
  return out;
}

absl::StatusOr<std::vector<Tensor>> ReadKerasWeightRows(const KerasWeightsFile& file,
                                                        absl::Span<const KerasRowsRequest> requests) {
  const std::string& keras_path = file.path;
  const ZipMemberInfo& member = file.member;
  PS_RETURN_IF_ERROR(CheckKerasRowsPath(keras_path));
  std::vector<std::vector<int64_t>> shapes;
  for (const KerasRowsRequest& request : requests) {
    PS_RETURN_IF_ERROR(CheckRowsRequest(request));
    std::vector<int64_t> shape = request.shape;
    if (!shape.empty()) shape[0] = request.row_end - request.row_begin;
    shapes.push_back(std::move(shape));
  }
  // Whether this task reaches the file the chief named: it opens, and its weights member
  // is the chief's (size and CRC from the archive's directory, nothing decoded).
  const int keras_fd = open(keras_path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st;
  const bool reached = keras_fd >= 0 && fstat(keras_fd, &st) == 0 && S_ISREG(st.st_mode);
  const int open_error = errno;
  if (keras_fd >= 0) close(keras_fd);
  if (!reached) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot read ", keras_path, ": ",
        keras_fd >= 0 ? "not a regular file" : std::strerror(open_error)));
  }
  absl::StatusOr<ZipMemberInfo> found = StatZipMember(keras_path, kKerasWeightsMember);
  if (!found.ok()) return BadWeights(std::string(found.status().message()));
  if (found->size != member.size || found->crc32 != member.crc32) {
    return absl::FailedPreconditionError(absl::StrCat(
        keras_path, " here is another file: its ", kKerasWeightsMember, " has ", found->size,
        " bytes, CRC ", found->crc32, "; the one named has ", member.size, " bytes, CRC ",
        member.crc32));
  }
  // The extracted copy lives until the child is done with it.
  TemporaryFile temp;
  PS_RETURN_IF_ERROR(temp.Open());
  // Room for two blocks of rows (the read and its conversion) and the library itself.
  const uint64_t budget = 2 * (uint64_t{16} << 20) + (uint64_t{512} << 20);
  // The largest row may exceed a block (a row is never split).
  uint64_t largest_row = 0;
  for (const KerasRowsRequest& request : requests) {
    const int64_t row = request.shape.size() <= 1
                            ? 1
                            : NumElements(absl::MakeConstSpan(request.shape).subspan(1));
    largest_row = std::max(largest_row, sizeof(float) * static_cast<uint64_t>(row));
  }
  return ReadInChild(
      [&](int fd) { return ServeRows(fd, keras_path, member, temp, requests); }, shapes,
      ChildTimeout(static_cast<size_t>(member.size)),
      budget + 2 * std::min(largest_row, uint64_t{1} << 60));
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
