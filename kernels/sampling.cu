#include "kernels/device_utils.cuh"
#include "kernels/sampling.cuh"

namespace convoy::kernels {
namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;

struct Candidate {
  float value;
  int32_t index;
};

__device__ __forceinline__ bool Better(Candidate a, Candidate b) {
  return a.value > b.value || (a.value == b.value && a.index < b.index);
}

// Best candidate over the block (highest value, lowest index); every thread gets it. The warps'
// candidates are combined by shuffles, one per lane, not by a loop over shared memory: CUDA 13.0's
// ptxas was seen (H200, 2026-12-01) to unroll such a loop into loads past the array's end, which
// read stale shared memory of earlier blocks and returned a token id made of a float's bits.
static_assert(kWarps == 32, "BlockBest gives each lane one warp's candidate");
__device__ Candidate WarpBest(Candidate c) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    Candidate other{__shfl_xor_sync(0xffffffffu, c.value, offset),
                    __shfl_xor_sync(0xffffffffu, c.index, offset)};
    if (Better(other, c)) c = other;
  }
  return c;
}

__device__ Candidate BlockBest(Candidate c, Candidate* scratch) {
  c = WarpBest(c);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = c;
  __syncthreads();
  return WarpBest(scratch[threadIdx.x & 31]);
}

// Logits as unsigned keys with the same order; NaN sorts below everything.
__device__ __forceinline__ uint32_t OrderedKey(float x) {
  if (isnan(x)) return 0;
  const uint32_t bits = __float_as_uint(x);
  return (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
}

__device__ __forceinline__ float Sanitize(float x) { return isnan(x) ? -INFINITY : x; }

__global__ void __launch_bounds__(kThreads) SamplingKernel(SamplingKernelParams p) {
  GridDependencyWait();
  __shared__ Candidate best_scratch[kWarps];
  __shared__ float scratch[32];
  __shared__ int32_t chosen_s;
  const SampleRow row = p.rows[blockIdx.x];
  float* logits = p.logits + static_cast<int64_t>(row.logits_row) * p.vocab;
  const int vocab = static_cast<int>(p.vocab);

  // The model's own distribution (the reported logprobs): the raw row's maximum and log_z.
  Candidate best{-INFINITY, INT32_MAX};
  for (int i = threadIdx.x; i < vocab; i += kThreads) {
    const Candidate c{Sanitize(logits[i]), i};
    if (Better(c, best)) best = c;
  }
  best = BlockBest(best, best_scratch);
  const float raw_max = best.value;
  float sum = 0.0f;
  for (int i = threadIdx.x; i < vocab; i += kThreads) sum += __expf(Sanitize(logits[i]) - raw_max);
  const float log_z = raw_max + logf(BlockSum(sum, scratch));

  // The most likely tokens, one block-wide pass each, in order, before the row is rewritten.
  SampleOutput* out = p.out + blockIdx.x;
  Candidate previous{INFINITY, -1};
  const int num_top = min(row.num_top_logprobs, kMaxTopLogprobs);
  for (int n = 0; n < num_top; ++n) {
    Candidate c{-INFINITY, INT32_MAX};
    for (int i = threadIdx.x; i < vocab; i += kThreads) {
      const Candidate x{Sanitize(logits[i]), i};
      if (Better(previous, x) && Better(x, c)) c = x;
    }
    c = BlockBest(c, best_scratch);
    if (threadIdx.x == 0) {
      out->top_tokens[n] = c.index;
      out->top_logprobs[n] = c.value - log_z;
    }
    previous = c;
  }

  // The logits the choice is made from: the raw row, or the row rewritten in place with the
  // adjustments made and every token not allowed at -inf (executor/sampler.h's rule).
  const bool rewritten = row.allowed != nullptr || row.num_adjustments > 0;
  float max_logit = raw_max;
  int32_t token = best.index;
  if (rewritten) {
    __syncthreads();  // every thread is done reading the raw row
    for (int e = threadIdx.x; e < row.num_adjustments; e += kThreads) {
      LogitAdjustment& a = row.adjustments[e];
      const float raw = logits[a.token];
      a.raw = raw;
      float x = raw + a.bias;
      if (a.repetition != 1.0f) x = x > 0.0f ? x / a.repetition : x * a.repetition;
      logits[a.token] = x - a.subtract;
    }
    __syncthreads();  // the adjusted values are in before the mask and the maximum read them
    Candidate allowed_best{-INFINITY, INT32_MAX};
    for (int i = threadIdx.x; i < vocab; i += kThreads) {
      if (row.allowed != nullptr && ((row.allowed[i >> 5] >> (i & 31)) & 1u) == 0) {
        logits[i] = -INFINITY;
        continue;
      }
      const Candidate c{Sanitize(logits[i]), i};
      if (Better(c, allowed_best)) allowed_best = c;
    }
    // Its barriers also make the rewritten row visible to the whole block.
    allowed_best = BlockBest(allowed_best, best_scratch);
    max_logit = allowed_best.value;
    token = allowed_best.index == INT32_MAX ? -1 : allowed_best.index;  // -1: none allowed
  }

  if (token >= 0 && row.temperature > 0.0f && row.top_k != 1) {
    const float inv_t = 1.0f / row.temperature;
    // The top_k cut: the largest key x with at least top_k keys >= x.
    uint32_t threshold = 0;
    if (row.top_k > 0 && row.top_k < vocab) {
      for (int bit = 31; bit >= 0; --bit) {
        const uint32_t candidate = threshold | (1u << bit);
        float count = 0.0f;
        for (int i = threadIdx.x; i < vocab; i += kThreads) {
          count += OrderedKey(logits[i]) >= candidate ? 1.0f : 0.0f;
        }
        if (BlockSum(count, scratch) >= static_cast<float>(row.top_k)) threshold = candidate;
      }
    }
    // min_p's cut, like top_k's a cut by value; and in a rewritten row the -inf of the tokens not
    // allowed is never kept (their mass is 0, but they must not be the fallback below either).
    if (row.min_p > 0.0f) {
      threshold = max(threshold, OrderedKey(max_logit + row.temperature * logf(row.min_p)));
    }
    if (rewritten) threshold = max(threshold, OrderedKey(-INFINITY) + 1);
    auto kept_mass = [&](uint32_t cut) {
      float mass = 0.0f;
      for (int i = threadIdx.x; i < vocab; i += kThreads) {
        const float x = logits[i];
        if (OrderedKey(x) >= cut) mass += __expf((x - max_logit) * inv_t);
      }
      return BlockSum(mass, scratch);
    };
    float total = kept_mass(threshold);
    if (row.top_p < 1.0f) {
      // The top_p cut: the largest key y (above the top_k cut) keeping mass >= top_p * total.
      const float goal = row.top_p * total;
      uint32_t cut = 0;
      for (int bit = 31; bit >= 0; --bit) {
        const uint32_t candidate = cut | (1u << bit);
        if (candidate <= threshold || kept_mass(candidate) >= goal) cut = candidate;
      }
      if (cut > threshold) {
        threshold = cut;
        total = kept_mass(threshold);
      }
    }
    // Inverse CDF in token-id order: each thread owns a contiguous range.
    const float target = static_cast<float>(SampleUniform(row.seed, row.sample_index)) * total;
    const int per_thread = (vocab + kThreads - 1) / kThreads;
    const int begin = min(vocab, static_cast<int>(threadIdx.x) * per_thread);
    const int end = min(vocab, begin + per_thread);
    float mine = 0.0f;
    int last_kept = -1;
    for (int i = begin; i < end; ++i) {
      const float x = logits[i];
      if (OrderedKey(x) >= threshold) {
        mine += __expf((x - max_logit) * inv_t);
        last_kept = i;
      }
    }
    // Inclusive scan of the per-thread masses.
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float inclusive = mine;
    for (int offset = 1; offset < 32; offset <<= 1) {
      const float up = __shfl_up_sync(0xffffffffu, inclusive, offset);
      if (lane >= offset) inclusive += up;
    }
    __syncthreads();
    if (lane == 31) scratch[warp] = inclusive;
    if (threadIdx.x == 0) chosen_s = -1;
    __syncthreads();
    // The warps' exclusive prefix, by a shuffle scan of their totals (one per lane).
    const float warp_total = scratch[lane];
    float warp_prefix = warp_total;
    for (int offset = 1; offset < 32; offset <<= 1) {
      const float up = __shfl_up_sync(0xffffffffu, warp_prefix, offset);
      if (lane >= offset) warp_prefix += up;
    }
    const float warp_base = __shfl_sync(0xffffffffu, warp_prefix - warp_total, warp);
    inclusive += warp_base;
    const float exclusive = inclusive - mine;
    if (mine > 0.0f && target >= exclusive && target < inclusive) {
      float running = exclusive;
      int pick = last_kept;
      for (int i = begin; i < end; ++i) {
        const float x = logits[i];
        if (OrderedKey(x) >= threshold) {
          running += __expf((x - max_logit) * inv_t);
          if (target < running) {
            pick = i;
            break;
          }
        }
      }
      chosen_s = pick;
    }
    __syncthreads();
    if (chosen_s >= 0) {
      token = chosen_s;
    } else {
      // Rounding put the target past the end: take the last kept token.
      const Candidate last = BlockBest(Candidate{static_cast<float>(last_kept), 0}, best_scratch);
      if (last.value >= 0.0f) token = static_cast<int32_t>(last.value);
    }
  }

  if (threadIdx.x == 0) {
    out->token = token;
    float chosen = token >= 0 ? logits[token] : 0.0f;  // allowed, so not rewritten to -inf
    if (token >= 0 && row.num_adjustments > 0) {
      // An adjusted token's model logit is the one the rewrite kept.
      int lo = 0, hi = row.num_adjustments;
      while (lo < hi) {
        const int mid = (lo + hi) / 2;
        if (row.adjustments[mid].token < token) {
          lo = mid + 1;
        } else {
          hi = mid;
        }
      }
      if (lo < row.num_adjustments && row.adjustments[lo].token == token) {
        chosen = row.adjustments[lo].raw;
      }
    }
    out->logprob = token >= 0 ? Sanitize(chosen) - log_z : 0.0f;
  }
}

}  // namespace

cudaError_t LaunchSampling(const SamplingKernelParams& params, cudaStream_t stream) {
  if (params.logits == nullptr || params.rows == nullptr || params.out == nullptr ||
      params.vocab <= 0 || params.vocab > INT32_MAX / 2 || params.num_rows < 0 ||
      params.num_rows > INT32_MAX) {
    return cudaErrorInvalidValue;
  }
  if (params.num_rows == 0) return cudaSuccess;
  return LaunchKernel(SamplingKernel, dim3(static_cast<unsigned>(params.num_rows)), dim3(kThreads),
                      0, stream, params);
}

}  // namespace convoy::kernels
