// A linear layer y = x W^T over fp32 activations. The weights are converted and laid out once, at
// load: fp32, or bf16 (activations rounded to bf16, fp32 accumulation and output), or kept in
// their GGUF blocks (activations quantized to 8 bits per group of 32, quant_matmul.h).
//
// Batch-invariant layers compute every output element the same way whatever the number of rows
// and whatever the other rows hold: fp32 weights through the project's kernel (gemm_f32.h), bf16
// weights through the project's bf16 kernel (gemv_bf16.h) over weights oneDNN reordered at load.
// Other layers run through oneDNN's matmul, whose result for a row depends on M; with bf16 weights
// on a CPU with AVX-512 BF16 a product of at most kBf16GemvMaxRows rows (a decode step) then goes
// through the bf16 kernel.
#ifndef CONVOY_EXECUTOR_CPU_LINEAR_H_
#define CONVOY_EXECUTOR_CPU_LINEAR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/safetensors.h"

namespace convoy {

// kNative: the weights stay in their GGUF blocks and run through quant_matmul.h (quantized
// tensors only; other tensors asked for kNative get kF32).
enum class LinearFormat { kF32, kBF16, kNative };

class Linear {
 public:
  // Stacks `parts` (each [out_i, in], Hugging Face layout, any dtype) along the output dimension:
  // one fused product for Q/K/V or gate/up. `batch_invariant` asks for a layer whose rows do not
  // depend on M (bf16 then only where the bf16 kernel runs; fp32 weights elsewhere). Otherwise
  // `few_row_kernel` false keeps every product in oneDNN (benchmarks compare the two).
  static absl::StatusOr<std::unique_ptr<Linear>> Create(const std::vector<const TensorView*>& parts,
                                                        LinearFormat format,
                                                        bool few_row_kernel = true,
                                                        bool batch_invariant = false);
  virtual ~Linear() = default;

  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }
  // The format the weights are kept in: bf16 was asked for and oneDNN has a bf16 product here;
  // kNative when they were asked for and are quantized in a type quant_matmul.h runs.
  virtual LinearFormat format() const = 0;
  // Whether products of few rows go through the project's bf16 kernel rather than oneDNN.
  virtual bool few_row_kernel() const = 0;
  // Whether y's row r is the same bits for the same x row r whatever m and the other rows.
  virtual bool batch_invariant() const = 0;
  // Bytes of weights one product reads.
  virtual int64_t weight_bytes() const = 0;
  // Whether the layer is one quantized tensor kept in its blocks (kNative); then
  // QuantizedRowToFloat gives W's rows (the dequantizer's values). A tied embedding looks its rows
  // up there rather than keeping a second copy of the table.
  virtual bool has_quantized_rows() const { return false; }
  // Row `row` of W, in_features() floats at `out`. REQUIRES: has_quantized_rows().
  virtual void QuantizedRowToFloat(int64_t /*row*/, float* /*out*/) const {}
  // y[m, out] = x[m, in] W^T; x and y are row-major with leading dimensions in and out.
  virtual void Forward(const float* x, int64_t m, float* y) = 0;

 protected:
  Linear(int64_t in, int64_t out) : in_(in), out_(out) {}
  int64_t in_;
  int64_t out_;
};

// Whether this CPU and oneDNN build have a bf16 matrix product (oneDNN 2.6 needs AVX-512 for one;
// it has none on an AVX2-only CPU). Probed once, with a small product. When it is false,
// `reason` (if given) gets oneDNN's answer and the instruction set it found.
bool Bf16MatmulAvailable(std::string* reason = nullptr);

// Copies `view` (any storage, quantized blocks included) into `out` as fp32, appending.
void AppendAsFloat(const TensorView& view, std::vector<float>* out);

}  // namespace convoy

#endif  // CONVOY_EXECUTOR_CPU_LINEAR_H_
