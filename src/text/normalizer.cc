#include "text/normalizer.h"

namespace convoy::tokenizer_internal {

void Normalizer::AddPrepend(std::string_view prefix) {
  steps_.push_back({true, std::string(prefix), ""});
}

void Normalizer::AddReplace(std::string_view pattern, std::string_view content) {
  steps_.push_back({false, std::string(pattern), std::string(content)});
}

std::string Normalizer::Normalize(std::string_view text) const {
  std::string current(text);
  std::string next;
  for (const Step& step : steps_) {
    if (step.prepend) {
      if (!current.empty()) current.insert(0, step.pattern);
      continue;
    }
    next.clear();
    size_t prev = 0;
    size_t pos = current.find(step.pattern);
    while (pos != std::string::npos) {
      next.append(current, prev, pos - prev);
      next.append(step.content);
      prev = pos + step.pattern.size();
      pos = current.find(step.pattern, prev);
    }
    next.append(current, prev, std::string::npos);
    current.swap(next);
  }
  return current;
}

}  // namespace convoy::tokenizer_internal
