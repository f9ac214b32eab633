#include "common/checkpoint/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/checkpoint/durable_file.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors data is little-endian float32, copied as is");

namespace pstrain {

std::vector<std::string> ModelVariableNames(const CheckpointReader& checkpoint) {
  std::vector<std::string> names;
  const nlohmann::json& metadata = checkpoint.metadata();
  const bool listed = metadata.contains("variables") && metadata["variables"].is_object();
  for (const NamedTensor& t : checkpoint.tensors()) {
    const bool is_variable =
        listed ? metadata["variables"].contains(t.name) : !absl::StrContains(t.name, "/optimizer/");
    if (is_variable) names.push_back(t.name);
  }
  return names;
}

absl::Status WriteSafetensors(const CheckpointReader& checkpoint,
                              const std::vector<std::string>& names,
                              const std::map<std::string, std::string>& metadata,
                              const std::string& out_path) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<const Tensor*> tensors;
  std::set<std::string> seen;
  int64_t offset = 0;
  for (const std::string& name : names) {
    if (name == "__metadata__" || !seen.insert(name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot export tensor name \"", name, "\" (reserved or repeated)"));
    }
    PS_ASSIGN_OR_RETURN(const Tensor* t, checkpoint.Get(name));
    const int64_t bytes = t->num_elements() * static_cast<int64_t>(sizeof(float));
    header[name] = {
        {"dtype", "F32"}, {"shape", t->shape()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    tensors.push_back(t);
  }
  std::string text = header.dump();
  // The data must start 8-byte aligned (8 bytes of length + header); the format pads the
  // header with trailing spaces.
  while (text.size() % 8 != 0) text.push_back(' ');
  unsigned char length[8];
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(n >> (8 * i));

  const std::string temp = absl::StrCat(out_path, ".tmp-", ::getpid());
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("cannot create", temp);
  absl::Status written = [&]() -> absl::Status {
    PS_RETURN_IF_ERROR(WriteAll(fd, length, sizeof(length), temp));
    PS_RETURN_IF_ERROR(WriteAll(fd, text.data(), text.size(), temp));
    for (const Tensor* t : tensors) {
      PS_RETURN_IF_ERROR(WriteAll(fd, t->data(), t->num_elements() * sizeof(float), temp));
    }
    if (::fsync(fd) != 0) return ErrnoError("cannot fsync", temp);
    return absl::OkStatus();
  }();
  if (::close(fd) != 0 && written.ok()) written = ErrnoError("cannot close", temp);
  if (written.ok() && ::rename(temp.c_str(), out_path.c_str()) != 0) {
    written = ErrnoError("cannot rename to", out_path);
  }
  if (!written.ok()) ::unlink(temp.c_str());
  return written;
}

}  // namespace pstrain
