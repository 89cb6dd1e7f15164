// abseil 20220623 as Debian builds it has an absl::string_view of its own, which std::string_view
// does not convert to or from. The text module works in std::string_view and converts where it
// meets abseil: StrCat and friends, hash map lookups, Status messages.
#ifndef CONVOY_TEXT_STRING_VIEWS_H_
#define CONVOY_TEXT_STRING_VIEWS_H_

#include <string_view>

#include "absl/strings/string_view.h"

namespace convoy::tokenizer_internal {

inline absl::string_view ToAbsl(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}
inline std::string_view ToStd(absl::string_view s) { return std::string_view(s.data(), s.size()); }

}  // namespace convoy::tokenizer_internal

#endif  // CONVOY_TEXT_STRING_VIEWS_H_
