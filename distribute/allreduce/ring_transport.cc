#include "distribute/allreduce/ring_transport.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace pstrain {
namespace {

// Floats staged at a time when the pieces are read: small enough to stay in L1, so the
// staging copy costs next to nothing beside the read from memory.
constexpr size_t kStageFloats = 1024;

// Calls op(out_block, staged_block, count) for consecutive blocks of the chunk, the
// staged floats assembled from `pieces` (which may split a float).
template <typename Op>
void ForEachBlock(const std::vector<absl::Span<const char>>& pieces, absl::Span<float> out,
                  Op op) {
  alignas(64) float stage[kStageFloats];
  char* stage_bytes = reinterpret_cast<char*>(stage);
  size_t staged = 0;  // bytes in stage
  size_t done = 0;    // floats of `out` already handled
  for (absl::Span<const char> piece : pieces) {
    while (!piece.empty()) {
      const size_t take = std::min(piece.size(), sizeof(stage) - staged);
      std::memcpy(stage_bytes + staged, piece.data(), take);
      staged += take;
      piece.remove_prefix(take);
      if (staged == sizeof(stage)) {
        op(out.data() + done, stage, kStageFloats);
        done += kStageFloats;
        staged = 0;
      }
    }
  }
  if (staged >= sizeof(float)) op(out.data() + done, stage, staged / sizeof(float));
}

void Add(float* __restrict out, const float* __restrict in, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] += in[i];
}

}  // namespace

ChunkData::ChunkData(std::vector<float> values)
    : values_(std::move(values)), bytes_(values_.size() * sizeof(float)) {}

ChunkData::ChunkData(std::vector<absl::Span<const char>> pieces,
                     std::shared_ptr<const void> owner)
    : pieces_(std::move(pieces)), owner_(std::move(owner)) {
  for (absl::Span<const char> p : pieces_) bytes_ += p.size();
}

void ChunkData::AddTo(absl::Span<float> out) const {
  if (pieces_.empty()) {
    Add(out.data(), values_.data(), std::min(out.size(), values_.size()));
    return;
  }
  ForEachBlock(pieces_, out, [](float* o, const float* in, size_t n) { Add(o, in, n); });
}

void ChunkData::CopyTo(absl::Span<float> out) const {
  if (pieces_.empty()) {
    if (!values_.empty()) {
      std::memcpy(out.data(), values_.data(), sizeof(float) * std::min(out.size(), values_.size()));
    }
    return;
  }
  char* dest = reinterpret_cast<char*>(out.data());
  for (absl::Span<const char> piece : pieces_) {
    std::memcpy(dest, piece.data(), piece.size());
    dest += piece.size();
  }
}

std::vector<float> ChunkData::ToVector() const {
  std::vector<float> out(size());
  CopyTo(absl::MakeSpan(out));
  return out;
}

}  // namespace pstrain
