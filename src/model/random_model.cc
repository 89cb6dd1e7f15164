// Compiled with -ffp-contract=off (see CMakeLists.txt): the normal samples use only +, -, *, / and
// sqrt, which IEEE 754 rounds the same way everywhere, so that the bytes do not depend on the CPU
// or on the C library's transcendental functions.
#include "model/random_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/half.h"
#include "common/xoshiro.h"
#include "convoy/status_macros.h"
#include "model/file_util.h"
#include "model/model_weights.h"
#include "model/safetensors.h"
#include "nlohmann/json.hpp"

namespace convoy {
namespace {

uint64_t Fnv1a64(const std::string& text) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

// Natural logarithm of a positive finite x from exactly rounded operations only: x = m * 2^e with
// m in [sqrt(1/2), sqrt(2)), log(m) = 2 atanh(s) with s = (m - 1) / (m + 1), |s| < 0.172, whose
// series converges to double precision in 12 terms.
double PortableLog(double x) {
  int exponent;
  double m = std::frexp(x, &exponent);  // exact; m in [0.5, 1)
  if (m < 0.70710678118654752440) {
    m *= 2;
    --exponent;
  }
  const double s = (m - 1) / (m + 1);
  const double s2 = s * s;
  double series = 1.0 / 23;
  for (int k = 10; k >= 0; --k) series = 1.0 / (2 * k + 1) + s2 * series;
  constexpr double kLn2 = 0.693147180559945309417;
  return exponent * kLn2 + 2 * s * series;
}

// Standard normal samples by the polar form of the Box-Muller transform (Marsaglia), which needs
// a logarithm and a square root but no sine or cosine.
class NormalStream {
 public:
  explicit NormalStream(uint64_t seed) : uniform_(seed) {}

  double Next() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u, v, s;
    do {
      u = 2 * uniform_.Uniform() - 1;
      v = 2 * uniform_.Uniform() - 1;
      s = u * u + v * v;
    } while (s >= 1 || s == 0);
    const double factor = std::sqrt(-2 * PortableLog(s) / s);
    spare_ = v * factor;
    has_spare_ = true;
    return u * factor;
  }

 private:
  Xoshiro256 uniform_;
  bool has_spare_ = false;
  double spare_ = 0;
};

uint64_t TensorSeed(uint64_t seed, const std::string& name) {
  uint64_t state = seed;
  return SplitMix64(state) ^ Fnv1a64(name);
}

// The distribution of a tensor's values: mean + stddev * N(0, 1).
struct Distribution {
  double mean = 0;
  double stddev = 1;
};

Distribution DistributionFor(const TensorShape& tensor) {
  const std::string& name = tensor.name;
  auto ends_with = [&](const char* suffix) {
    const size_t length = std::strlen(suffix);
    return name.size() >= length && name.compare(name.size() - length, length, suffix) == 0;
  };
  if (name == "model.embed_tokens.weight") return {0.0, 1.0};
  if (ends_with("norm.weight")) return {1.0, 0.1};
  // A projection [out, in].
  return {0.0, 1.0 / std::sqrt(static_cast<double>(tensor.shape[1]))};
}

void FillTensor(const TensorShape& tensor, uint64_t seed, DType dtype,
                std::vector<std::byte>& bytes) {
  NormalStream normal(TensorSeed(seed, tensor.name));
  const Distribution distribution = DistributionFor(tensor);
  const size_t count = bytes.size() / static_cast<size_t>(DTypeSize(dtype));
  std::byte* out = bytes.data();
  for (size_t i = 0; i < count; ++i) {
    const float value = static_cast<float>(distribution.mean + distribution.stddev * normal.Next());
    if (dtype == DType::kF32) {
      std::memcpy(out + 4 * i, &value, 4);
    } else {
      const uint16_t half = dtype == DType::kBF16 ? FloatToBF16(value) : FloatToFP16(value);
      std::memcpy(out + 2 * i, &half, 2);
    }
  }
}

int64_t TensorBytes(const TensorShape& tensor, DType dtype) {
  int64_t bytes = DTypeSize(dtype);
  for (int64_t dim : tensor.shape) bytes *= dim;
  return bytes;
}

// Splits the tensors, in order, into `num_shards` contiguous non-empty runs of about equal bytes.
// Requires 1 <= num_shards <= tensors.size().
std::vector<int> AssignShards(const std::vector<TensorShape>& tensors, DType dtype,
                              int num_shards) {
  int64_t total = 0;
  for (const TensorShape& tensor : tensors) total += TensorBytes(tensor, dtype);
  const int64_t count = static_cast<int64_t>(tensors.size());
  std::vector<int> shard_of(tensors.size());
  int64_t before = 0;  // bytes of the tensors before tensor i
  int previous = 0;
  for (int64_t i = 0; i < count; ++i) {
    // The shard whose byte range holds the tensor's first byte, moving at most one shard per
    // tensor, and late enough that the remaining tensors can fill the remaining shards.
    int64_t shard = before * num_shards / total;
    shard = std::min<int64_t>(shard, previous + 1);
    shard = std::max<int64_t>({shard, previous, num_shards - (count - i)});
    if (i == 0) shard = 0;
    shard_of[static_cast<size_t>(i)] = static_cast<int>(shard);
    previous = static_cast<int>(shard);
    before += TensorBytes(tensors[static_cast<size_t>(i)], dtype);
  }
  return shard_of;
}

absl::Status WriteShard(const std::string& path, const std::vector<TensorShape>& tensors,
                        uint64_t seed, DType dtype) {
  std::vector<TensorSpec> specs;
  specs.reserve(tensors.size());
  for (const TensorShape& tensor : tensors) specs.push_back({tensor.name, dtype, tensor.shape});
  return WriteSafetensors(path, specs, [&](size_t index, std::vector<std::byte>& bytes) {
    FillTensor(tensors[index], seed, dtype, bytes);
    return absl::OkStatus();
  });
}

absl::Status RemoveIfExists(const std::string& path) {
  std::error_code error;
  std::filesystem::remove(path, error);
  if (error) return ErrnoToStatus(error.value(), path, "remove");
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteRandomModel(const std::string& dir, const RandomModelOptions& options) {
  ModelConfig config = options.config;
  config.torch_dtype = options.dtype;
  absl::Status valid = config.Validate();
  if (!valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("random model config: ", valid.message()));
  }
  const std::vector<TensorShape> tensors = LlamaTensorShapes(config);
  if (options.num_shards < 1 || options.num_shards > static_cast<int>(tensors.size()) ||
      options.num_shards > 99999) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "num_shards must be in [1, %d] (the tensor count), found %d",
        std::min<int>(static_cast<int>(tensors.size()), 99999), options.num_shards));
  }

  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return ErrnoToStatus(error.value(), dir, "create directory");
  RETURN_IF_ERROR(WriteStringToFile(JoinPath(dir, "config.json"), ModelConfigToJson(config)));

  const std::string single_path = JoinPath(dir, "model.safetensors");
  const std::string index_path = JoinPath(dir, "model.safetensors.index.json");
  if (options.num_shards == 1) {
    RETURN_IF_ERROR(RemoveIfExists(index_path));
    return WriteShard(single_path, tensors, options.seed, options.dtype);
  }

  RETURN_IF_ERROR(RemoveIfExists(single_path));
  const std::vector<int> shard_of = AssignShards(tensors, options.dtype, options.num_shards);
  std::map<std::string, std::string> weight_map;
  int64_t total_bytes = 0;
  for (int shard = 0; shard < options.num_shards; ++shard) {
    const std::string file_name =
        absl::StrFormat("model-%05d-of-%05d.safetensors", shard + 1, options.num_shards);
    std::vector<TensorShape> shard_tensors;
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (shard_of[i] != shard) continue;
      shard_tensors.push_back(tensors[i]);
      weight_map[tensors[i].name] = file_name;
      total_bytes += TensorBytes(tensors[i], options.dtype);
    }
    RETURN_IF_ERROR(
        WriteShard(JoinPath(dir, file_name), shard_tensors, options.seed, options.dtype));
  }
  nlohmann::ordered_json index;
  index["metadata"] = {{"total_size", total_bytes}};
  index["weight_map"] = weight_map;
  return WriteStringToFile(index_path, index.dump(2) + "\n");
}

}  // namespace convoy
