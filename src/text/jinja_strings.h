// Python's string behaviour, as Jinja2 templates observe it, over UTF-8 std::strings: code point
// indexing, str.strip()/split() with Python's idea of whitespace, repr() and float repr.
//
// Case mapping (upper/lower/title/capitalize) covers ASCII, Latin-1 (ß included) and basic
// Cyrillic; other scripts' letters (Greek, Latin Extended, ...) pass through unchanged where Python
// would map them. Chat templates apply case mapping to roles, not to message text, so this has
// not mattered for the templates we render.
#ifndef CONVOY_TEXT_JINJA_STRINGS_H_
#define CONVOY_TEXT_JINJA_STRINGS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"

namespace convoy::jinja {

// absl::StrCat that also takes std::string_view (Debian's abseil has its own string_view type).
template <typename T>
decltype(auto) CatArg(const T& value) {
  if constexpr (std::is_same_v<T, std::string_view>) {
    return absl::string_view(value.data(), value.size());
  } else {
    return (value);
  }
}
template <typename... Args>
std::string Cat(const Args&... args) {
  return absl::StrCat(CatArg(args)...);
}

// Decodes UTF-8; an invalid byte decodes as U+FFFD, so every input has a decoding.
std::u32string DecodeUtf8(std::string_view text);
void AppendUtf8(char32_t code_point, std::string* out);
std::string EncodeUtf8(std::u32string_view code_points);
// Python's len(): code points.
int64_t CodePointCount(std::string_view text);

// Python's str.isspace() for one code point (what strip() and split() remove).
bool IsPythonSpace(char32_t c);
// str.splitlines() boundaries, as used by Jinja's indent filter.
bool IsLineBoundary(char32_t c);

// str.strip / lstrip / rstrip; `chars` empty-optional means whitespace.
std::string PyStrip(std::string_view text, const std::optional<std::string>& chars, bool left,
                    bool right);
// str.split / rsplit: no `sep` splits on runs of whitespace. REQUIRES: sep, if given, non-empty.
std::vector<std::string> PySplit(std::string_view text, const std::optional<std::string>& sep,
                                 int64_t maxsplit, bool from_right);
std::vector<std::string> PySplitLines(std::string_view text);
// str.replace; count < 0 replaces all.
std::string PyReplace(std::string_view text, std::string_view old_text, std::string_view new_text,
                      int64_t count);
// str.find (code point index, -1 when absent) and str.count.
int64_t PyFind(std::string_view text, std::string_view sub);
int64_t PyCount(std::string_view text, std::string_view sub);

// Whether Python counts the code point as a cased letter (as title() and islower() need to know):
// ASCII, Latin-1 and Latin Extended letters, Greek and Cyrillic.
bool IsCased(char32_t c);
// str.upper() and str.lower().
std::string PyUpper(std::string_view text);
std::string PyLower(std::string_view text);
// str.capitalize(): first character upper, the rest lower.
std::string PyCapitalize(std::string_view text);
// str.title(): a letter that follows a non-letter is upper, other letters lower.
std::string PyTitle(std::string_view text);
// Jinja's `title` filter: capitalizes each piece after runs of whitespace, '-', '(', '{', '[', '<'.
std::string JinjaTitle(std::string_view text);

// repr() of a str: quotes chosen as Python chooses them, escapes for non-printable characters.
// Printability follows Python for ASCII, Latin-1 and the common format and space characters; other
// rarely seen non-printable code points are written as they are.
std::string PyRepr(std::string_view text);
// repr() of a float: the shortest text that reads back to the same double, in Python's layout
// (1.0, 1e+16, 1.5e-07, inf, nan).
std::string PyFloatRepr(double value);
// json.dumps of a str with ensure_ascii as given.
void AppendJsonString(std::string_view text, bool ensure_ascii, std::string* out);

}  // namespace convoy::jinja

#endif  // CONVOY_TEXT_JINJA_STRINGS_H_
