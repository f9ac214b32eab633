#include "distribute/allreduce/in_process_ring.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace pstrain {

class InProcessRing::Transport : public RingTransport {
 public:
  Transport(InProcessRing* ring, int rank) : ring_(ring), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return ring_->size(); }
  std::string PeerName(int rank) const override { return absl::StrCat("worker ", rank); }

  absl::Status SendToNext(const ChunkKey& key, absl::Span<const float> data,
                          absl::Duration timeout) override {
    (void)timeout;
    const int next = (rank_ + 1) % size();
    if (ring_->dead(rank_)) return absl::CancelledError("this rank was killed");
    if (ring_->dead(next)) {
      return absl::UnavailableError(absl::StrCat(PeerName(next), ": connection refused"));
    }
    ring_->mailboxes_[next]->Deliver(key, std::vector<float>(data.begin(), data.end()));
    return absl::OkStatus();
  }

  absl::StatusOr<ChunkData> TryReceive(const ChunkKey& key, absl::Duration wait) override {
    return ring_->mailboxes_[rank_]->Take(key, wait);
  }

 private:
  InProcessRing* const ring_;
  const int rank_;
};

InProcessRing::InProcessRing(int size) : dead_(size, false) {
  for (int r = 0; r < size; ++r) mailboxes_.push_back(std::make_unique<ChunkMailbox>());
  for (int r = 0; r < size; ++r) transports_.push_back(std::make_unique<Transport>(this, r));
}

void InProcessRing::Kill(int rank) {
  absl::MutexLock lock(&mu_);
  dead_[rank] = true;
}

bool InProcessRing::dead(int rank) const {
  absl::MutexLock lock(&mu_);
  return dead_[rank];
}

}  // namespace pstrain
