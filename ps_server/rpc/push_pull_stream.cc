#include "ps_server/rpc/push_pull_stream.h"

#include <algorithm>
#include <limits>
#include <utility>

namespace pstrain {
namespace {

// Up-front reservation cap, over all the tensors of one stream: beyond it tensors grow as
// their bytes arrive, so a hostile header (many huge shapes) cannot make the ps reserve
// memory it will never receive.
constexpr int64_t kMaxReserveBytes = int64_t{256} << 20;

}  // namespace

void ForEachChunk(absl::Span<const int64_t> tensor_bytes, int64_t chunk_bytes,
                  const std::function<bool(int, int64_t, int64_t)>& chunk) {
  chunk_bytes = std::max<int64_t>(1, chunk_bytes);
  for (size_t t = 0; t < tensor_bytes.size(); ++t) {
    for (int64_t offset = 0; offset < tensor_bytes[t]; offset += chunk_bytes) {
      if (!chunk(static_cast<int>(t), offset, std::min(chunk_bytes, tensor_bytes[t] - offset))) {
        return;
      }
    }
  }
}

void TensorHeader(const Tensor& tensor, DataType dtype, TensorProto* header) {
  header->set_dtype(dtype);
  for (int64_t d : tensor.shape()) header->add_shape(d);
}

absl::Status TensorAssembler::Start(const std::vector<const TensorProto*>& headers,
                                    std::vector<std::string> labels) {
  tensors_.clear();
  int64_t reserve_left = kMaxReserveBytes;
  labels_ = std::move(labels);
  labels_.resize(headers.size());
  tensors_.resize(headers.size());
  for (size_t i = 0; i < headers.size(); ++i) {
    const TensorProto& h = *headers[i];
    absl::StatusOr<WirePrecision> precision = WirePrecisionOf(h.dtype());
    if (!precision.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(labels_[i], ": ", precision.status().message()));
    }
    std::vector<int64_t> shape(h.shape().begin(), h.shape().end());
    const int64_t n = NumElements(shape);
    if (n < 0 || n > std::numeric_limits<int64_t>::max() / 4) {
      return absl::InvalidArgumentError(
          absl::StrCat(labels_[i], ": shape ", ShapeToString(shape), " is invalid"));
    }
    if (!h.content().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          labels_[i], ": a streamed tensor's header carries no content (its bytes come as "
                      "chunks)"));
    }
    Pending& p = tensors_[i];
    p.shape = std::move(shape);
    p.precision = *precision;
    // n <= INT64_MAX / 4 (checked above): no overflow.
    p.bytes = n * WireBytesPerElement(*precision);
    if (p.bytes <= reserve_left) {
      p.values.reserve(static_cast<size_t>(p.bytes / 4));
      reserve_left -= p.bytes;
    }
  }
  return absl::OkStatus();
}

absl::Status TensorAssembler::Place(int64_t tensor, int64_t offset, int64_t size, char** dest) {
  if (tensor < 0 || tensor >= static_cast<int64_t>(tensors_.size())) {
    return absl::InvalidArgumentError(absl::StrCat("chunk for tensor ", tensor, " of ",
                                                   tensors_.size()));
  }
  Pending& p = tensors_[tensor];
  if (offset != p.received) {
    return absl::InvalidArgumentError(absl::StrCat(
        labels_[tensor], ": chunk at byte ", offset, " but ", p.received,
        " bytes had arrived (chunks must come in order, none missing)"));
  }
  if (size > p.bytes - p.received) {
    return absl::InvalidArgumentError(absl::StrCat(labels_[tensor], ": chunk of ", size,
                                                   " bytes at byte ", offset, " runs past its ",
                                                   p.bytes, " bytes"));
  }
  // Grown one chunk at a time (zero-filled just before it is overwritten, while it is in
  // cache); the reservation in Start avoids reallocating within kMaxReserveBytes.
  p.values.resize(static_cast<size_t>((p.received + size + 3) / 4));
  *dest = reinterpret_cast<char*>(p.values.data()) + p.received;
  p.received += size;
  return absl::OkStatus();
}

absl::Status TensorAssembler::Finish() const {
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (tensors_[i].received != tensors_[i].bytes) {
      return absl::InvalidArgumentError(absl::StrCat(labels_[i], ": got ",
                                                     tensors_[i].received, " of its ",
                                                     tensors_[i].bytes, " bytes"));
    }
  }
  return absl::OkStatus();
}

int64_t TensorAssembler::wire_bytes() const {
  int64_t bytes = 0;
  for (const Pending& p : tensors_) bytes += p.received;
  return bytes;
}

std::vector<Tensor> TensorAssembler::Take() {
  std::vector<Tensor> out;
  out.reserve(tensors_.size());
  for (Pending& p : tensors_) {
    if (p.precision == WirePrecision::kFloat32) {
      p.values.resize(static_cast<size_t>(p.bytes / 4));
      out.emplace_back(std::move(p.shape), std::move(p.values));
      continue;
    }
    Tensor widened(std::move(p.shape));
    DecodeFromWire(p.precision,
                   absl::string_view(reinterpret_cast<const char*>(p.values.data()),
                                     static_cast<size_t>(p.bytes)),
                   widened.values());
    out.push_back(std::move(widened));
    p.values = std::vector<float>();
  }
  tensors_.clear();
  return out;
}

}  // namespace pstrain
