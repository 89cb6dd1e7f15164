// Owning handles for device and pinned host memory.
#ifndef CONVOY_EXECUTOR_CUDA_DEVICE_BUFFER_H_
#define CONVOY_EXECUTOR_CUDA_DEVICE_BUFFER_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

#include "absl/status/statusor.h"
#include "convoy/status_macros.h"
#include "executor/cuda/cuda_check.h"

namespace convoy::cuda {

// Memory from `Alloc`, given back with `Free` on destruction. Movable, not copyable.
template <cudaError_t (*Alloc)(void**, size_t), cudaError_t (*Free)(void*)>
class CudaBuffer {
 public:
  CudaBuffer() = default;
  static absl::StatusOr<CudaBuffer> Allocate(size_t bytes) {
    CudaBuffer buffer;
    if (bytes == 0) return buffer;
    CUDA_RETURN_IF_ERROR(Alloc(&buffer.data_, bytes));
    buffer.bytes_ = bytes;
    return buffer;
  }
  ~CudaBuffer() { Reset(); }
  CudaBuffer(CudaBuffer&& other) noexcept { *this = std::move(other); }
  CudaBuffer& operator=(CudaBuffer&& other) noexcept {
    if (this != &other) {
      Reset();
      data_ = std::exchange(other.data_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  CudaBuffer(const CudaBuffer&) = delete;
  CudaBuffer& operator=(const CudaBuffer&) = delete;

  void* get() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t size() const { return bytes_; }
  void Reset() {
    if (data_ != nullptr) Free(data_);  // nothing useful to do with an error here
    data_ = nullptr;
    bytes_ = 0;
  }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

inline cudaError_t MallocDevice(void** p, size_t bytes) { return cudaMalloc(p, bytes); }
inline cudaError_t MallocPinned(void** p, size_t bytes) { return cudaMallocHost(p, bytes); }

// cudaMalloc'd memory.
using DeviceBuffer = CudaBuffer<MallocDevice, cudaFree>;
// cudaMallocHost'd (pinned) memory, so that copies to the device run asynchronously.
using PinnedBuffer = CudaBuffer<MallocPinned, cudaFreeHost>;

}  // namespace convoy::cuda

#endif  // CONVOY_EXECUTOR_CUDA_DEVICE_BUFFER_H_
