#include "executor/cpu/linear.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <oneapi/dnnl/dnnl.hpp>

#include "absl/strings/str_format.h"
#include "common/half.h"
#include "common/simd.h"
#include "executor/cpu/gemm_f32.h"
#include "executor/cpu/gemv_bf16.h"
#include "executor/cpu/quant_matmul.h"
#include "model/gguf_dequantize.h"
#include "model/gguf_file.h"
#include "model/tensor_rows.h"

namespace convoy {
namespace {

// fp32 weights packed for the project's batch-invariant kernel.
class PackedF32Linear final : public Linear {
 public:
  PackedF32Linear(int64_t in, int64_t out, const float* w_out_in)
      : Linear(in, out), matrix_(w_out_in, out, in) {}

  LinearFormat format() const override { return LinearFormat::kF32; }
  bool few_row_kernel() const override { return false; }
  bool batch_invariant() const override { return true; }
  int64_t weight_bytes() const override { return in_ * out_ * 4; }
  void Forward(const float* x, int64_t m, float* y) override { matrix_.Product(x, m, y); }

 private:
  PackedF32Matrix matrix_;
};

// Weights kept in their GGUF blocks (QuantWeights: a copy of the file's bytes, the superblock
// types' repacked), one part per tensor of the fused layer since each may have its own type (a
// Q4_K_M file mixes Q4_K and Q6_K). The input is quantized to 8 bits once per product, for every
// part (quant_matmul.h). Batch-invariant: QuantMatmul computes each output from its own row in
// one fixed order.
class QuantLinear final : public Linear {
 public:
  QuantLinear(int64_t in, const std::vector<const TensorView*>& parts) : Linear(in, 0) {
    for (const TensorView* view : parts) {
      Part part{out_, QuantWeights(view->quant_type, view->data, ViewRows(*view), in)};
      weight_bytes_ += part.weights.bytes();
      superblocks_ = superblocks_ || QuantUsesSuperblocks(view->quant_type);
      out_ += part.weights.n();
      parts_.push_back(std::move(part));
    }
  }

  // Whether every part can run as it is stored.
  static bool Supports(const std::vector<const TensorView*>& parts) {
    for (const TensorView* view : parts) {
      if (view->dtype != DType::kQuantized || !QuantMatmulSupports(view->quant_type)) return false;
    }
    return true;
  }

  LinearFormat format() const override { return LinearFormat::kNative; }
  bool few_row_kernel() const override { return false; }
  bool batch_invariant() const override { return true; }
  int64_t weight_bytes() const override { return weight_bytes_; }
  bool has_quantized_rows() const override { return parts_.size() == 1; }
  void QuantizedRowToFloat(int64_t row, float* out) const override {
    const QuantWeights& w = parts_[0].weights;
    thread_local std::vector<std::byte> blocks;
    blocks.resize(w.row_bytes());
    w.CopyRow(row, blocks.data());
    DequantizeValues(w.type(), blocks.data(), in_, out);
  }
  void Forward(const float* x, int64_t m, float* y) override {
    // One quantized copy of the input per engine thread, shared by every layer: it is as large
    // as the step's widest input and is overwritten by the next product.
    thread_local QuantizedRows quantized;
    quantized.Quantize(x, m, in_, superblocks_);
    for (const Part& part : parts_) {
      QuantMatmul(part.weights, quantized, y + part.first_output, out_);
    }
  }

 private:
  struct Part {
    int64_t first_output = 0;  // this part's outputs are y's columns from here
    QuantWeights weights;
  };
  std::vector<Part> parts_;
  int64_t weight_bytes_ = 0;
  bool superblocks_ = false;  // whether a part needs the input's superblock form
};

// oneDNN keeps its weights in a blocked layout chosen once; the same layout serves every M on
// this library version, so one reordered copy backs a primitive per distinct M. fp32 and bf16
// products go through the same library and so the same OpenMP threads: a second thread pool
// (OpenBLAS's) spinning beside OpenMP's made fp32 decode ten times slower on two cores.
class DnnlLinear final : public Linear {
 public:
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;

  // `w_out_in` holds the weights [out, in] in `type` (f32 or bf16). With `batch_invariant`, every
  // product goes through the bf16 kernel where it can run (batch_invariant() says whether it can).
  DnnlLinear(int64_t in, int64_t out, dt type, const void* w_out_in, bool few_row_kernel,
             bool batch_invariant)
      : Linear(in, out), type_(type), engine_(dnnl::engine::kind::cpu, 0), stream_(engine_) {
    dnnl::memory::desc plain({in_, out_}, type_, tag::ba);  // [in, out] viewed over [out, in]
    weights_desc_ =
        PrimitiveDesc(1, dnnl::memory::desc({in_, out_}, type_, tag::any)).weights_desc();
    dnnl::memory src(plain, engine_, const_cast<void*>(w_out_in));
    weights_ = dnnl::memory(weights_desc_, engine_);
    dnnl::reorder(src, weights_).execute(stream_, src, weights_);
    stream_.wait();
    few_row_kernel_ = (few_row_kernel || batch_invariant) && type_ == dt::bf16 &&
                      Bf16GemvAvailable() && HasGemvLayout(weights_desc_.data);
    batch_invariant_ = batch_invariant && few_row_kernel_;
    k_padded_ = weights_desc_.data.padded_dims[0];
  }

  bool few_row_kernel() const override { return few_row_kernel_; }
  bool batch_invariant() const override { return batch_invariant_; }

  LinearFormat format() const override {
    return type_ == dt::bf16 ? LinearFormat::kBF16 : LinearFormat::kF32;
  }
  int64_t weight_bytes() const override { return in_ * out_ * (type_ == dt::bf16 ? 2 : 4); }

  void Forward(const float* x, int64_t m, float* y) override {
    void* src_data = const_cast<float*>(x);
    if (few_row_kernel_ && (batch_invariant_ || m <= kBf16GemvMaxRows)) {
      // The kernel reads rows k_padded_ long, zero beyond in_.
      thread_local std::vector<uint16_t> rows;
      if (static_cast<int64_t>(rows.size()) < m * k_padded_) rows.resize(m * k_padded_);
      uint16_t* const converted = rows.data();  // this thread's buffer, shared with the team
#pragma omp parallel for schedule(static) if (m * in_ >= (int64_t{1} << 16))
      for (int64_t r = 0; r < m; ++r) {
        ConvertToBF16(x + r * in_, converted + r * k_padded_, in_);
        std::fill(converted + r * k_padded_ + in_, converted + (r + 1) * k_padded_, 0);
      }
      Bf16Gemv(static_cast<const uint16_t*>(weights_.get_data_handle()), k_padded_, out_, converted,
               m, y);
      return;
    }
    if (type_ == dt::bf16) {
      // bf16 copy of the activations, shared by every layer of the thread that runs the step.
      thread_local std::vector<uint16_t> src_bf16;
      const int64_t n = m * in_;
      if (static_cast<int64_t>(src_bf16.size()) < n) src_bf16.resize(n);
      ConvertToBF16(x, src_bf16.data(), n);
      src_data = src_bf16.data();
    }
    const dnnl::matmul& matmul = MatmulFor(m);
    dnnl::memory src({{m, in_}, type_, tag::ab}, engine_, src_data);
    dnnl::memory dst({{m, out_}, dt::f32, tag::ab}, engine_, y);
    matmul.execute(stream_,
                   {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights_}, {DNNL_ARG_DST, dst}});
    stream_.wait();
  }

 private:
  // Creating a primitive takes about 0.1 ms (oneDNN caches the generated code), so a small cache
  // by M suffices; it is emptied when full rather than growing with every batch shape seen.
  static constexpr size_t kMaxCachedShapes = 64;

  dnnl::matmul::primitive_desc PrimitiveDesc(int64_t m, const dnnl::memory::desc& weights) {
    dnnl::memory::desc src({m, in_}, type_, tag::ab);
    dnnl::memory::desc dst({m, out_}, dt::f32, tag::ab);
    return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, weights, dst), engine_);
  }

  const dnnl::matmul& MatmulFor(int64_t m) {
    auto it = matmuls_.find(m);
    if (it != matmuls_.end()) return it->second;
    if (matmuls_.size() >= kMaxCachedShapes) matmuls_.clear();
    return matmuls_.emplace(m, dnnl::matmul(PrimitiveDesc(m, weights_desc_))).first->second;
  }

  // Whether oneDNN laid the weights out as the few-row kernel reads them (gemv_bf16.h): a [k, n]
  // bf16 matrix blocked "BA16a64b2a", which oneDNN 2.6 picks for every shape on AVX-512 BF16.
  static bool HasGemvLayout(const dnnl_memory_desc_t& d) {
    const dnnl_blocking_desc_t& b = d.format_desc.blocking;
    return d.ndims == 2 && d.format_kind == dnnl_blocked && d.offset0 == 0 && b.inner_nblks == 3 &&
           b.inner_blks[0] == kBf16GemvInputBlock / 2 && b.inner_idxs[0] == 0 &&
           b.inner_blks[1] == kBf16GemvOutputBlock && b.inner_idxs[1] == 1 &&
           b.inner_blks[2] == 2 && b.inner_idxs[2] == 0 &&
           b.strides[0] == kBf16GemvInputBlock * kBf16GemvOutputBlock &&
           b.strides[1] == d.padded_dims[0] * kBf16GemvOutputBlock &&
           d.padded_dims[0] % kBf16GemvInputBlock == 0 &&
           d.padded_dims[1] % kBf16GemvOutputBlock == 0;
  }

  dt type_;
  bool few_row_kernel_ = false;
  bool batch_invariant_ = false;
  int64_t k_padded_ = 0;
  dnnl::engine engine_;
  dnnl::stream stream_;
  dnnl::memory::desc weights_desc_;
  dnnl::memory weights_;
  std::map<int64_t, dnnl::matmul> matmuls_;  // by M
};

}  // namespace

const char* CpuIsaName(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41:
      return "SSE4.1";
    case dnnl::cpu_isa::avx:
      return "AVX";
    case dnnl::cpu_isa::avx2:
      return "AVX2";
    case dnnl::cpu_isa::avx2_vnni:
      return "AVX2 VNNI";
    case dnnl::cpu_isa::avx512_core:
      return "AVX-512";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "AVX-512 VNNI";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "AVX-512 BF16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "AVX-512 AMX";
    default:
      return "other";
  }
}

bool Bf16MatmulAvailable(std::string* reason) {
  struct Probe {
    bool available = false;
    std::string reason;
  };
  static const Probe probe = [] {
    Probe p;
    try {
      dnnl::engine engine(dnnl::engine::kind::cpu, 0);
      using tag = dnnl::memory::format_tag;
      using dt = dnnl::memory::data_type;
      dnnl::memory::desc src({1, 64}, dt::bf16, tag::ab);
      dnnl::memory::desc weights({64, 64}, dt::bf16, tag::any);
      dnnl::memory::desc dst({1, 64}, dt::f32, tag::ab);
      dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, weights, dst), engine);
      p.available = true;
    } catch (const dnnl::error& e) {
      p.reason = absl::StrFormat("oneDNN (instruction set %s): %s",
                                 CpuIsaName(dnnl::get_effective_cpu_isa()), e.what());
    }
    return p;
  }();
  if (reason != nullptr) *reason = probe.reason;
  return probe.available;
}

void AppendAsFloat(const TensorView& view, std::vector<float>* out) {
  const size_t base = out->size();
  out->resize(base + view.NumElements());
  ViewRowsToFloat(view, 0, ViewRows(view), out->data() + base);
}

absl::StatusOr<std::unique_ptr<Linear>> Linear::Create(const std::vector<const TensorView*>& parts,
                                                       LinearFormat format, bool few_row_kernel,
                                                       bool batch_invariant) {
  if (parts.empty()) return absl::InvalidArgumentError("Linear::Create: no weights");
  const int64_t in = parts[0]->shape.at(1);
  int64_t out = 0;
  for (const TensorView* p : parts) {
    if (p->shape.size() != 2 || p->shape[1] != in) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: a fused linear layer needs [out, %d] weights, found %d dimensions",
                          p->name, in, p->shape.size()));
    }
    out += p->shape[0];
  }
  if (format == LinearFormat::kNative) {
    if (QuantLinear::Supports(parts)) {
      try {
        return std::make_unique<QuantLinear>(in, parts);
      } catch (const std::bad_alloc&) {
        return absl::ResourceExhaustedError(
            absl::StrFormat("no memory for the quantized weights of %s", parts[0]->name));
      }
    }
    // Weights stored unquantized (or in a type without a native kernel): fp32, as asked then.
    format = LinearFormat::kF32;
  }
  std::vector<float> w;
  w.reserve(in * out);
  for (const TensorView* p : parts) AppendAsFloat(*p, &w);
  try {
    if (batch_invariant) {
      if (format == LinearFormat::kBF16 && Bf16MatmulAvailable() && Bf16GemvAvailable()) {
        std::vector<uint16_t> wb(w.size());
        for (size_t i = 0; i < w.size(); ++i) wb[i] = FloatToBF16(w[i]);
        try {
          auto bf16 = std::make_unique<DnnlLinear>(in, out, dnnl::memory::data_type::bf16,
                                                   wb.data(), true, true);
          if (bf16->batch_invariant()) return bf16;
        } catch (const dnnl::error& e) {
          if (e.status != dnnl_unimplemented) throw;
        }
      }
      // No bf16 kernel for this layer here: it keeps fp32 weights (format() says so).
      return std::make_unique<PackedF32Linear>(in, out, w.data());
    }
    if (format == LinearFormat::kF32 || !Bf16MatmulAvailable()) {
      return std::make_unique<DnnlLinear>(in, out, dnnl::memory::data_type::f32, w.data(), false,
                                          false);
    }
    std::vector<uint16_t> wb(w.size());
    for (size_t i = 0; i < w.size(); ++i) wb[i] = FloatToBF16(w[i]);
    try {
      return std::make_unique<DnnlLinear>(in, out, dnnl::memory::data_type::bf16, wb.data(),
                                          few_row_kernel, false);
    } catch (const dnnl::error& e) {
      if (e.status != dnnl_unimplemented) throw;
      // No bf16 product for this shape: this layer keeps fp32 weights (format() says so).
    }
    return std::make_unique<DnnlLinear>(in, out, dnnl::memory::data_type::f32, w.data(), false,
                                        false);
  } catch (const dnnl::error& e) {
    return absl::InternalError(
        absl::StrFormat("oneDNN matmul for %s: %s", parts[0]->name, e.what()));
  }
}

}  // namespace convoy
