#include "model/rope_frequencies.h"

#include <cmath>
#include <cstdint>
#include <numbers>

namespace convoy {

std::vector<float> RopeInverseFrequencies(const ModelConfig& config) {
  const int64_t dim = config.RotaryDim();
  std::vector<float> inv_freq(dim / 2);
  const RopeScaling& s = config.rope_scaling;
  const std::vector<double>& long_rope = config.LongRopeFactors();
  for (int64_t i = 0; i < dim / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
    float inv =
        static_cast<float>(1.0 / std::pow(config.rope_theta, static_cast<double>(exponent)));
    if (!long_rope.empty()) {
      // 1 / (factor * base^exponent).
      const float base_power =
          static_cast<float>(std::pow(config.rope_theta, static_cast<double>(exponent)));
      inv = 1.0f / (static_cast<float>(long_rope[static_cast<size_t>(i)]) * base_power);
    } else if (s.rope_type == "llama3") {
      // Long wavelengths are slowed by `factor`, short ones kept, the band between blended.
      const double low_wavelen = s.original_max_position_embeddings / s.low_freq_factor;
      const double high_wavelen = s.original_max_position_embeddings / s.high_freq_factor;
      const double wavelen = 2.0 * std::numbers::pi / inv;
      if (wavelen > low_wavelen) {
        inv = static_cast<float>(inv / s.factor);
      } else if (wavelen >= high_wavelen) {
        const double smooth = (s.original_max_position_embeddings / wavelen - s.low_freq_factor) /
                              (s.high_freq_factor - s.low_freq_factor);
        inv = static_cast<float>((1.0 - smooth) * inv / s.factor + smooth * inv);
      }
    }
    inv_freq[static_cast<size_t>(i)] = inv;
  }
  return inv_freq;
}

float RopeCosSinScale(const ModelConfig& config) {
  return config.LongRopeFactors().empty()
             ? 1.0f
             : static_cast<float>(config.rope_scaling.attention_factor);
}

}  // namespace convoy
