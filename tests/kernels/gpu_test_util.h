// Helpers for the GPU tests: a skip when there is no device, device arrays, random inputs, bf16
// rounding and the relative error the kernel tests report.
#ifndef CONVOY_TESTS_KERNELS_GPU_TEST_UTIL_H_
#define CONVOY_TESTS_KERNELS_GPU_TEST_UTIL_H_

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "common/half.h"
#include "executor/cuda/cuda_executor.h"
#include "gtest/gtest.h"

// Skips where there is no GPU, or fails when CONVOY_REQUIRE_GPU=1 says one must be there (the
// device run of scripts/gpu-check.sh: a test that skips there would look like a pass).
#define CONVOY_SKIP_WITHOUT_GPU()                                                             \
  do {                                                                                        \
    if (!::convoy::CudaDeviceAvailable()) {                                                   \
      if (::convoy::testing::GpuRequired()) FAIL() << "no usable GPU (CONVOY_REQUIRE_GPU=1)"; \
      GTEST_SKIP() << "no GPU";                                                               \
    }                                                                                         \
  } while (false)

#define CUDA_ASSERT_OK(expr)                                                                 \
  do {                                                                                       \
    const cudaError_t convoy_err_ = (expr);                                                  \
    ASSERT_EQ(convoy_err_, cudaSuccess) << #expr << ": " << cudaGetErrorString(convoy_err_); \
  } while (false)

namespace convoy::testing {

inline bool GpuRequired() {
  const char* value = std::getenv("CONVOY_REQUIRE_GPU");
  return value != nullptr && std::string(value) == "1";
}

// Device memory holding `count` elements of T, poisoned with 0xff bytes (NaN for floats and bf16).
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t count) : count_(count) {
    if (cudaMalloc(reinterpret_cast<void**>(&data_), std::max<size_t>(1, count) * sizeof(T)) !=
        cudaSuccess)
      data_ = nullptr;
    if (data_ != nullptr) cudaMemset(data_, 0xff, count * sizeof(T));
  }
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) { Upload(host); }
  ~DeviceArray() { cudaFree(data_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  void Upload(const std::vector<T>& host) {
    cudaMemcpy(data_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
  }
  std::vector<T> Download() const {
    std::vector<T> host(count_);
    cudaMemcpy(host.data(), data_, count_ * sizeof(T), cudaMemcpyDeviceToHost);
    return host;
  }
  T* get() const { return data_; }
  size_t size() const { return count_; }

 private:
  T* data_ = nullptr;
  size_t count_ = 0;
};

inline std::vector<float> RandomFloats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

inline std::vector<uint16_t> ToBF16(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = FloatToBF16(v[i]);
  return out;
}

inline std::vector<float> FromBF16(const std::vector<uint16_t>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = BF16ToFloat(v[i]);
  return out;
}

// Values as the device sees them after rounding to bf16.
inline std::vector<float> RoundBF16(const std::vector<float>& v) { return FromBF16(ToBF16(v)); }

// ||got - want|| / ||want||; infinite when anything is NaN (an unwritten, poisoned element).
inline double RelativeError(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return INFINITY;
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i])) return INFINITY;
    num += (double{got[i]} - want[i]) * (double{got[i]} - want[i]);
    den += double{want[i]} * want[i];
  }
  return den > 0.0 ? std::sqrt(num / den) : std::sqrt(num);
}

// One line per kernel that scripts/gpu-check.sh collects into its table.
inline void ReportError(const std::string& name, double error) {
  std::printf("GPU_CHECK kernel %s rel_err %.3e\n", name.c_str(), error);
}

}  // namespace convoy::testing

#endif  // CONVOY_TESTS_KERNELS_GPU_TEST_UTIL_H_
