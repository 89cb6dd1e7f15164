// Each kernel against a plain CPU reference on random inputs at odd sizes, outputs poisoned.
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/embedding.cuh"
#include "kernels/fill_random.cuh"
#include "kernels/gpu_test_util.h"
#include "kernels/kv_write.cuh"
#include "kernels/rms_norm.cuh"
#include "kernels/rotary.cuh"
#include "kernels/silu_mul.cuh"
#include "kernels/soft_cap.cuh"

namespace convoy {
namespace {

using kernels::HalfType;
using testing::DeviceArray;
using testing::FromBF16;
using testing::RandomFloats;
using testing::RelativeError;
using testing::ReportError;
using testing::RoundBF16;
using testing::ToBF16;

// Rows gathered by id (ids outside the vocabulary give zeros), times `scale`.
void CheckEmbedding(float scale) {
  const int64_t vocab = 1001, hidden = 136, tokens = 37;
  const std::vector<float> table = RoundBF16(RandomFloats(vocab * hidden, 1));
  std::vector<int32_t> ids(tokens);
  for (int64_t t = 0; t < tokens; ++t) ids[t] = static_cast<int32_t>((t * 389 + 7) % vocab);
  ids[5] = -1;
  ids[9] = static_cast<int32_t>(vocab);
  DeviceArray<uint16_t> d_table(ToBF16(table));
  DeviceArray<int32_t> d_ids(ids);
  DeviceArray<float> d_out(tokens * hidden);
  kernels::EmbeddingParams p;
  p.table = d_table.get();
  p.token_ids = d_ids.get();
  p.out = d_out.get();
  p.num_tokens = tokens;
  p.hidden = hidden;
  p.vocab = vocab;
  p.scale = scale;
  CUDA_ASSERT_OK(kernels::LaunchEmbedding(p, nullptr));
  CUDA_ASSERT_OK(cudaDeviceSynchronize());
  std::vector<float> want(tokens * hidden, 0.0f);
  for (int64_t t = 0; t < tokens; ++t) {
    if (ids[t] < 0 || ids[t] >= vocab) continue;
    for (int64_t i = 0; i < hidden; ++i) want[t * hidden + i] = table[ids[t] * hidden + i] * scale;
  }
  const double err = RelativeError(d_out.Download(), want);
  ReportError(scale == 1.0f ? "embedding" : "embedding_scaled", err);
  EXPECT_EQ(err, 0.0);
}

TEST(EmbeddingKernel, GathersRowsAndZeroesBadIds) {
  CONVOY_SKIP_WITHOUT_GPU();
  CheckEmbedding(1.0f);
}

// Gemma's embeddings times sqrt(hidden).
TEST(EmbeddingKernel, ScalesRows) {
  CONVOY_SKIP_WITHOUT_GPU();
  CheckEmbedding(std::sqrt(1152.0f));
}

TEST(EmbeddingKernel, RejectsBadShapes) {
  kernels::EmbeddingParams p;
  EXPECT_EQ(kernels::LaunchEmbedding(p, nullptr), cudaErrorInvalidValue);
}

void CheckRmsNorm(bool with_delta, bool with_index) {
  const int64_t rows = 13, hidden = 1100, out_rows = with_index ? 5 : rows;
  const float eps = 1e-5f;
  std::vector<float> residual = RandomFloats(rows * hidden, 2, 3.0f);
  const std::vector<float> delta = RandomFloats(rows * hidden, 3);
  const std::vector<float> weight = RoundBF16(RandomFloats(hidden, 4));
  const std::vector<int32_t> index = {12, 0, 7, 3, 9};
  DeviceArray<float> d_residual(residual);
  DeviceArray<float> d_delta(delta);
  DeviceArray<uint16_t> d_weight(ToBF16(weight));
  DeviceArray<int32_t> d_index(index);
  DeviceArray<uint16_t> d_out(out_rows * hidden);
  kernels::RmsNormParams p;
  p.residual = d_residual.get();
  p.delta = with_delta ? d_delta.get() : nullptr;
  p.weight = d_weight.get();
  p.out = d_out.get();
  p.row_index = with_index ? d_index.get() : nullptr;
  p.num_rows = out_rows;
  p.hidden = hidden;
  p.eps = eps;
  CUDA_ASSERT_OK(kernels::LaunchRmsNorm(p, nullptr));
  CUDA_ASSERT_OK(cudaDeviceSynchronize());
  std::vector<float> want(out_rows * hidden);
  std::vector<float> want_residual = residual;
  for (int64_t r = 0; r < out_rows; ++r) {
    const int64_t src = with_index ? index[r] : r;
    double sum_sq = 0.0;
    for (int64_t i = 0; i < hidden; ++i) {
      float& x = want_residual[src * hidden + i];
      if (with_delta) x += delta[src * hidden + i];
      sum_sq += double{x} * x;
    }
    const double inv = 1.0 / std::sqrt(sum_sq / hidden + eps);
    for (int64_t i = 0; i < hidden; ++i) {
      want[r * hidden + i] = static_cast<float>(want_residual[src * hidden + i] * inv * weight[i]);
    }
  }
  const double err = RelativeError(FromBF16(d_out.Download()), want);
  ReportError(std::string("rms_norm") + (with_delta ? "+add" : "") + (with_index ? "+gather" : ""),
              err);
  EXPECT_LT(err, 1e-2);
  EXPECT_LT(RelativeError(d_residual.Download(), want_residual), 1e-6);
}

// Gemma 3's sandwich norm: a projection's fp32 output normed in place, each weight plus 1 (as
// Gemma's checkpoints store them), no residual touched.
TEST(RmsNormKernel, InPlaceFp32WithWeightOffset) {
  CONVOY_SKIP_WITHOUT_GPU();
  const int64_t rows = 6, hidden = 1152;
  const float eps = 1e-6f;
  const std::vector<float> x = RandomFloats(rows * hidden, 12, 5.0f);
  const std::vector<float> weight = RoundBF16(RandomFloats(hidden, 13, 0.1f));
  DeviceArray<float> d_x(x);
  DeviceArray<uint16_t> d_weight(ToBF16(weight));
  kernels::RmsNormParams p;
  p.residual = d_x.get();
  p.weight = d_weight.get();
  p.out_f32 = d_x.get();
  p.num_rows = rows;
  p.hidden = hidden;
  p.eps = eps;
  p.weight_offset = 1.0f;
  CUDA_ASSERT_OK(kernels::LaunchRmsNorm(p, nullptr));
  CUDA_ASSERT_OK(cudaDeviceSynchronize());
  std::vector<float> want(rows * hidden);
  for (int64_t r = 0; r < rows; ++r) {
    double sum_sq = 0.0;
    for (int64_t i = 0; i < hidden; ++i) sum_sq += double{x[r * hidden + i]} * x[r * hidden + i];
    const double inv = 1.0 / std::sqrt(sum_sq / hidden + eps);
    for (int64_t i = 0; i < hidden; ++i) {
      want[r * hidden + i] = static_cast<float>(x[r * hidden + i] * inv * (1.0 + weight[i]));
    }
  }
  const double err = RelativeError(d_x.Download(), want);
  ReportError("rms_norm_inplace_offset", err);
  EXPECT_LT(err, 1e-5);
  // One output, not both; not gathered rows in place.
  p.out = d_weight.get();
  EXPECT_EQ(kernels::LaunchRmsNorm(p, nullptr), cudaErrorInvalidValue);
}

TEST(RmsNormKernel, Plain) {
  CONVOY_SKIP_WITHOUT_GPU();
  CheckRmsNorm(false, false);
}
TEST(RmsNormKernel, FusedResidualAdd) {
  CONVOY_SKIP_WITHOUT_GPU();
  CheckRmsNorm(true, false);
}
TEST(RmsNormKernel, FusedAddWithGatheredRows) {
  CONVOY_SKIP_WITHOUT_GPU();
  CheckRmsNorm(true, true);
}

// rotary_dim 0: every dimension turns; otherwise the first rotary_dim of each head (Phi-4-mini's
// partial rotary embedding) and the rest pass unchanged. `scale` multiplies cos and sin
// (LongRoPE's attention factor).
void CheckRotary(int rotary_dim, float scale) {
  const int tokens = 11, q_heads = 6, kv_heads = 2, head_dim = 64;
  const int r = rotary_dim > 0 ? rotary_dim : head_dim;
  const int64_t stride = (q_heads + 2 * kv_heads) * head_dim;
  const std::vector<float> qkv = RoundBF16(RandomFloats(tokens * stride, 5));
  std::vector<int32_t> positions(tokens);
  for (int t = 0; t < tokens; ++t) positions[t] = t * 97 + 3;
  std::vector<float> inv_freq(r / 2);
  for (int i = 0; i < r / 2; ++i) inv_freq[i] = std::pow(500000.0f, -2.0f * i / r);
  DeviceArray<uint16_t> d_qkv(ToBF16(qkv));
  DeviceArray<int32_t> d_pos(positions);
  DeviceArray<float> d_freq(inv_freq);
  kernels::RotaryParams p;
  p.qkv = d_qkv.get();
  p.row_stride = stride;
  p.positions = d_pos.get();
  p.inv_freq = d_freq.get();
  p.num_tokens = tokens;
  p.num_q_heads = q_heads;
  p.num_kv_heads = kv_heads;
  p.head_dim = head_dim;
  p.rotary_dim = rotary_dim;
  p.cos_sin_scale = scale;
  CUDA_ASSERT_OK(kernels::LaunchRotary(p, nullptr));
  CUDA_ASSERT_OK(cudaDeviceSynchronize());
  std::vector<float> want = qkv;
  for (int t = 0; t < tokens; ++t) {
    for (int h = 0; h < q_heads + kv_heads; ++h) {
      float* x = want.data() + t * stride + h * head_dim;
      for (int i = 0; i < r / 2; ++i) {
        const double angle = static_cast<double>(positions[t]) * inv_freq[i];
        const double c = std::cos(angle) * scale, s = std::sin(angle) * scale;
        const float a = x[i], b = x[i + r / 2];
        x[i] = static_cast<float>(a * c - b * s);
        x[i + r / 2] = static_cast<float>(b * c + a * s);
      }
    }
  }
  const std::vector<float> got = FromBF16(d_qkv.Download());
  const double err = RelativeError(got, want);
  ReportError(rotary_dim > 0 ? "rotary_partial" : "rotary", err);
  EXPECT_LT(err, 1e-2);
  // The dimensions past rotary_dim, and the values, are left exactly as they were.
  for (int t = 0; t < tokens; ++t) {
    for (int d = 0; d < stride; ++d) {
      const bool turned = d < (q_heads + kv_heads) * head_dim && d % head_dim < r;
      if (!turned) {
        ASSERT_EQ(got[t * stride + d], qkv[t * stride + d]) << t << " " << d;
      }
    }
  }
}

TEST(RotaryKernel, RotatesQueryAndKeyHeadsOnly) {
  CONVOY_SKIP_WITHOUT_GPU();
  CheckRotary(0, 1.0f);
}

// Phi-4-mini's partial rotary embedding (48 of 64 dimensions) with LongRoPE's factor on cos, sin.
TEST(RotaryKernel, PartialRotaryAndCosSinScale) {
  CONVOY_SKIP_WITHOUT_GPU();
  CheckRotary(48, 1.19f);
}

TEST(KvWriteKernel, WritesEachTokenToItsBlockSlot) {
  CONVOY_SKIP_WITHOUT_GPU();
  const int kv_heads = 3, head_dim = 64, block_size = 5, layers = 2, num_blocks = 9;
  const int q_heads = 3;
  const int64_t stride = (q_heads + 2 * kv_heads) * head_dim;
  // Two rows: row 0 has tokens at positions 3..9 (blocks 4, 1), row 1 at 0..2 (block 7).
  const std::vector<int32_t> positions = {3, 4, 5, 6, 7, 8, 9, 0, 1, 2};
  const std::vector<int32_t> token_row = {0, 0, 0, 0, 0, 0, 0, 1, 1, 1};
  const std::vector<int32_t> block_ids = {4, 1, 7};
  const std::vector<int32_t> row_offset = {0, 2};
  const int tokens = static_cast<int>(positions.size());
  const std::vector<float> qkv = RoundBF16(RandomFloats(tokens * stride, 6));
  kernels::KvCacheLayout layout;
  layout.block_size = block_size;
  layout.num_kv_heads = kv_heads;
  layout.head_dim = head_dim;
  layout.num_blocks = num_blocks;
  layout.v_offset = int64_t{kv_heads} * block_size * head_dim;
  layout.block_stride = 2 * layout.v_offset * layers;
  layout.layer_offset = 2 * layout.v_offset;  // layer 1
  const std::vector<float> cache_init =
      RoundBF16(RandomFloats(num_blocks * layout.block_stride, 7));
  DeviceArray<uint16_t> d_cache(ToBF16(cache_init));
  DeviceArray<uint16_t> d_qkv(ToBF16(qkv));
  DeviceArray<int32_t> d_pos(positions), d_row(token_row), d_blocks(block_ids), d_off(row_offset);
  layout.base = d_cache.get();
  kernels::KvWriteParams p;
  p.qkv = d_qkv.get();
  p.row_stride = stride;
  p.k_column = q_heads * head_dim;
  p.positions = d_pos.get();
  p.token_row = d_row.get();
  p.row_block_offset = d_off.get();
  p.block_ids = d_blocks.get();
  p.cache = layout;
  p.num_tokens = tokens;
  CUDA_ASSERT_OK(kernels::LaunchKvWrite(p, nullptr));
  CUDA_ASSERT_OK(cudaDeviceSynchronize());
  std::vector<float> want = cache_init;
  for (int t = 0; t < tokens; ++t) {
    const int block = block_ids[row_offset[token_row[t]] + positions[t] / block_size];
    for (int kv = 0; kv < 2; ++kv) {
      for (int h = 0; h < kv_heads; ++h) {
        for (int d = 0; d < head_dim; ++d) {
          want[kernels::KvOffset(layout, block, h, positions[t] % block_size, kv == 1) + d] =
              qkv[t * stride + p.k_column + (kv * kv_heads + h) * head_dim + d];
        }
      }
    }
  }
  const double err = RelativeError(FromBF16(d_cache.Download()), want);
  ReportError("kv_write", err);
  EXPECT_EQ(err, 0.0);
}

// Qwen2's biases (on the queries, keys and values) and Qwen3's per-head RMS norms (on the queries
// and keys), then the rotation, against a double-precision reference.
TEST(RotaryKernel, BiasesAndHeadNormsComeBeforeTheRotation) {
  CONVOY_SKIP_WITHOUT_GPU();
  const int tokens = 7, q_heads = 4, kv_heads = 2, head_dim = 128;
  const int width = (q_heads + 2 * kv_heads) * head_dim;
  const int64_t stride = width + 8;  // rows wider than the heads, as a padded buffer may be
  const std::vector<float> qkv = RoundBF16(RandomFloats(tokens * stride, 41));
  const std::vector<float> bias = RoundBF16(RandomFloats(width, 42, 0.5f));
  std::vector<float> q_norm = RoundBF16(RandomFloats(head_dim, 43, 0.3f));
  std::vector<float> k_norm = RoundBF16(RandomFloats(head_dim, 44, 0.3f));
  for (float& w : q_norm) w = RoundBF16({w + 1.0f})[0];
  for (float& w : k_norm) w = RoundBF16({w + 1.0f})[0];
  std::vector<int32_t> positions(tokens);
  for (int t = 0; t < tokens; ++t) positions[t] = 5 + 31 * t;
  std::vector<float> inv_freq(head_dim / 2);
  for (int i = 0; i < head_dim / 2; ++i) inv_freq[i] = std::pow(1e6f, -2.0f * i / head_dim);
  DeviceArray<uint16_t> d_qkv(ToBF16(qkv)), d_bias(ToBF16(bias)), d_qn(ToBF16(q_norm)),
      d_kn(ToBF16(k_norm));
  DeviceArray<int32_t> d_pos(positions);
  DeviceArray<float> d_freq(inv_freq);
  kernels::RotaryParams p;
  p.qkv = d_qkv.get();
  p.row_stride = stride;
  p.positions = d_pos.get();
  p.inv_freq = d_freq.get();
  p.num_tokens = tokens;
  p.num_q_heads = q_heads;
  p.num_kv_heads = kv_heads;
  p.head_dim = head_dim;
  p.qkv_bias = d_bias.get();
  p.q_norm = d_qn.get();
  p.k_norm = d_kn.get();
  p.norm_eps = 1e-6f;
  CUDA_ASSERT_OK(kernels::LaunchRotary(p, nullptr));
  CUDA_ASSERT_OK(cudaDeviceSynchronize());
  std::vector<float> want = qkv;
  for (int t = 0; t < tokens; ++t) {
    float* row = want.data() + t * stride;
    for (int i = 0; i < width; ++i) row[i] += bias[i];
    for (int h = 0; h < q_heads + kv_heads; ++h) {
      float* x = row + h * head_dim;
      const std::vector<float>& w = h < q_heads ? q_norm : k_norm;
      double squares = 0.0;
      for (int i = 0; i < head_dim; ++i) squares += double{x[i]} * x[i];
      const double inv = 1.0 / std::sqrt(squares / head_dim + 1e-6);
      for (int i = 0; i < head_dim; ++i) x[i] = static_cast<float>(x[i] * inv * w[i]);
      for (int i = 0; i < head_dim / 2; ++i) {
        const double angle = static_cast<double>(positions[t]) * inv_freq[i];
        const double c = std::cos(angle), s = std::sin(angle);
        const float a = x[i], b = x[i + head_dim / 2];
        x[i] = static_cast<float>(a * c - b * s);
        x[i + head_dim / 2] = static_cast<float>(b * c + a * s);
      }
    }
  }
  const std::vector<float> got = FromBF16(d_qkv.Download());
  const double err = RelativeError(got, want);
  ReportError("rotary+bias+head_norm", err);
  EXPECT_LT(err, 1e-2);
  for (int t = 0; t < tokens; ++t) {  // the padding past the heads is left alone
    for (int64_t i = width; i < stride; ++i) {
      EXPECT_EQ(ToBF16({got[t * stride + i]})[0], ToBF16({qkv[t * stride + i]})[0]);
    }
  }
}

// The rotary kernel with its fused cache write leaves the same bits in the activations and the
// cache as the rotary kernel followed by the KV write kernel.
TEST(RotaryKernel, FusedKvWriteEqualsRotaryThenKvWrite) {
  CONVOY_SKIP_WITHOUT_GPU();
  const int q_heads = 8, kv_heads = 2, head_dim = 128, block_size = 16, num_blocks = 7;
  const int64_t stride = (q_heads + 2 * kv_heads) * head_dim;
  const std::vector<int32_t> positions = {17, 18, 19, 0, 1, 40};
  const std::vector<int32_t> token_row = {0, 0, 0, 1, 1, 2};
  const std::vector<int32_t> block_ids = {3, 5, 0, 6, 1, 2, 4};
  const std::vector<int32_t> row_offset = {0, 2, 3};
  const int tokens = static_cast<int>(positions.size());
  const std::vector<float> qkv = RoundBF16(RandomFloats(tokens * stride, 15));
  std::vector<float> inv_freq(head_dim / 2);
  for (int i = 0; i < head_dim / 2; ++i) inv_freq[i] = std::pow(10000.0f, -2.0f * i / head_dim);
  kernels::KvCacheLayout layout;
  layout.block_size = block_size;
  layout.num_kv_heads = kv_heads;
  layout.head_dim = head_dim;
  layout.num_blocks = num_blocks;
  layout.v_offset = int64_t{kv_heads} * block_size * head_dim;
  layout.block_stride = 2 * layout.v_offset;
  const std::vector<uint16_t> cache_init =
      ToBF16(RoundBF16(RandomFloats(num_blocks * layout.block_stride, 16)));
  DeviceArray<int32_t> d_pos(positions), d_row(token_row), d_blocks(block_ids), d_off(row_offset);
  DeviceArray<float> d_freq(inv_freq);
  std::vector<uint16_t> results[2][2];  // [fused][qkv, cache]
  for (int fused = 0; fused < 2; ++fused) {
    DeviceArray<uint16_t> d_qkv(ToBF16(qkv)), d_cache(cache_init);
    kernels::KvWriteParams kv;
    kv.qkv = d_qkv.get();
    kv.row_stride = stride;
    kv.k_column = int64_t{q_heads} * head_dim;
    kv.positions = d_pos.get();
    kv.token_row = d_row.get();
    kv.row_block_offset = d_off.get();
    kv.block_ids = d_blocks.get();
    kv.cache = layout;
    kv.cache.base = d_cache.get();
    kv.num_tokens = tokens;
    kernels::RotaryParams p;
    p.qkv = d_qkv.get();
    p.row_stride = stride;
    p.positions = d_pos.get();
    p.inv_freq = d_freq.get();
    p.num_tokens = tokens;
    p.num_q_heads = q_heads;
    p.num_kv_heads = kv_heads;
    p.head_dim = head_dim;
    p.write_kv = fused == 1;
    p.kv_write = kv;
    CUDA_ASSERT_OK(kernels::LaunchRotary(p, nullptr));
    if (fused == 0) CUDA_ASSERT_OK(kernels::LaunchKvWrite(kv, nullptr));
    CUDA_ASSERT_OK(cudaDeviceSynchronize());
    results[fused][0] = d_qkv.Download();
    results[fused][1] = d_cache.Download();
  }
  EXPECT_EQ(results[1][0], results[0][0]);
  EXPECT_EQ(results[1][1], results[0][1]);
  EXPECT_NE(results[1][1], cache_init);
}

TEST(RotaryKernel, RefusesAFusedWriteThatDisagreesWithIt) {
  int32_t fake = 0;
  float freq = 1.0f;
  kernels::RotaryParams p;
  p.qkv = &fake;
  p.row_stride = 4 * 64;
  p.positions = &fake;
  p.inv_freq = &freq;
  p.num_tokens = 1;
  p.num_q_heads = 2;
  p.num_kv_heads = 1;
  p.head_dim = 64;
  p.write_kv = true;
  p.kv_write.qkv = &fake;
  p.kv_write.row_stride = p.row_stride;
  p.kv_write.k_column = 128;
  p.kv_write.positions = &fake;
  p.kv_write.token_row = &fake;
  p.kv_write.row_block_offset = &fake;
  p.kv_write.block_ids = &fake;
  p.kv_write.cache.base = &fake;
  p.kv_write.cache.head_dim = 64;
  p.kv_write.cache.block_size = 16;
  p.kv_write.cache.num_kv_heads = 1;
  p.kv_write.num_tokens = 2;  // not the rotary launch's token count
  EXPECT_EQ(kernels::LaunchRotary(p, nullptr), cudaErrorInvalidValue);
  p.kv_write.num_tokens = 1;
  p.kv_write.k_column = 64;  // not where the key heads start
  EXPECT_EQ(kernels::LaunchRotary(p, nullptr), cudaErrorInvalidValue);
}

// Gemma 3's final logit soft-capping: cap * tanh(x / cap).
TEST(SoftCapKernel, CapsEveryValue) {
  CONVOY_SKIP_WITHOUT_GPU();
  const std::vector<float> x = RandomFloats(100003, 15, 80.0f);
  DeviceArray<float> d_x(x);
  kernels::SoftCapParams p;
  p.values = d_x.get();
  p.num_values = static_cast<int64_t>(x.size());
  p.cap = 30.0f;
  CUDA_ASSERT_OK(kernels::LaunchSoftCap(p, nullptr));
  CUDA_ASSERT_OK(cudaDeviceSynchronize());
  std::vector<float> want(x.size());
  for (size_t i = 0; i < x.size(); ++i) want[i] = static_cast<float>(30.0 * std::tanh(x[i] / 30.0));
  EXPECT_LT(RelativeError(d_x.Download(), want), 1e-6);
  p.cap = 0.0f;
  EXPECT_EQ(kernels::LaunchSoftCap(p, nullptr), cudaErrorInvalidValue);
}

// The gate's activation times the up half, against `activation` in double.
template <typename Activation>
void CheckGatedProduct(kernels::GateActivation kind, Activation activation, const char* name) {
  const int64_t tokens = 7, inter = 1000;
  const std::vector<float> gate_up = RoundBF16(RandomFloats(tokens * 2 * inter, 8, 4.0f));
  DeviceArray<uint16_t> d_in(ToBF16(gate_up));
  DeviceArray<uint16_t> d_out(tokens * inter);
  kernels::SiluMulParams p;
  p.gate_up = d_in.get();
  p.out = d_out.get();
  p.num_tokens = tokens;
  p.intermediate = inter;
  p.activation = kind;
  CUDA_ASSERT_OK(kernels::LaunchSiluMul(p, nullptr));
  CUDA_ASSERT_OK(cudaDeviceSynchronize());
  std::vector<float> want(tokens * inter);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t i = 0; i < inter; ++i) {
      const double g = gate_up[t * 2 * inter + i], u = gate_up[t * 2 * inter + inter + i];
      want[t * inter + i] = static_cast<float>(activation(g) * u);
    }
  }
  const double err = RelativeError(FromBF16(d_out.Download()), want);
  ReportError(name, err);
  EXPECT_LT(err, 1e-2);
}

TEST(SiluMulKernel, GatesTheUpHalf) {
  CONVOY_SKIP_WITHOUT_GPU();
  CheckGatedProduct(
      kernels::GateActivation::kSilu, [](double g) { return g / (1.0 + std::exp(-g)); },
      "silu_mul");
}

// Gemma's GeGLU: GELU with the tanh approximation on the gate.
TEST(SiluMulKernel, GeluTanhGatesTheUpHalf) {
  CONVOY_SKIP_WITHOUT_GPU();
  const double beta = std::sqrt(2.0 / 3.14159265358979323846);
  CheckGatedProduct(
      kernels::GateActivation::kGeluTanh,
      [beta](double g) { return 0.5 * g * (1.0 + std::tanh(beta * (g + 0.044715 * g * g * g))); },
      "gelu_tanh_mul");
}

TEST(FillRandomKernel, UniformInRange) {
  CONVOY_SKIP_WITHOUT_GPU();
  const int64_t n = 100003;
  DeviceArray<uint16_t> d(n);
  kernels::FillRandomParams p;
  p.data = d.get();
  p.num_elements = n;
  p.scale = 0.5f;
  p.offset = 1.0f;
  p.seed = 42;
  CUDA_ASSERT_OK(kernels::LaunchFillRandom(p, nullptr));
  CUDA_ASSERT_OK(cudaDeviceSynchronize());
  const std::vector<float> v = FromBF16(d.Download());
  double mean = 0.0;
  for (float x : v) {
    ASSERT_GE(x, 0.5f);
    ASSERT_LE(x, 1.5f);
    mean += x;
  }
  EXPECT_NEAR(mean / n, 1.0, 0.01);
}

}  // namespace
}  // namespace convoy
