// The shape of the paged KV cache, shared by the allocator's owner and the executors.
#ifndef CONVOY_KV_KV_CACHE_SPEC_H_
#define CONVOY_KV_KV_CACHE_SPEC_H_

#include <cstdint>

namespace convoy {

// The element type K and V are stored in.
enum class KvDtype {
  kF32,
  kF16,
  kBF16,
  // Symmetric 8-bit integers with one bf16 scale per token, KV head and k|v (amax / 127, rounded
  // up): a token's scale depends on its own values only, so writing it rescales nothing else.
  kInt8,
};

// "f32", "f16", "bf16", "int8".
inline const char* KvDtypeName(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kF16:
      return "f16";
    case KvDtype::kBF16:
      return "bf16";
    case KvDtype::kInt8:
      return "int8";
    default:
      return "f32";
  }
}

struct KvCacheSpec {
  int32_t num_layers = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t block_size = 16;  // tokens per block
  KvDtype dtype = KvDtype::kF32;
  int32_t num_blocks = 0;

  // Bytes of one stored K or V element.
  int32_t BytesPerElement() const {
    switch (dtype) {
      case KvDtype::kF32:
        return 4;
      case KvDtype::kInt8:
        return 1;
      default:
        return 2;
    }
  }
  // Bytes of the scale kept per token, KV head and k|v (kInt8's; 0 for the others).
  int32_t ScaleBytes() const { return dtype == KvDtype::kInt8 ? 2 : 0; }
  // K and V of every layer for block_size tokens, their scales included.
  int64_t BytesPerBlock() const {
    return int64_t{2} * num_layers * num_kv_heads * block_size *
           (int64_t{head_dim} * BytesPerElement() + ScaleBytes());
  }
  // How many blocks a memory budget holds.
  int32_t BlocksForBudget(int64_t budget_bytes) const {
    return static_cast<int32_t>(budget_bytes / BytesPerBlock());
  }
};

}  // namespace convoy

#endif  // CONVOY_KV_KV_CACHE_SPEC_H_
