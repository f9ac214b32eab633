#include "common/checkpoint/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/checkpoint/crc32c.h"
#include "common/checkpoint/durable_file.h"
#include "common/checkpoint/shard_files.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "checkpoint data files are little-endian float32, copied as is");

namespace pstrain {
namespace {

// What a manifest's "metadata" holds: the caller's, or {} for none.
nlohmann::json MetadataObject(const CheckpointContents& contents) {
  return contents.metadata->is_null() ? nlohmann::json::object() : *contents.metadata;
}

namespace fs = std::filesystem;

constexpr char kManifest[] = "manifest.json";
constexpr char kLatest[] = "latest";
constexpr char kFormat[] = "pstrain-checkpoint";
constexpr char kTempPrefix[] = ".tmp-";

// Largest manifest read (a real one is a few KB per thousand tensors).
constexpr int64_t kMaxManifestBytes = int64_t{64} << 20;

// The whole file. Errors: NOT_FOUND it does not exist; PERMISSION_DENIED or INTERNAL it
// cannot be read (errno's text: "Permission denied", "Is a directory", ...);
// RESOURCE_EXHAUSTED it is larger than `max_bytes` (checked before reading).
absl::StatusOr<std::string> ReadFile(const std::string& path,
                                     int64_t max_bytes = std::numeric_limits<int64_t>::max()) {
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    const int error = errno;
    if (error == ENOENT) return absl::NotFoundError(absl::StrCat(path, " does not exist"));
    return absl::Status(error == EACCES ? absl::StatusCode::kPermissionDenied
                                        : absl::StatusCode::kInternal,
                        absl::StrCat("cannot read ", path, ": ", std::strerror(error)));
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoError("cannot stat", path);
  if (!S_ISREG(st.st_mode)) {
    return absl::InternalError(absl::StrCat("cannot read ", path, ": not a regular file"));
  }
  if (st.st_size > max_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(path, " holds ", st.st_size,
                                                     " bytes, more than the ", max_bytes,
                                                     " this reader takes"));
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::read(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError("cannot read", path);
    if (n == 0) break;  // shrank meanwhile: what is there is checked by the caller
    done += static_cast<size_t>(n);
  }
  text.resize(done);
  return text;
}

// The step of a directory named "ckpt-<digits>", or -1 for any other name (temp
// directories, `latest`, stray files).
int64_t StepOfName(const std::string& name) {
  absl::string_view rest(name);
  if (!absl::ConsumePrefix(&rest, "ckpt-") || rest.empty()) return -1;
  for (char c : rest) {
    if (c < '0' || c > '9') return -1;
  }
  int64_t step;
  if (!absl::SimpleAtoi(rest, &step)) return -1;
  return step;
}

// Checkpoint directories under root, newest (highest step) first.
std::vector<std::pair<int64_t, std::string>> ListCheckpointsIn(const std::string& root) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const int64_t step = StepOfName(name);
    if (step >= 0 && it->is_directory(ec)) found.push_back({step, name});
  }
  std::sort(found.begin(), found.end(), std::greater<>());
  return found;
}

nlohmann::json ShapeJson(const std::vector<int64_t>& shape) {
  nlohmann::json out = nlohmann::json::array();
  for (int64_t d : shape) out.push_back(d);
  return out;
}

// `object[key]` when it is a string, else "": json::value() throws (an abort here) when a
// hostile manifest gives the key another type.
std::string StringOrEmpty(const nlohmann::json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool IsNonNegativeInt(const nlohmann::json& v) {
  return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
}

// `object[key]` as an integer in [0, max]: a number past int64 (nlohmann keeps it as an
// unsigned) or a negative one is refused, not wrapped.
bool GetCount(const nlohmann::json& object, const char* key, int64_t max, int64_t* out) {
  auto it = object.find(key);
  if (it == object.end() || !IsNonNegativeInt(*it)) return false;
  if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(max)) return false;
  const int64_t v = it->get<int64_t>();
  if (v < 0 || v > max) return false;
  *out = v;
  return true;
}

absl::Status DataLoss(const std::string& dir, absl::string_view why) {
  return absl::DataLossError(absl::StrCat("checkpoint ", dir, ": ", why));
}

}  // namespace

std::string CheckpointName(int64_t step) { return absl::StrCat("ckpt-", step); }

CheckpointWriter::CheckpointWriter(std::string root, Options options)
    : root_(std::move(root)), options_(options) {}

absl::Status CheckpointWriter::CheckWritable() const {
  std::error_code ec;
  fs::create_directories(root_, ec);
  if (ec) {
    return absl::Status(
        ec == std::errc::permission_denied || ec == std::errc::read_only_file_system
            ? absl::StatusCode::kPermissionDenied
            : absl::StatusCode::kInternal,
        absl::StrCat("checkpoint directory ", root_, " cannot be created: ", ec.message()));
  }
  const std::string probe = absl::StrCat(root_, "/", kTempPrefix, "probe-", ::getpid());
  absl::Status written = WriteFileDurably(probe, "pstrain checks it can write here\n");
  ::unlink(probe.c_str());
  if (!written.ok()) {
    return absl::Status(
        absl::IsPermissionDenied(written) || access(root_.c_str(), W_OK) != 0
            ? absl::StatusCode::kPermissionDenied
            : written.code(),
        absl::StrCat("checkpoint directory ", root_, " is not writable: ", written.message()));
  }
  return absl::OkStatus();
}

namespace {

// Refuses what no checkpoint may hold: a negative step, an empty or repeated name.
absl::Status CheckContents(const CheckpointContents& contents) {
  if (contents.step < 0) return absl::InvalidArgumentError("negative checkpoint step");
  std::set<std::string> names;
  for (const NamedTensor& t : contents.tensors) {
    if (t.name.empty()) return absl::InvalidArgumentError("checkpoint tensor with empty name");
    if (!names.insert(t.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("tensor \"", t.name, "\" given twice"));
    }
  }
  return absl::OkStatus();
}

// Writes tensors one after another into data-00000, data-00001, ... in `dir`, starting a
// new file when the next tensor would take one past `max_file_bytes` (a tensor larger
// than that gets a file of its own). Each file is fsynced and closed before the next.
class DataFileWriter {
 public:
  DataFileWriter(std::string dir, int64_t max_file_bytes)
      : dir_(std::move(dir)), max_file_bytes_(max_file_bytes) {}

  // Appends `t`'s bytes and its manifest entry. Errors: INTERNAL naming the file.
  absl::Status Add(const NamedTensor& t) {
    const int64_t length = t.tensor.num_elements() * static_cast<int64_t>(sizeof(float));
    if (fd_ == nullptr || (offset_ > 0 && offset_ + length > max_file_bytes_)) {
      PS_RETURN_IF_ERROR(FinishFile());
      file_name_ = absl::StrFormat("data-%05d", static_cast<int>(files_.size()));
      file_path_ = absl::StrCat(dir_, "/", file_name_);
      fd_ = std::make_unique<FileDescriptor>(
          ::open(file_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
      if (fd_->get() < 0) return ErrnoError("cannot create", file_path_);
      files_.push_back(file_name_);
      offset_ = 0;
    }
    PS_RETURN_IF_ERROR(
        WriteAll(fd_->get(), t.tensor.data(), static_cast<size_t>(length), file_path_));
    tensors_.push_back({{"name", t.name},
                        {"dtype", "float32"},
                        {"shape", ShapeJson(t.tensor.shape())},
                        {"file", file_name_},
                        {"offset", offset_},
                        {"length", length},
                        {"crc32c", Crc32c(t.tensor.data(), static_cast<size_t>(length))}});
    offset_ += length;
    return absl::OkStatus();
  }

  // Fsyncs and closes the file being written. Errors: INTERNAL naming the file.
  absl::Status FinishFile() {
    if (fd_ == nullptr) return absl::OkStatus();
    if (::fsync(fd_->get()) != 0) return ErrnoError("cannot fsync", file_path_);
    if (fd_->Close() != 0) return ErrnoError("cannot close", file_path_);
    fd_.reset();
    return absl::OkStatus();
  }

  // The manifest's "data_files" and "tensors".
  const nlohmann::json& files() const { return files_; }
  const nlohmann::json& tensors() const { return tensors_; }

 private:
  const std::string dir_;
  const int64_t max_file_bytes_;
  nlohmann::json files_ = nlohmann::json::array();
  nlohmann::json tensors_ = nlohmann::json::array();
  std::unique_ptr<FileDescriptor> fd_;
  std::string file_name_;
  std::string file_path_;
  int64_t offset_ = 0;
};

}  // namespace

absl::Status CheckpointWriter::WriteInto(const std::string& temp,
                                         const CheckpointContents& contents) const {
  DataFileWriter data(temp, options_.max_data_file_bytes);
  for (const NamedTensor& t : contents.tensors) PS_RETURN_IF_ERROR(data.Add(t));
  PS_RETURN_IF_ERROR(data.FinishFile());
  nlohmann::json manifest = {{"format", kFormat},
                             {"version", 1},
                             {"step", contents.step},
                             {"epoch", contents.epoch},
                             {"job_spec", *contents.job_spec},
                             {"metadata", MetadataObject(contents)},
                             {"data_files", data.files()},
                             {"tensors", data.tensors()}};
  PS_RETURN_IF_ERROR(WriteFileDurably(absl::StrCat(temp, "/", kManifest), manifest.dump(1)));
  return FsyncPath(temp);
}

absl::Status CheckpointWriter::Commit(const std::string& temp, const std::string& name) const {
  if (options_.delay_before_commit > absl::ZeroDuration()) {
    absl::SleepFor(options_.delay_before_commit);
  }
  const std::string final_path = absl::StrCat(root_, "/", name);
  // Rewriting a step (a repeated save with no training in between) replaces it; the
  // old copy is gone for the moment between these two calls, when a crash makes a
  // reader fall back to the previous checkpoint.
  std::error_code ec;
  fs::remove_all(final_path, ec);
  if (::rename(temp.c_str(), final_path.c_str()) != 0) return ErrnoError("cannot rename", temp);
  PS_RETURN_IF_ERROR(FsyncPath(root_));
  const std::string latest_temp = absl::StrCat(root_, "/", kTempPrefix, kLatest);
  PS_RETURN_IF_ERROR(WriteFileDurably(latest_temp, name + "\n"));
  const std::string latest = absl::StrCat(root_, "/", kLatest);
  if (::rename(latest_temp.c_str(), latest.c_str()) != 0) {
    return ErrnoError("cannot rename", latest_temp);
  }
  return FsyncPath(root_);
}

void CheckpointWriter::Prune(const std::string& written, int64_t step) const {
  // Keep the newest `keep`; the one just written is the newest unless an older run left
  // higher steps behind, so it is never counted out.
  std::error_code ec;
  int kept = 1;
  for (const auto& [other_step, other] : ListCheckpointsIn(root_)) {
    if (other == written) continue;
    if (kept < options_.keep && other_step < step) {
      ++kept;
      continue;
    }
    fs::remove_all(absl::StrCat(root_, "/", other), ec);
  }
  // Temp directories of writers that crashed: only this writer uses the root.
  for (fs::directory_iterator it(root_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string entry = it->path().filename().string();
    if (absl::StartsWith(entry, kTempPrefix)) {
      std::error_code ignored;
      fs::remove_all(it->path(), ignored);
    }
  }
}

absl::StatusOr<std::string> CheckpointWriter::Write(const CheckpointContents& contents) {
  if (options_.keep < 1) return absl::InvalidArgumentError("keep_checkpoints must be >= 1");
  PS_RETURN_IF_ERROR(CheckContents(contents));
  std::error_code ec;
  fs::create_directories(root_, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", root_, ": ", ec.message()));

  const std::string name = CheckpointName(contents.step);
  static std::atomic<int> counter{0};
  const std::string temp =
      absl::StrCat(root_, "/", kTempPrefix, name, "-", ::getpid(), "-", counter.fetch_add(1));
  fs::remove_all(temp, ec);
  if (::mkdir(temp.c_str(), 0755) != 0) return ErrnoError("cannot create", temp);
  absl::Status written = WriteInto(temp, contents);
  if (written.ok()) written = Commit(temp, name);
  if (!written.ok()) {
    fs::remove_all(temp, ec);
    return written;
  }
  Prune(name, contents.step);
  return absl::StrCat(root_, "/", name);
}

absl::StatusOr<std::string> CheckpointWriter::BeginSharded(int64_t step) {
  if (options_.keep < 1) return absl::InvalidArgumentError("keep_checkpoints must be >= 1");
  if (step < 0) return absl::InvalidArgumentError("negative checkpoint step");
  std::error_code ec;
  fs::create_directories(root_, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", root_, ": ", ec.message()));
  static std::atomic<int> counter{0};
  const std::string temp_name = absl::StrCat(kTempPrefix, CheckpointName(step), "-", ::getpid(),
                                             "-", counter.fetch_add(1));
  const std::string temp = absl::StrCat(root_, "/", temp_name);
  fs::remove_all(temp, ec);
  if (::mkdir(temp.c_str(), 0755) != 0) return ErrnoError("cannot create", temp);
  // The ps tasks create their files in it: the entry must be durable before they answer.
  PS_RETURN_IF_ERROR(FsyncPath(root_));
  return temp_name;
}

absl::StatusOr<std::string> CheckpointWriter::CommitSharded(const std::string& temp_name,
                                                            const CheckpointContents& header,
                                                            const std::vector<ShardFile>& files) {
  const std::string temp = absl::StrCat(root_, "/", temp_name);
  const std::string name = CheckpointName(header.step);
  nlohmann::json manifest = {{"format", kFormat},
                             {"version", 2},
                             {"step", header.step},
                             {"epoch", header.epoch},
                             {"job_spec", *header.job_spec},
                             {"metadata", MetadataObject(header)}};
  AddShardFilesToManifest(files, &manifest);
  absl::Status written =
      WriteFileDurably(absl::StrCat(temp, "/", kManifest), manifest.dump(1) + "\n");
  if (written.ok()) written = FsyncPath(temp);
  if (written.ok() && options_.delay_before_commit > absl::ZeroDuration()) {
    absl::SleepFor(options_.delay_before_commit);
  }
  if (written.ok()) written = Commit(temp, name);
  if (!written.ok()) {
    Abandon(temp_name);
    return written;
  }
  Prune(name, header.step);
  return absl::StrCat(root_, "/", name);
}

void CheckpointWriter::Abandon(const std::string& temp_name) const {
  std::error_code ec;
  if (absl::StartsWith(temp_name, kTempPrefix) && temp_name.find('/') == std::string::npos) {
    fs::remove_all(absl::StrCat(root_, "/", temp_name), ec);
  }
}

void CheckpointWriter::RemoveStaleTemps() const {
  std::error_code ec;
  for (fs::directory_iterator it(root_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string entry = it->path().filename().string();
    if (absl::StartsWith(entry, kTempPrefix)) {
      std::error_code ignored;
      fs::remove_all(it->path(), ignored);
    }
  }
}

absl::StatusOr<const Tensor*> CheckpointReader::Get(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) {
    return absl::NotFoundError(absl::StrCat("checkpoint ", path_, " has no tensor \"", name, "\""));
  }
  return &contents_.tensors[it->second].tensor;
}

absl::StatusOr<std::vector<int64_t>> CheckpointReader::Shape(const std::string& name) const {
  if (tensors_loaded_) {
    PS_ASSIGN_OR_RETURN(const Tensor* t, Get(name));
    return t->shape();
  }
  auto it = manifest_.index.find(name);
  if (it == manifest_.index.end()) {
    return absl::NotFoundError(absl::StrCat("checkpoint ", path_, " has no tensor \"", name, "\""));
  }
  return manifest_.tensors[it->second].shape;
}

std::vector<std::string> CheckpointReader::TensorNames() const {
  std::vector<std::string> names;
  if (tensors_loaded_) {
    for (const NamedTensor& t : contents_.tensors) names.push_back(t.name);
  } else {
    for (const StoredTensor& t : manifest_.tensors) names.push_back(t.name);
  }
  return names;
}

absl::Status CheckpointReader::ReadRows(const std::string& name, int64_t row_begin,
                                        int64_t row_end, float* out) const {
  if (!tensors_loaded_) {
    auto it = manifest_.index.find(name);
    if (it == manifest_.index.end()) {
      return absl::NotFoundError(
          absl::StrCat("checkpoint ", path_, " has no tensor \"", name, "\""));
    }
    return ReadTensorRows(path_, manifest_, manifest_.tensors[it->second], row_begin, row_end,
                          out);
  }
  PS_ASSIGN_OR_RETURN(const Tensor* t, Get(name));
  if (row_begin < 0 || row_end < row_begin || row_end > RowsOf(t->shape())) {
    return absl::InvalidArgumentError(absl::StrCat("rows [", row_begin, ", ", row_end,
                                                   ") of tensor \"", name, "\" ",
                                                   t->ShapeString()));
  }
  const int64_t row = RowElements(t->shape());
  std::copy(t->data() + row_begin * row, t->data() + row_end * row, out);
  return absl::OkStatus();
}

absl::StatusOr<Tensor> CheckpointReader::ReadTensor(const std::string& name) const {
  PS_ASSIGN_OR_RETURN(std::vector<int64_t> shape, Shape(name));
  Tensor tensor(shape);
  PS_RETURN_IF_ERROR(ReadRows(name, 0, tensor.num_elements() == 0 ? 0 : RowsOf(shape),
                              tensor.data()));
  return tensor;
}

namespace {

// Version 2's tensors (shard files): each read whole, block by block, when `load`;
// otherwise only the manifest is checked and every shard file's length (the ps tasks
// read and verify their rows when they restore: nothing is held here).
absl::Status LoadShardedTensors(const std::string& dir, const nlohmann::json& json, bool load,
                                CheckpointContents* contents, ShardedManifest* manifest_out) {
  PS_ASSIGN_OR_RETURN(ShardedManifest manifest, ParseShardedManifest(json, dir));
  int64_t file_bytes = 0;
  for (const auto& [file, length] : manifest.file_lengths) {
    struct stat st;
    const std::string path = absl::StrCat(dir, "/", file);
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size != length) {
      return DataLoss(dir, absl::StrCat("shard file ", file, " is missing or not the ", length,
                                        " bytes the manifest says"));
    }
    if (length > std::numeric_limits<int64_t>::max() - file_bytes) {
      return DataLoss(dir, "shard files too large");
    }
    file_bytes += length;
  }
  if (!load) {
    *manifest_out = std::move(manifest);
    return absl::OkStatus();
  }
  // Nothing is allocated for more bytes than the files hold (blocks of a good checkpoint
  // never share bytes), whatever the manifest claims.
  int64_t tensor_bytes = 0;
  for (const StoredTensor& stored : manifest.tensors) {
    const int64_t bytes = NumElements(stored.shape) * static_cast<int64_t>(sizeof(float));
    if (bytes > file_bytes - tensor_bytes) {
      return DataLoss(dir, "the manifest's tensors need more bytes than its shard files hold");
    }
    tensor_bytes += bytes;
  }
  for (const StoredTensor& stored : manifest.tensors) {
    Tensor tensor(stored.shape);
    PS_RETURN_IF_ERROR(ReadTensorRows(dir, manifest, stored, 0,
                                      tensor.num_elements() == 0 ? 0 : RowsOf(stored.shape),
                                      tensor.data()));
    contents->tensors.push_back({stored.name, std::move(tensor)});
  }
  return absl::OkStatus();
}

// Reads and parses dir/manifest.json and checks it is a pstrain manifest of a version
// this code reads; *sharded: version 2 (ps-written shards) rather than 1.
absl::StatusOr<nlohmann::json> ReadManifest(const std::string& dir, bool* sharded) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat("no checkpoint directory ", dir));
  }
  const std::string manifest_path = absl::StrCat(dir, "/", kManifest);
  absl::StatusOr<std::string> text = ReadFile(manifest_path, kMaxManifestBytes);
  if (!text.ok()) {
    return DataLoss(dir, absl::IsNotFound(text.status())
                             ? std::string("manifest.json is missing")
                             : absl::StrCat("manifest.json: ", text.status().message()));
  }
  nlohmann::json manifest = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (manifest.is_discarded() || !manifest.is_object()) {
    return DataLoss(dir, "manifest.json is not valid JSON (truncated?)");
  }
  if (StringOrEmpty(manifest, "format") != kFormat) {
    return DataLoss(dir, "manifest.json is not a pstrain checkpoint manifest");
  }
  *sharded = manifest.contains("version") && manifest["version"] == 2;
  if (!*sharded && (!manifest.contains("version") || manifest["version"] != 1)) {
    return DataLoss(
        dir, absl::StrCat(
                 "unsupported checkpoint format version ",
                 manifest.contains("version") ? manifest["version"].dump().substr(0, 24) : "(none)",
                 " (this pstrain reads versions 1 and 2)"));
  }
  return manifest;
}

// The manifest's step, epoch, job spec and metadata into `contents`.
absl::Status ReadManifestHeader(const std::string& dir, const nlohmann::json& manifest,
                                CheckpointContents* contents) {
  int64_t epoch = 0;
  if (!GetCount(manifest, "step", std::numeric_limits<int64_t>::max(), &contents->step) ||
      !manifest.contains("epoch") || !manifest.contains("tensors") ||
      !manifest["tensors"].is_array()) {
    return DataLoss(dir, "manifest.json lacks step, epoch or tensors");
  }
  // Epochs are counted in an int everywhere (2^40 used to be read as 0).
  if (!GetCount(manifest, "epoch", std::numeric_limits<int>::max(), &epoch)) {
    return DataLoss(dir, absl::StrCat("manifest.json: epoch ", manifest["epoch"].dump(),
                                      " is not a count of epochs (0 to ",
                                      std::numeric_limits<int>::max(), ")"));
  }
  contents->epoch = static_cast<int>(epoch);
  *contents->job_spec = manifest.contains("job_spec") ? manifest["job_spec"] : nlohmann::json();
  if (manifest.contains("metadata") && manifest["metadata"].is_object()) {
    *contents->metadata = manifest["metadata"];
  } else {
    *contents->metadata = nlohmann::json::object();
  }
  return absl::OkStatus();
}

// One tensor entry of a version-1 manifest, checked: its name, shape, data file and the
// bytes it spans there.
struct V1TensorEntry {
  std::string name;
  std::vector<int64_t> shape;
  std::string file;
  int64_t offset = 0;
  int64_t length = 0;
  uint32_t crc = 0;
};

absl::StatusOr<V1TensorEntry> ParseV1TensorEntry(const std::string& dir, const nlohmann::json& t) {
  V1TensorEntry entry;
  int64_t crc_value = 0;
  if (!t.is_object() || !t.contains("name") || !t["name"].is_string() || !t.contains("shape") ||
      !t["shape"].is_array() || !t.contains("file") || !t["file"].is_string() ||
      !GetCount(t, "offset", std::numeric_limits<int64_t>::max(), &entry.offset) ||
      !GetCount(t, "length", std::numeric_limits<int64_t>::max(), &entry.length) ||
      !GetCount(t, "crc32c", std::numeric_limits<uint32_t>::max(), &crc_value)) {
    return DataLoss(dir, "manifest.json has a malformed tensor entry");
  }
  entry.crc = static_cast<uint32_t>(crc_value);
  entry.name = t["name"].get<std::string>();
  const std::string& name = entry.name;
  if (StringOrEmpty(t, "dtype") != "float32") {
    return DataLoss(dir, absl::StrCat("tensor \"", name, "\" has an unsupported dtype"));
  }
  for (const nlohmann::json& d : t["shape"]) {
    if (!IsNonNegativeInt(d) ||
        (d.is_number_unsigned() &&
         d.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))) {
      return DataLoss(dir, absl::StrCat("tensor \"", name, "\" has a bad shape"));
    }
    entry.shape.push_back(d.get<int64_t>());
  }
  const int64_t elements = NumElements(entry.shape);
  if (elements < 0 || elements > kMaxTensorElements ||
      entry.length != elements * static_cast<int64_t>(sizeof(float))) {
    return DataLoss(dir, absl::StrCat("tensor \"", name, "\": length ", entry.length,
                                      " does not match shape ", ShapeToString(entry.shape)));
  }
  entry.file = t["file"].get<std::string>();
  if (entry.file.empty() || entry.file.find('/') != std::string::npos || entry.file[0] == '.') {
    return DataLoss(dir, absl::StrCat("tensor \"", name, "\" names a bad data file"));
  }
  return entry;
}

// The tensors of a version-1 checkpoint (whole tensors in data files the chief wrote),
// each checked against its CRC-32C.
absl::Status LoadV1Tensors(const std::string& dir, const nlohmann::json& manifest,
                           CheckpointContents* contents) {
  std::map<std::string, std::string> files;  // loaded lazily, once each
  std::set<std::string> seen;
  for (const nlohmann::json& t : manifest["tensors"]) {
    absl::StatusOr<V1TensorEntry> entry = ParseV1TensorEntry(dir, t);
    if (!entry.ok()) return entry.status();
    const std::string& name = entry->name;
    if (!seen.insert(name).second) {
      return DataLoss(dir, absl::StrCat("tensor \"", name, "\" listed twice"));
    }
    auto it = files.find(entry->file);
    if (it == files.end()) {
      absl::StatusOr<std::string> bytes = ReadFile(absl::StrCat(dir, "/", entry->file));
      if (!bytes.ok()) {
        return DataLoss(dir, absl::IsNotFound(bytes.status())
                                 ? absl::StrCat("data file ", entry->file, " is missing")
                                 : std::string(bytes.status().message()));
      }
      it = files.emplace(entry->file, *std::move(bytes)).first;
    }
    const std::string& bytes = it->second;
    // offset + length may pass 2^63 - 1: compared without forming the sum.
    const int64_t size = static_cast<int64_t>(bytes.size());
    if (entry->offset > size || entry->length > size - entry->offset) {
      return DataLoss(
          dir, absl::StrCat("data file ", entry->file, " is truncated: ", size, " bytes, tensor \"",
                            name, "\" needs ", entry->length, " at offset ", entry->offset));
    }
    const uint32_t crc = Crc32c(bytes.data() + entry->offset, static_cast<size_t>(entry->length));
    if (crc != entry->crc) {
      return DataLoss(dir, absl::StrFormat("tensor \"%s\" fails its CRC-32C check (%08x, "
                                           "manifest says %08x): the data file is corrupt",
                                           name, crc, entry->crc));
    }
    std::vector<float> values(static_cast<size_t>(entry->length / sizeof(float)));
    if (entry->length > 0) {
      std::memcpy(values.data(), bytes.data() + entry->offset, static_cast<size_t>(entry->length));
    }
    contents->tensors.push_back({name, Tensor(std::move(entry->shape), std::move(values))});
  }
  return absl::OkStatus();
}

absl::StatusOr<CheckpointContents> LoadContents(const std::string& dir, bool load_sharded_tensors,
                                                int* version, ShardedManifest* sharded_manifest) {
  bool sharded = false;
  absl::StatusOr<nlohmann::json> manifest = ReadManifest(dir, &sharded);
  if (!manifest.ok()) return manifest.status();
  CheckpointContents contents;
  PS_RETURN_IF_ERROR(ReadManifestHeader(dir, *manifest, &contents));
  *version = sharded ? 2 : 1;
  if (sharded) {
    PS_RETURN_IF_ERROR(
        LoadShardedTensors(dir, *manifest, load_sharded_tensors, &contents, sharded_manifest));
  } else {
    PS_RETURN_IF_ERROR(LoadV1Tensors(dir, *manifest, &contents));
  }
  return contents;
}

// Opens the newest checkpoint under `root` that verifies (see FindLatestGoodCheckpoint).
absl::StatusOr<std::pair<std::string, CheckpointContents>> LoadLatestGood(
    const std::string& root, bool load_sharded_tensors, int* version,
    ShardedManifest* sharded_manifest) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    return absl::NotFoundError(absl::StrCat("no checkpoint directory ", root));
  }
  std::vector<std::pair<int64_t, std::string>> all = ListCheckpointsIn(root);
  std::vector<std::string> candidates;
  absl::StatusOr<std::string> pointer = ReadFile(absl::StrCat(root, "/", kLatest));
  int64_t pointed_step = -1;
  std::string pointer_problem;
  if (pointer.ok()) {
    const std::string pointed(absl::StripAsciiWhitespace(*pointer));
    pointed_step = StepOfName(pointed);
    if (pointed_step < 0) {
      pointer_problem = absl::StrCat(root, "/latest does not name a checkpoint");
    } else {
      candidates.push_back(pointed);
    }
  }
  for (const auto& [step, name] : all) {
    // Older than the pointed one only: a newer one was never made `latest` (its writer
    // died before the pointer moved) and so was never complete.
    if (pointed_step >= 0 && step >= pointed_step) continue;
    candidates.push_back(name);
  }
  if (candidates.empty()) {
    if (!pointer_problem.empty()) return absl::DataLossError(pointer_problem);
    return absl::NotFoundError(absl::StrCat("no checkpoint in ", root));
  }
  absl::Status first_problem;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const std::string dir = absl::StrCat(root, "/", candidates[i]);
    absl::StatusOr<CheckpointContents> contents =
        LoadContents(dir, load_sharded_tensors, version, sharded_manifest);
    if (contents.ok()) {
      if (!first_problem.ok()) {
        LogError(absl::StrCat(first_problem.message(), "; using the previous good checkpoint ", dir,
                              " instead"));
      } else if (!pointer_problem.empty()) {
        LogError(absl::StrCat(pointer_problem, "; using ", dir));
      }
      return std::make_pair(dir, *std::move(contents));
    }
    if (first_problem.ok()) {
      first_problem = contents.status().code() == absl::StatusCode::kNotFound
                          ? DataLoss(dir, "directory is missing")
                          : contents.status();
    }
  }
  return absl::DataLossError(
      absl::StrCat("no checkpoint in ", root, " verifies; the newest: ", first_problem.message()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<CheckpointReader>> CheckpointReader::Open(
    const std::string& path_in, OpenOptions options) {
  std::string path = path_in;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  std::error_code ec;
  std::unique_ptr<CheckpointReader> reader(new CheckpointReader());
  if (fs::exists(absl::StrCat(path, "/", kManifest), ec) ||
      StepOfName(fs::path(path).filename().string()) >= 0) {
    PS_ASSIGN_OR_RETURN(reader->contents_,
                        LoadContents(path, options.load_sharded_tensors, &reader->version_,
                                     &reader->manifest_));
    reader->path_ = path;
  } else {
    PS_ASSIGN_OR_RETURN(auto found,
                        LoadLatestGood(path, options.load_sharded_tensors, &reader->version_,
                                       &reader->manifest_));
    reader->path_ = std::move(found.first);
    reader->contents_ = std::move(found.second);
  }
  reader->tensors_loaded_ = reader->version_ == 1 || options.load_sharded_tensors;
  for (size_t i = 0; i < reader->contents_.tensors.size(); ++i) {
    reader->index_[reader->contents_.tensors[i].name] = i;
  }
  return reader;
}

absl::StatusOr<std::string> FindLatestGoodCheckpoint(const std::string& root) {
  int version = 0;
  ShardedManifest unused;
  PS_ASSIGN_OR_RETURN(auto found, LoadLatestGood(root, /*load_sharded_tensors=*/true, &version,
                                                 &unused));
  return found.first;
}

std::vector<std::pair<int64_t, std::string>> ListCheckpoints(const std::string& root) {
  return ListCheckpointsIn(root);
}

}  // namespace pstrain
