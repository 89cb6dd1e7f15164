// A linear layer y = x W^T over fp32 activations, through oneDNN's matmul. The weights are
// converted and reordered once, at load, into oneDNN's blocked layout: fp32, or bf16 (activations
// rounded to bf16, fp32 accumulation and output).
#ifndef CONVOY_EXECUTOR_CPU_LINEAR_H_
#define CONVOY_EXECUTOR_CPU_LINEAR_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "model/safetensors.h"

namespace convoy {

enum class LinearFormat { kF32, kBF16 };

class Linear {
 public:
  // Stacks `parts` (each [out_i, in], Hugging Face layout, any dtype) along the output dimension:
  // one fused product for Q/K/V or gate/up.
  static absl::StatusOr<std::unique_ptr<Linear>> Create(const std::vector<const TensorView*>& parts,
                                                        LinearFormat format);
  virtual ~Linear() = default;

  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }
  // Bytes of weights one product reads.
  virtual int64_t weight_bytes() const = 0;
  // y[m, out] = x[m, in] W^T; x and y are row-major with leading dimensions in and out.
  virtual void Forward(const float* x, int64_t m, float* y) = 0;

 protected:
  Linear(int64_t in, int64_t out) : in_(in), out_(out) {}
  int64_t in_;
  int64_t out_;
};

// Copies `view` (any dtype) into `out` as fp32, appending.
void AppendAsFloat(const TensorView& view, std::vector<float>* out);

}  // namespace convoy

#endif  // CONVOY_EXECUTOR_CPU_LINEAR_H_
