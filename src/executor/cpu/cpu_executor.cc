#include "executor/cpu/cpu_executor.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>

#include "absl/strings/str_format.h"
#include "convoy/status_macros.h"
#include "executor/cpu/attention.h"
#include "executor/cpu/linear.h"
#include "executor/cpu/ops.h"
#include "executor/sampler.h"
#include "model/tensor_rows.h"

namespace convoy {
namespace {

struct Layer {
  std::vector<float> input_norm;
  // The MLP's input norm; with sandwich norms the attention output's.
  std::vector<float> post_attention_norm;
  // Sandwich norms only (empty otherwise): the MLP's input and output norms.
  std::vector<float> pre_ffn_norm, post_ffn_norm;
  // Whether the layer attends through the sliding window (with its own rope table when the model
  // has two kinds of layers).
  bool sliding = false;
  std::unique_ptr<Linear> qkv;      // [q + k + v, hidden]
  std::vector<float> qkv_bias;      // [q + k + v] after the product; empty without biases
  std::vector<float> q_norm;        // [head_dim] per query head; empty without per-head norms
  std::vector<float> k_norm;        // [head_dim] per key head
  std::unique_ptr<Linear> o;        // [hidden, q]
  std::unique_ptr<Linear> gate_up;  // [2 * intermediate, hidden]
  std::unique_ptr<Linear> down;     // [hidden, intermediate]
};

// Whether any linear layer's weights are stored quantized (a quantized GGUF file).
bool HasQuantizedLayers(const ModelWeights& weights) {
  if (weights.lm_head().dtype == DType::kQuantized) return true;
  for (const LayerWeights& lw : weights.layers()) {
    for (const TensorView* view : {&lw.q_proj, &lw.k_proj, &lw.v_proj, &lw.o_proj, &lw.gate_proj,
                                   &lw.up_proj, &lw.down_proj}) {
      if (view->dtype == DType::kQuantized) return true;
    }
  }
  return false;
}

// A norm's weights as fp32, each plus `offset` (Gemma's checkpoints store offsets from 1).
void AppendNorm(const TensorView& view, double offset, std::vector<float>* out) {
  const size_t base = out->size();
  AppendAsFloat(view, out);
  for (size_t i = base; i < out->size(); ++i) (*out)[i] += static_cast<float>(offset);
}

// Grows `v` to at least n elements; keeps its memory between steps.
float* Scratch(std::vector<float>* v, int64_t n) {
  if (static_cast<int64_t>(v->size()) < n) v->resize(n);
  return v->data();
}

}  // namespace

struct CpuExecutor::Impl {
  ModelConfig config;
  KvCacheSpec kv_spec;
  std::unique_ptr<PagedKvCache> cache;
  // [vocab, hidden] in the file's storage (embed_bytes), or with embed_from_lm_head in the tied
  // lm_head's blocks; a token's row is converted on lookup.
  std::vector<std::byte> embed_bytes;
  TensorView embed;
  bool embed_from_lm_head = false;
  std::vector<float> final_norm;
  std::unique_ptr<Linear> lm_head;
  std::vector<Layer> layers;
  std::unique_ptr<RopeTable> rope;
  // The sliding-window layers' table when they have a rope base of their own (Gemma 3); null
  // otherwise.
  std::unique_ptr<RopeTable> local_rope;
  int num_threads = 1;
  int64_t step_memory_bytes = 0;
  bool skip_padding = false;
  bool share_attention_kv = true;

  // Step scratch, reused.
  std::vector<float> x, h, qkv, attn, proj, gate_up, act, cos_sin, local_cos_sin, logits;
  std::vector<int32_t> slot_row, slot_pos;

  // `tables`: each row's whole block table (Executor::TableOf), in the plan's order.
  absl::StatusOr<StepResult> Run(const StepPlan& plan, const std::vector<const BlockId*>& tables,
                                 absl::Time start);

  // Whether `pred` holds for every linear layer of the model.
  template <typename Pred>
  bool EveryLinear(Pred pred) const {
    bool all = pred(*lm_head);
    for (const Layer& layer : layers) {
      for (const Linear* linear :
           {layer.qkv.get(), layer.o.get(), layer.gate_up.get(), layer.down.get()}) {
        all = all && pred(*linear);
      }
    }
    return all;
  }
};

CpuExecutor::CpuExecutor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CpuExecutor::~CpuExecutor() = default;
const ModelConfig& CpuExecutor::model_config() const { return impl_->config; }
const KvCacheSpec& CpuExecutor::kv_spec() const { return impl_->kv_spec; }
ExecutorLimits CpuExecutor::limits() const {
  ExecutorLimits limits;
  limits.max_top_logprobs =
      static_cast<int32_t>(std::min<int64_t>(kMaxTopLogprobs, impl_->config.vocab_size));
  limits.computes_padding = !impl_->skip_padding;
  limits.max_rows_per_step = kMaxRowsPerStep;
  const int64_t logits_bytes =
      int64_t{kMaxRowsPerStep} * impl_->config.vocab_size * static_cast<int64_t>(sizeof(float));
  limits.max_tokens_per_step =
      std::max<int64_t>(1, (impl_->step_memory_bytes - logits_bytes) / StepBytesPerToken());
  return limits;
}

int64_t CpuExecutor::StepBytesPerToken() const {
  const ModelConfig& c = impl_->config;
  // The scratch buffers of Impl::Run per activation row: x, h, proj (hidden each), qkv, attn,
  // gate_up, act and the rotary angles; and the bf16 or 8-bit copy of a product's input (at most
  // the widest input, two bytes a value; the 8-bit copy of quant_matmul.h takes 1.375).
  const int64_t floats = 3 * c.hidden_size + (c.q_size() + 2 * c.kv_size()) + c.q_size() +
                         3 * c.intermediate_size + 2 * c.head_dim;
  const int64_t bf16_input = 2 * std::max(c.hidden_size, c.intermediate_size);
  return static_cast<int64_t>(sizeof(float)) * floats + bf16_input;
}
const char* CpuWeightFormatName(CpuWeightFormat format) {
  switch (format) {
    case CpuWeightFormat::kAuto:
      return "auto";
    case CpuWeightFormat::kF32:
      return "f32";
    case CpuWeightFormat::kBF16:
      return "bf16";
    case CpuWeightFormat::kNative:
      return "native";
  }
  return "unknown";
}

std::optional<CpuWeightFormat> ParseCpuWeightFormat(std::string_view name) {
  for (CpuWeightFormat format : {CpuWeightFormat::kAuto, CpuWeightFormat::kF32,
                                 CpuWeightFormat::kBF16, CpuWeightFormat::kNative}) {
    if (name == CpuWeightFormatName(format)) return format;
  }
  return std::nullopt;
}

std::optional<KvDtype> ParseCpuKvDtype(std::string_view name) {
  for (KvDtype dtype : {KvDtype::kF32, KvDtype::kBF16, KvDtype::kInt8}) {
    if (name == KvDtypeName(dtype)) return dtype;
  }
  return std::nullopt;
}

CpuWeightFormat CpuExecutor::weight_format() const {
  if (!impl_->EveryLinear([](const Linear& l) { return l.format() != LinearFormat::kNative; })) {
    return CpuWeightFormat::kNative;
  }
  return impl_->EveryLinear([](const Linear& l) { return l.format() == LinearFormat::kBF16; })
             ? CpuWeightFormat::kBF16
             : CpuWeightFormat::kF32;
}

int64_t CpuExecutor::linear_weight_bytes() const {
  int64_t bytes = 0;
  impl_->EveryLinear([&bytes](const Linear& l) {
    bytes += l.weight_bytes();
    return true;
  });
  return bytes;
}

int64_t CpuExecutor::weight_bytes() const {
  int64_t bytes = linear_weight_bytes() +
                  static_cast<int64_t>(impl_->embed_bytes.size() + impl_->final_norm.size() * 4);
  for (const Layer& layer : impl_->layers) {
    bytes += static_cast<int64_t>(4 * (layer.input_norm.size() + layer.post_attention_norm.size() +
                                       layer.qkv_bias.size() + layer.q_norm.size() +
                                       layer.k_norm.size() + layer.pre_ffn_norm.size() +
                                       layer.post_ffn_norm.size()));
  }
  return bytes;
}

bool CpuExecutor::few_row_kernel() const {
  return impl_->EveryLinear([](const Linear& l) { return l.few_row_kernel(); });
}

bool CpuExecutor::batch_invariant() const {
  return impl_->EveryLinear([](const Linear& l) { return l.batch_invariant(); });
}

absl::StatusOr<std::unique_ptr<CpuExecutor>> CpuExecutor::Create(
    const ModelWeights& weights, const CpuExecutorOptions& options) {
  auto impl = std::make_unique<Impl>();
  const ModelConfig& c = weights.config();
  impl->config = c;
  impl->num_threads = options.num_threads > 0 ? options.num_threads : omp_get_num_procs();
  impl->skip_padding = options.skip_padding;
  impl->step_memory_bytes = options.step_memory_bytes;
  impl->share_attention_kv = options.share_attention_kv;
  omp_set_num_threads(impl->num_threads);

  if (options.step_memory_bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("step_memory_bytes must be positive, got %d", options.step_memory_bytes));
  }
  if (options.block_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("block_size must be positive, got %d", options.block_size));
  }
  if (options.kv_dtype == KvDtype::kF16) {
    return absl::InvalidArgumentError("the CPU KV cache stores f32, bf16 or int8, not f16");
  }
  KvCacheSpec& kv = impl->kv_spec;
  kv.num_layers = static_cast<int32_t>(c.num_hidden_layers);
  kv.num_kv_heads = static_cast<int32_t>(c.num_key_value_heads);
  kv.head_dim = static_cast<int32_t>(c.head_dim);
  kv.block_size = options.block_size;
  kv.dtype = options.kv_dtype;
  kv.num_blocks = kv.BlocksForBudget(options.kv_cache_bytes);
  if (kv.num_blocks < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("kv_cache_bytes %d holds no block: one block of %d tokens needs %d bytes",
                        options.kv_cache_bytes, kv.block_size, kv.BytesPerBlock()));
  }

  LinearFormat format = LinearFormat::kF32;
  if (options.weight_format == CpuWeightFormat::kNative ||
      (options.weight_format == CpuWeightFormat::kAuto && HasQuantizedLayers(weights))) {
    format = LinearFormat::kNative;
  } else if (options.weight_format == CpuWeightFormat::kBF16 ||
             (options.weight_format == CpuWeightFormat::kAuto && c.torch_dtype == DType::kBF16)) {
    format = LinearFormat::kBF16;
  }

  const TensorView& embed = weights.embed_tokens();
  impl->embed = embed;
  const double offset = c.norm_weight_offset;
  AppendNorm(weights.norm(), offset, &impl->final_norm);
  ASSIGN_OR_RETURN(impl->lm_head, Linear::Create({&weights.lm_head()}, format,
                                                 options.few_row_kernel, options.batch_invariant));
  // The embedding table in its own storage. Tied to an lm_head kept in the same blocks, it reads
  // the lm_head's copy (one copy of the table, not two).
  impl->embed_from_lm_head = c.tie_word_embeddings && impl->lm_head->has_quantized_rows() &&
                             embed.dtype == DType::kQuantized;
  if (!impl->embed_from_lm_head) {
    impl->embed_bytes.assign(embed.data, embed.data + ViewRows(embed) * ViewRowBytes(embed));
    impl->embed.data = impl->embed_bytes.data();
  }
  for (const LayerWeights& lw : weights.layers()) {
    Layer layer;
    layer.sliding = c.LayerSliding(static_cast<int64_t>(impl->layers.size()));
    AppendNorm(lw.input_layernorm, offset, &layer.input_norm);
    AppendNorm(lw.post_attention_layernorm, offset, &layer.post_attention_norm);
    if (c.sandwich_norms) {
      AppendNorm(lw.pre_feedforward_layernorm, offset, &layer.pre_ffn_norm);
      AppendNorm(lw.post_feedforward_layernorm, offset, &layer.post_ffn_norm);
    }
    ASSIGN_OR_RETURN(layer.qkv, Linear::Create({&lw.q_proj, &lw.k_proj, &lw.v_proj}, format,
                                               options.few_row_kernel, options.batch_invariant));
    if (c.attention_bias) {
      for (const TensorView* bias : {&lw.q_bias, &lw.k_bias, &lw.v_bias}) {
        AppendAsFloat(*bias, &layer.qkv_bias);
      }
    }
    if (c.qk_norm) {
      AppendNorm(lw.q_norm, offset, &layer.q_norm);
      AppendNorm(lw.k_norm, offset, &layer.k_norm);
    }
    ASSIGN_OR_RETURN(layer.o, Linear::Create({&lw.o_proj}, format, options.few_row_kernel,
                                             options.batch_invariant));
    ASSIGN_OR_RETURN(layer.gate_up,
                     Linear::Create({&lw.gate_proj, &lw.up_proj}, format, options.few_row_kernel,
                                    options.batch_invariant));
    ASSIGN_OR_RETURN(layer.down, Linear::Create({&lw.down_proj}, format, options.few_row_kernel,
                                                options.batch_invariant));
    impl->layers.push_back(std::move(layer));
  }
  impl->rope = std::make_unique<RopeTable>(c);
  if (!c.layer_sliding.empty()) {
    ModelConfig local = c;
    local.rope_theta = c.rope_local_theta;
    local.rope_scaling = RopeScaling();
    impl->local_rope = std::make_unique<RopeTable>(local);
  }
  try {
    impl->cache = std::make_unique<PagedKvCache>(kv);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("cannot allocate a KV cache of %d blocks (%d bytes)", kv.num_blocks,
                        kv.BytesPerBlock() * kv.num_blocks));
  }
  return std::unique_ptr<CpuExecutor>(new CpuExecutor(std::move(impl)));
}

absl::StatusOr<StepResult> CpuExecutor::Step(const StepPlan& plan) {
  const absl::Time start = absl::Now();
  RETURN_IF_ERROR(ValidateStepPlan(plan, impl_->config, impl_->kv_spec));
  RETURN_IF_ERROR(AcceptTables(plan));
  std::vector<const BlockId*> tables(plan.rows.size());
  for (size_t r = 0; r < plan.rows.size(); ++r) tables[r] = TableOf(plan.rows[r]).data();
  // OpenMP's thread count is per calling thread, and steps may run on another thread than Create.
  omp_set_num_threads(impl_->num_threads);
  try {
    return impl_->Run(plan, tables, start);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrFormat("CPU executor step failed: %s", e.what()));
  }
}

absl::StatusOr<StepResult> CpuExecutor::Impl::Run(const StepPlan& plan,
                                                  const std::vector<const BlockId*>& tables,
                                                  absl::Time start) {
  const ModelConfig& c = config;
  const int32_t num_rows = static_cast<int32_t>(plan.rows.size());
  int32_t padded = 0;
  StepResult result;
  for (const StepRow& row : plan.rows) {
    padded = std::max<int32_t>(padded, static_cast<int32_t>(row.token_ids.size()));
    result.real_tokens += static_cast<int64_t>(row.token_ids.size());
  }
  result.padded_length = padded;
  result.padded_tokens = static_cast<int64_t>(num_rows) * padded - result.real_tokens;
  // Where each row starts in the activation matrix: every row padded to the longest, or, when
  // padding is skipped, rows packed back to back (attention still masks each row to its length).
  std::vector<int64_t> row_start(num_rows + 1, 0);
  for (int32_t r = 0; r < num_rows; ++r) {
    row_start[r + 1] =
        row_start[r] +
        (skip_padding ? static_cast<int64_t>(plan.rows[r].token_ids.size()) : padded);
  }
  const int64_t m = row_start[num_rows];  // activation rows this step computes
  result.computed_tokens = m;
  // The row and position of every activation row (position >= the row's length: padding).
  slot_row.resize(m);
  slot_pos.resize(m);
  for (int32_t r = 0; r < num_rows; ++r) {
    for (int64_t i = row_start[r]; i < row_start[r + 1]; ++i) {
      slot_row[i] = r;
      slot_pos[i] = static_cast<int32_t>(i - row_start[r]);
    }
  }

  const int64_t hidden = c.hidden_size;
  const int64_t q_size = c.q_size();
  const int64_t kv_size = c.kv_size();
  const int64_t qkv_width = q_size + 2 * kv_size;
  const int64_t inter = c.intermediate_size;
  const int64_t hd = c.head_dim;
  const int64_t half = hd / 2;
  const float eps = static_cast<float>(c.rms_norm_eps);

  // Embeddings; padding slots carry token 0 and are masked out below. Rotary angles per token:
  // cos from i * 2 * half, sin from i * 2 * half + half (RotaryDim() / 2 of each, maybe fewer
  // than half).
  float* xs = Scratch(&x, m * hidden);
  float* angles = Scratch(&cos_sin, m * 2 * half);
  float* local_angles = local_rope != nullptr ? Scratch(&local_cos_sin, m * 2 * half) : nullptr;
  const float embedding_scale = static_cast<float>(c.embedding_scale);
  for (int64_t i = 0; i < m; ++i) {
    const StepRow& row = plan.rows[slot_row[i]];
    const int32_t t = slot_pos[i];
    const bool real = t < static_cast<int32_t>(row.token_ids.size());
    const int64_t token = real ? row.token_ids[t] : 0;
    if (embed_from_lm_head) {
      lm_head->QuantizedRowToFloat(token, xs + i * hidden);
    } else {
      ViewRowsToFloat(embed, token, 1, xs + i * hidden);
    }
    if (embedding_scale != 1.0f) {
      for (int64_t d = 0; d < hidden; ++d) xs[i * hidden + d] *= embedding_scale;
    }
    if (!real) continue;
    rope->Angles(row.start_pos + t, angles + i * 2 * half, angles + i * 2 * half + half);
    if (local_angles != nullptr) {
      local_rope->Angles(row.start_pos + t, local_angles + i * 2 * half,
                         local_angles + i * 2 * half + half);
    }
  }

  const absl::Time laid_out = absl::Now();
  result.times.prepare = laid_out - start;
  float* hs = Scratch(&h, m * hidden);
  float* qkvs = Scratch(&qkv, m * qkv_width);
  float* attns = Scratch(&attn, m * q_size);
  float* projs = Scratch(&proj, m * hidden);
  float* gus = Scratch(&gate_up, m * 2 * inter);
  float* acts = Scratch(&act, m * inter);

  std::vector<AttentionRow> attention_rows(num_rows);
  for (int32_t r = 0; r < num_rows; ++r) {
    const StepRow& row = plan.rows[r];
    attention_rows[r] = {qkvs + row_start[r] * qkv_width, attns + row_start[r] * q_size,
                         static_cast<int32_t>(row.token_ids.size()), row.start_pos, tables[r]};
  }
  const double scalar = c.query_pre_attn_scalar > 0 ? c.query_pre_attn_scalar : hd;
  AttentionShape shape{static_cast<int32_t>(c.num_attention_heads),
                       static_cast<int32_t>(c.num_key_value_heads),
                       static_cast<int32_t>(hd),
                       qkv_width,
                       q_size,
                       static_cast<float>(1.0 / std::sqrt(scalar))};
  shape.share_kv = share_attention_kv;
  const int32_t window = static_cast<int32_t>(std::min<int64_t>(c.sliding_window, INT32_MAX));
  const int32_t block_size = kv_spec.block_size;

  // The first layer's input norm; each later one comes with the residual add before it.
  if (!layers.empty()) RmsNorm(xs, layers[0].input_norm.data(), m, hidden, eps, hs);
  for (int32_t l = 0; l < static_cast<int32_t>(layers.size()); ++l) {
    Layer& layer = layers[l];
    shape.window = layer.sliding ? window : 0;
    const float* layer_angles = layer.sliding && local_angles != nullptr ? local_angles : angles;
    layer.qkv->Forward(hs, m, qkvs);

    // The family's QKV biases and per-head Q/K norms, rotary embedding on Q and K, then K and V
    // into their paged slots (real tokens only).
#pragma omp parallel for schedule(static) if (m * qkv_width >= kMinParallelWork)
    for (int64_t i = 0; i < m; ++i) {
      const int32_t t = slot_pos[i];
      const StepRow& row = plan.rows[slot_row[i]];
      if (t >= static_cast<int32_t>(row.token_ids.size())) continue;
      float* q = qkvs + i * qkv_width;
      float* k = q + q_size;
      const float* v = k + kv_size;
      if (!layer.qkv_bias.empty()) AddInPlace(q, layer.qkv_bias.data(), qkv_width);
      if (!layer.q_norm.empty()) {
        RmsNorm(q, layer.q_norm.data(), c.num_attention_heads, hd, eps, q);
        RmsNorm(k, layer.k_norm.data(), c.num_key_value_heads, hd, eps, k);
      }
      const float* a = layer_angles + i * 2 * half;
      RopeTable::Apply(q, c.num_attention_heads, hd, c.RotaryDim(), a, a + half);
      RopeTable::Apply(k, c.num_key_value_heads, hd, c.RotaryDim(), a, a + half);
      const int32_t pos = row.start_pos + t;
      const BlockId block = tables[slot_row[i]][pos / block_size];
      for (int32_t kh = 0; kh < static_cast<int32_t>(c.num_key_value_heads); ++kh) {
        cache->Write(block, l, kh, pos % block_size, k + kh * hd, v + kh * hd);
      }
    }
    PagedAttention(cache.get(), l, shape, attention_rows.data(), num_rows);
    // Padding slots of the attention output are zero so the projections stay finite.
    for (int32_t r = 0; r < num_rows; ++r) {
      const int32_t len = static_cast<int32_t>(plan.rows[r].token_ids.size());
      const int64_t slots = row_start[r + 1] - row_start[r];
      if (len < slots) {
        std::memset(attns + (row_start[r] + len) * q_size, 0,
                    sizeof(float) * (slots - len) * q_size);
      }
    }
    layer.o->Forward(attns, m, projs);
    if (layer.pre_ffn_norm.empty()) {
      AddRmsNorm(xs, projs, layer.post_attention_norm.data(), m, hidden, eps, hs);
    } else {
      // Sandwich norms: the attention's output normed before the residual add.
      RmsNorm(projs, layer.post_attention_norm.data(), m, hidden, eps, projs);
      AddRmsNorm(xs, projs, layer.pre_ffn_norm.data(), m, hidden, eps, hs);
    }
    layer.gate_up->Forward(hs, m, gus);
    if (c.activation == Activation::kGeluTanh) {
      GeluTanhMul(gus, m, inter, acts);
    } else {
      SiluMul(gus, m, inter, acts);
    }
    layer.down->Forward(acts, m, projs);
    if (!layer.post_ffn_norm.empty()) {
      RmsNorm(projs, layer.post_ffn_norm.data(), m, hidden, eps, projs);
    }
    if (l + 1 < static_cast<int32_t>(layers.size())) {
      AddRmsNorm(xs, projs, layers[l + 1].input_norm.data(), m, hidden, eps, hs);
    } else {
      AddInPlace(xs, projs, m * hidden);
    }
  }

  // Logits only where they are used: each sampling row's last token, every token of rows that
  // asked for their logits.
  std::vector<int64_t> gather;  // activation rows
  std::vector<int64_t> first_logit_row(num_rows, -1);
  for (int32_t r = 0; r < num_rows; ++r) {
    const StepRow& row = plan.rows[r];
    const int32_t len = static_cast<int32_t>(row.token_ids.size());
    first_logit_row[r] = static_cast<int64_t>(gather.size());
    if (row.return_logits || !row.score_tokens.empty()) {
      for (int32_t t = 0; t < len; ++t) gather.push_back(row_start[r] + t);
    } else if (row.sample) {
      gather.push_back(row_start[r] + len - 1);
    }
  }
  const int64_t num_logit_rows = static_cast<int64_t>(gather.size());
  const int64_t vocab = c.vocab_size;
  float* ls = Scratch(&logits, num_logit_rows * vocab);
  if (num_logit_rows > 0) {
    for (int64_t i = 0; i < num_logit_rows; ++i) {
      std::memcpy(hs + i * hidden, xs + gather[i] * hidden, sizeof(float) * hidden);
    }
    RmsNorm(hs, final_norm.data(), num_logit_rows, hidden, eps, hs);
    lm_head->Forward(hs, num_logit_rows, ls);
    if (c.final_logit_softcapping > 0) {
      SoftCap(ls, num_logit_rows * vocab, static_cast<float>(c.final_logit_softcapping));
    }
  }

  const absl::Time forwarded = absl::Now();
  result.times.forward = forwarded - laid_out;
  result.rows.resize(num_rows);
  // Rows sample on their own (each SampleToken reads its logits and writes its RowResult), so
  // they share the threads: on one thread a decode step of 16 rows over a 49,152-token vocabulary
  // spent a tenth of its time here while the other thread waited.
#pragma omp parallel for schedule(dynamic) if (num_rows > 1 && num_rows * vocab >= kMinParallelWork)
  for (int32_t r = 0; r < num_rows; ++r) {
    thread_local std::vector<std::pair<float, int32_t>> sample_scratch;
    const StepRow& row = plan.rows[r];
    RowResult& out = result.rows[r];
    out.seq_id = row.seq_id;
    const int32_t len = static_cast<int32_t>(row.token_ids.size());
    const float* row_logits = ls + first_logit_row[r] * vocab;
    const bool every_position = row.return_logits || !row.score_tokens.empty();
    if (row.return_logits) out.logits.assign(row_logits, row_logits + len * vocab);
    if (!row.score_tokens.empty()) {
      out.scored_logprobs.assign(len, std::numeric_limits<float>::quiet_NaN());
      out.scored_top_logprobs.resize(len);
      for (int32_t t = 0; t < len; ++t) {
        if (row.score_tokens[t] < 0) continue;
        SampledToken scored =
            ScoreToken(row_logits + t * vocab, static_cast<int32_t>(vocab), row.score_tokens[t],
                       row.sampling.num_top_logprobs, &sample_scratch);
        out.scored_logprobs[t] = scored.logprob;
        out.scored_top_logprobs[t] = std::move(scored.top_logprobs);
      }
    }
    if (row.sample) {
      const float* last = every_position ? row_logits + (len - 1) * vocab : row_logits;
      const uint32_t* allowed = row.allowed_tokens != nullptr ? row.allowed_tokens->Get() : nullptr;
      SampledToken s =
          SampleToken(last, static_cast<int32_t>(vocab), row.sampling, row.sample_index,
                      &sample_scratch, allowed, row.logit_adjustments.get());
      if (s.token < 0) {
        out.status = NoAllowedTokenError(row.seq_id);
        continue;
      }
      out.token = s.token;
      out.logprob = s.logprob;
      out.top_logprobs = std::move(s.top_logprobs);
    }
  }
  result.times.sample = absl::Now() - forwarded;
  return result;
}

}  // namespace convoy
