#include "text/jinja_strings.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace convoy::jinja {
namespace {

constexpr char32_t kReplacement = 0xFFFD;

bool IsAsciiLower(char32_t c) { return c >= 'a' && c <= 'z'; }
bool IsAsciiUpper(char32_t c) { return c >= 'A' && c <= 'Z'; }
// Simple case mapping for ASCII, Latin-1 and the Cyrillic basic block (ß and the other
// multi-character mappings are handled where they occur).
char32_t ToUpper(char32_t c) {
  if (IsAsciiLower(c)) return c - 0x20;
  if (c >= 0xE0 && c <= 0xFE && c != 0xF7) return c - 0x20;
  if (c == 0xFF) return 0x178;
  if (c == 0xB5) return 0x39C;
  if (c >= 0x430 && c <= 0x44F) return c - 0x20;
  if (c >= 0x450 && c <= 0x45F) return c - 0x50;
  return c;
}

char32_t ToLower(char32_t c) {
  if (IsAsciiUpper(c)) return c + 0x20;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 0x20;
  if (c == 0x178) return 0xFF;
  if (c >= 0x410 && c <= 0x42F) return c + 0x20;
  if (c >= 0x400 && c <= 0x40F) return c + 0x50;
  return c;
}

constexpr char32_t kSharpS = 0xDF;  // ß: upper "SS", title "Ss"

void AppendUpper(char32_t c, std::string* out) {
  if (c == kSharpS) {
    out->append("SS");
  } else {
    AppendUtf8(ToUpper(c), out);
  }
}

void AppendTitle(char32_t c, std::string* out) {
  if (c == kSharpS) {
    out->append("Ss");
  } else {
    AppendUtf8(ToUpper(c), out);
  }
}

bool IsPrintable(char32_t c) {
  if (c < 0x20 || c == 0x7F) return false;
  if (c < 0x7F) return true;
  if (c <= 0xA0 || c == 0xAD) return false;
  if (c == 0x1680 || c == 0x3000 || c == 0xFEFF) return false;
  if (c >= 0x2000 && c <= 0x200F) return false;
  if (c >= 0x2028 && c <= 0x202F) return false;
  if (c >= 0x205F && c <= 0x206F) return false;
  if (c >= 0xE000 && c <= 0xF8FF) return false;
  if (c >= 0xFFF9 && c <= 0xFFFB) return false;
  return c < 0xF0000;
}

bool InSet(char32_t c, const std::u32string& set) { return set.find(c) != std::u32string::npos; }

void AppendHex(uint32_t value, int digits, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (int shift = (digits - 1) * 4; shift >= 0; shift -= 4)
    out->push_back(kHex[(value >> shift) & 0xF]);
}

}  // namespace

bool IsCased(char32_t c) {
  if (IsAsciiLower(c) || IsAsciiUpper(c)) return true;
  if (c >= 0xC0 && c <= 0x24F) return c != 0xD7 && c != 0xF7;
  return c >= 0x370 && c <= 0x52F;
}

std::u32string DecodeUtf8(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const auto byte = static_cast<unsigned char>(text[i]);
    int extra = 0;
    char32_t c = 0;
    if (byte < 0x80) {
      out.push_back(byte);
      ++i;
      continue;
    } else if ((byte & 0xE0) == 0xC0) {
      extra = 1;
      c = byte & 0x1F;
    } else if ((byte & 0xF0) == 0xE0) {
      extra = 2;
      c = byte & 0x0F;
    } else if ((byte & 0xF8) == 0xF0) {
      extra = 3;
      c = byte & 0x07;
    } else {
      out.push_back(kReplacement);
      ++i;
      continue;
    }
    if (i + extra >= text.size()) {
      out.push_back(kReplacement);
      ++i;
      continue;
    }
    bool valid = true;
    for (int k = 1; k <= extra; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xC0) != 0x80) {
        valid = false;
        break;
      }
      c = (c << 6) | (next & 0x3F);
    }
    static constexpr char32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (!valid || c < kMin[extra] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) {
      out.push_back(kReplacement);
      ++i;
      continue;
    }
    out.push_back(c);
    i += extra + 1;
  }
  return out;
}

void AppendUtf8(char32_t c, std::string* out) {
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (c >> 18)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::string EncodeUtf8(std::u32string_view code_points) {
  std::string out;
  out.reserve(code_points.size());
  for (char32_t c : code_points) AppendUtf8(c, &out);
  return out;
}

int64_t CodePointCount(std::string_view text) {
  int64_t count = 0;
  for (char ch : text) {
    if ((static_cast<unsigned char>(ch) & 0xC0) != 0x80) ++count;
  }
  return count;
}

bool IsPythonSpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

bool IsLineBoundary(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || (c >= 0x1C && c <= 0x1E) ||
         c == 0x85 || c == 0x2028 || c == 0x2029;
}

std::string PyStrip(std::string_view text, const std::optional<std::string>& chars, bool left,
                    bool right) {
  const std::u32string cps = DecodeUtf8(text);
  const std::u32string set = chars ? DecodeUtf8(*chars) : std::u32string();
  auto strip = [&](char32_t c) { return chars ? InSet(c, set) : IsPythonSpace(c); };
  size_t begin = 0;
  size_t end = cps.size();
  if (left) {
    while (begin < end && strip(cps[begin])) ++begin;
  }
  if (right) {
    while (end > begin && strip(cps[end - 1])) --end;
  }
  return EncodeUtf8(std::u32string_view(cps).substr(begin, end - begin));
}

std::vector<std::string> PySplit(std::string_view text, const std::optional<std::string>& sep,
                                 int64_t maxsplit, bool from_right) {
  std::vector<std::string> parts;
  if (sep) {
    if (!from_right) {
      size_t start = 0;
      while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
        const size_t hit = text.find(*sep, start);
        if (hit == std::string_view::npos) break;
        parts.emplace_back(text.substr(start, hit - start));
        start = hit + sep->size();
      }
      parts.emplace_back(text.substr(start));
      return parts;
    }
    size_t end = text.size();
    while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
      if (end < sep->size()) break;
      const size_t hit = text.rfind(*sep, end - sep->size());
      if (hit == std::string_view::npos) break;
      parts.emplace_back(text.substr(hit + sep->size(), end - hit - sep->size()));
      end = hit;
    }
    parts.emplace_back(text.substr(0, end));
    return {parts.rbegin(), parts.rend()};
  }
  // Runs of whitespace separate words; leading and trailing whitespace yields no empty words.
  std::u32string cps = DecodeUtf8(text);
  if (from_right) std::reverse(cps.begin(), cps.end());
  size_t i = 0;
  while (i < cps.size()) {
    while (i < cps.size() && IsPythonSpace(cps[i])) ++i;
    if (i == cps.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
      std::u32string rest = cps.substr(i);
      if (from_right) std::reverse(rest.begin(), rest.end());
      parts.push_back(EncodeUtf8(rest));
      break;
    }
    size_t j = i;
    while (j < cps.size() && !IsPythonSpace(cps[j])) ++j;
    std::u32string word = cps.substr(i, j - i);
    if (from_right) std::reverse(word.begin(), word.end());
    parts.push_back(EncodeUtf8(word));
    i = j;
  }
  if (from_right) std::reverse(parts.begin(), parts.end());
  return parts;
}

std::vector<std::string> PySplitLines(std::string_view text) {
  const std::u32string cps = DecodeUtf8(text);
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t i = 0; i < cps.size(); ++i) {
    if (!IsLineBoundary(cps[i])) continue;
    lines.push_back(EncodeUtf8(std::u32string_view(cps).substr(start, i - start)));
    if (cps[i] == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') ++i;
    start = i + 1;
  }
  if (start < cps.size()) lines.push_back(EncodeUtf8(std::u32string_view(cps).substr(start)));
  return lines;
}

std::string PyReplace(std::string_view text, std::string_view old_text, std::string_view new_text,
                      int64_t count) {
  std::string out;
  if (old_text.empty()) {
    // Python inserts the replacement before every character and at the end.
    const std::u32string cps = DecodeUtf8(text);
    int64_t done = 0;
    for (char32_t c : cps) {
      if (count < 0 || done < count) {
        out.append(new_text);
        ++done;
      }
      AppendUtf8(c, &out);
    }
    if (count < 0 || done < count) out.append(new_text);
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t hit = text.find(old_text, start);
    if (hit == std::string_view::npos) break;
    out.append(text.substr(start, hit - start));
    out.append(new_text);
    start = hit + old_text.size();
    ++done;
  }
  out.append(text.substr(start));
  return out;
}

int64_t PyFind(std::string_view text, std::string_view sub) {
  const size_t hit = text.find(sub);
  if (hit == std::string_view::npos) return -1;
  return CodePointCount(text.substr(0, hit));
}

int64_t PyCount(std::string_view text, std::string_view sub) {
  if (sub.empty()) return CodePointCount(text) + 1;
  int64_t count = 0;
  for (size_t hit = text.find(sub); hit != std::string_view::npos;
       hit = text.find(sub, hit + sub.size())) {
    ++count;
  }
  return count;
}

std::string PyUpper(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t c : DecodeUtf8(text)) AppendUpper(c, &out);
  return out;
}

std::string PyLower(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t c : DecodeUtf8(text)) AppendUtf8(ToLower(c), &out);
  return out;
}

std::string PyCapitalize(std::string_view text) {
  std::string out;
  bool first = true;
  for (char32_t c : DecodeUtf8(text)) {
    if (first) {
      AppendTitle(c, &out);
    } else {
      AppendUtf8(ToLower(c), &out);
    }
    first = false;
  }
  return out;
}

std::string PyTitle(std::string_view text) {
  std::string out;
  bool previous_cased = false;
  for (char32_t c : DecodeUtf8(text)) {
    if (previous_cased) {
      AppendUtf8(ToLower(c), &out);
    } else {
      AppendTitle(c, &out);
    }
    previous_cased = IsCased(c);
  }
  return out;
}

std::string JinjaTitle(std::string_view text) {
  std::string out;
  bool at_word_start = true;
  for (char32_t c : DecodeUtf8(text)) {
    const bool delimiter =
        IsPythonSpace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    if (delimiter) {
      AppendUtf8(c, &out);
      at_word_start = true;
    } else {
      if (at_word_start) {
        AppendUpper(c, &out);
      } else {
        AppendUtf8(ToLower(c), &out);
      }
      at_word_start = false;
    }
  }
  return out;
}

std::string PyRepr(std::string_view text) {
  const bool has_single = text.find('\'') != std::string_view::npos;
  const bool has_double = text.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : DecodeUtf8(text)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\t') {
      out.append("\\t");
    } else if (c == '\n') {
      out.append("\\n");
    } else if (c == '\r') {
      out.append("\\r");
    } else if (IsPrintable(c)) {
      AppendUtf8(c, &out);
    } else if (c <= 0xFF) {
      out.append("\\x");
      AppendHex(c, 2, &out);
    } else if (c <= 0xFFFF) {
      out.append("\\u");
      AppendHex(c, 4, &out);
    } else {
      out.append("\\U");
      AppendHex(c, 8, &out);
    }
  }
  out.push_back(quote);
  return out;
}

std::string PyFloatRepr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  if (value == 0) return std::signbit(value) ? "-0.0" : "0.0";
  char buffer[64];
  const auto result =
      std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::scientific);
  const std::string_view sci(buffer, result.ptr - buffer);
  // sci looks like "-1.2345e+07": split into sign, digits and the decimal exponent.
  const size_t e = sci.find('e');
  std::string digits;
  bool negative = false;
  for (char ch : sci.substr(0, e)) {
    if (ch == '-') negative = true;
    if (ch >= '0' && ch <= '9') digits.push_back(ch);
  }
  const int exponent = std::atoi(std::string(sci.substr(e + 1)).c_str());
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    if (exponent >= 0) {
      const size_t int_len = static_cast<size_t>(exponent) + 1;
      if (digits.size() <= int_len) {
        out.append(digits).append(int_len - digits.size(), '0').append(".0");
      } else {
        out.append(digits, 0, int_len).append(".").append(digits, int_len);
      }
    } else {
      out.append("0.").append(static_cast<size_t>(-exponent - 1), '0').append(digits);
    }
    return out;
  }
  out.append(digits, 0, 1);
  if (digits.size() > 1) out.append(".").append(digits, 1);
  char exp_text[16];
  std::snprintf(exp_text, sizeof(exp_text), "e%c%02d", exponent < 0 ? '-' : '+',
                std::abs(exponent));
  out.append(exp_text);
  return out;
}

void AppendJsonString(std::string_view text, bool ensure_ascii, std::string* out) {
  out->push_back('"');
  for (char32_t c : DecodeUtf8(text)) {
    switch (c) {
      case '"':
        out->append("\\\"");
        continue;
      case '\\':
        out->append("\\\\");
        continue;
      case '\n':
        out->append("\\n");
        continue;
      case '\r':
        out->append("\\r");
        continue;
      case '\t':
        out->append("\\t");
        continue;
      case '\b':
        out->append("\\b");
        continue;
      case '\f':
        out->append("\\f");
        continue;
      default:
        break;
    }
    if (c < 0x20 || (ensure_ascii && c >= 0x7F)) {
      if (c > 0xFFFF) {
        const char32_t v = c - 0x10000;
        out->append("\\u");
        AppendHex(0xD800 + (v >> 10), 4, out);
        out->append("\\u");
        AppendHex(0xDC00 + (v & 0x3FF), 4, out);
      } else {
        out->append("\\u");
        AppendHex(c, 4, out);
      }
    } else {
      AppendUtf8(c, out);
    }
  }
  out->push_back('"');
}

}  // namespace convoy::jinja
