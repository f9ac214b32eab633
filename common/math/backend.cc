#include "common/math/backend.h"

namespace pstrain {

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    Reset();
    backend_ = other.backend_;
    data_ = other.data_;
    size_ = other.size_;
    other.backend_ = nullptr;
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

void DeviceBuffer::Reset() {
  if (data_ != nullptr && backend_ != nullptr) backend_->Free(data_);
  backend_ = nullptr;
  data_ = nullptr;
  size_ = 0;
}

}  // namespace pstrain
