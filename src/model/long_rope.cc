#include "model/long_rope.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace convoy {

double LongRopeAttentionFactor(double factor, int64_t original_max_position_embeddings) {
  if (factor <= 1.0) return 1.0;
  return std::sqrt(1.0 + std::log(factor) /
                             std::log(static_cast<double>(original_max_position_embeddings)));
}

absl::Status ValidateLongRope(const ModelConfig& config) {
  const RopeScaling& s = config.rope_scaling;
  if (!config.family()->long_rope) {
    std::vector<std::string> families;
    for (const ModelFamily& family : ModelFamilies()) {
      if (family.long_rope) families.push_back(absl::StrCat("\"", family.architecture, "\""));
    }
    return absl::UnimplementedError(absl::StrFormat(
        "field 'rope_scaling.rope_type' is \"longrope\": LongRoPE scaling is supported for %s "
        "only, found %s",
        absl::StrJoin(families, ", "), config.architecture));
  }
  const size_t pairs = static_cast<size_t>(config.RotaryDim() / 2);
  for (const auto& [field, factors] :
       {std::pair<const char*, const std::vector<double>*>{"short_factor", &s.short_factor},
        {"long_factor", &s.long_factor}}) {
    if (factors->size() != pairs) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "field 'rope_scaling.%s' must hold one factor per rotary pair, %d, found %d", field,
          pairs, factors->size()));
    }
    for (double factor : *factors) {
      if (!(factor > 0) || !std::isfinite(factor)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "field 'rope_scaling.%s' must hold positive numbers, found %g", field, factor));
      }
    }
  }
  if (s.original_max_position_embeddings <= 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "field 'original_max_position_embeddings' must be positive for LongRoPE, found %d",
        s.original_max_position_embeddings));
  }
  if (!(s.factor > 0) || !std::isfinite(s.factor)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "field 'rope_scaling.factor' must be a positive number, found %g", s.factor));
  }
  if (!(s.attention_factor > 0) || !std::isfinite(s.attention_factor)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("field 'rope_scaling.attention_factor' must be a positive number, found %g",
                        s.attention_factor));
  }
  return absl::OkStatus();
}

}  // namespace convoy
