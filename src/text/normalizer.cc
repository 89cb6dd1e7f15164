#include "text/normalizer.h"

#include <cstdlib>

#include "utf8proc.h"

namespace convoy::tokenizer_internal {
namespace {

// `text` in `form`, or unchanged when it is not valid UTF-8.
std::string ToUnicodeForm(const std::string& text, UnicodeForm form) {
  int options = UTF8PROC_STABLE;
  switch (form) {
    case UnicodeForm::kNfc:
      options |= UTF8PROC_COMPOSE;
      break;
    case UnicodeForm::kNfd:
      options |= UTF8PROC_DECOMPOSE;
      break;
    case UnicodeForm::kNfkc:
      options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
      break;
    case UnicodeForm::kNfkd:
      options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
      break;
  }
  utf8proc_uint8_t* mapped = nullptr;
  // With an explicit length, a NUL inside the text is a code point like any other.
  const utf8proc_ssize_t length = utf8proc_map(
      reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
      static_cast<utf8proc_ssize_t>(text.size()), &mapped, static_cast<utf8proc_option_t>(options));
  if (length < 0) return text;
  std::string out(reinterpret_cast<const char*>(mapped), static_cast<size_t>(length));
  std::free(mapped);
  return out;
}

}  // namespace

void Normalizer::AddPrepend(std::string_view prefix) {
  steps_.push_back({Kind::kPrepend, std::string(prefix), ""});
}

void Normalizer::AddReplace(std::string_view pattern, std::string_view content) {
  steps_.push_back({Kind::kReplace, std::string(pattern), std::string(content)});
}

void Normalizer::AddUnicodeForm(UnicodeForm form) {
  steps_.push_back({Kind::kUnicode, "", "", form});
}

std::string Normalizer::Normalize(std::string_view text) const {
  std::string current(text);
  std::string next;
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Kind::kPrepend:
        if (!current.empty()) current.insert(0, step.pattern);
        continue;
      case Kind::kUnicode:
        current = ToUnicodeForm(current, step.form);
        continue;
      case Kind::kReplace:
        break;
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
