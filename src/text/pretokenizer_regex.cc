#include "text/pretokenizer_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "absl/strings/str_cat.h"
#include "text/string_views.h"
#include "text/utf8.h"

namespace convoy::tokenizer_internal {
namespace {

// Oniguruma's Unicode White_Space: the 25 code points of \s.
constexpr std::string_view kSpaceClassBody =
    "\\t\\n\\x0B\\f\\r\\x20\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}"
    "\\x{202F}\\x{205F}\\x{3000}";
constexpr std::string_view kWordClassBody = "\\p{L}\\p{M}\\p{Nd}\\p{Pc}";

pcre2_code* Code(void* code) { return static_cast<pcre2_code*>(code); }

// One match data per thread, sized for the whole match only: PCRE2 fills group 0 whatever the
// pattern's number of groups.
pcre2_match_data* ThreadMatchData() {
  struct Holder {
    pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
    ~Holder() { pcre2_match_data_free(data); }
  };
  thread_local Holder holder;
  return holder.data;
}

}  // namespace

absl::StatusOr<std::string> TranslateOnigurumaPattern(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() + 64);
  bool in_class = false;
  size_t i = 0;
  while (i < pattern.size()) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[i + 1];
      std::string_view body;
      if (e == 's' || e == 'S') body = kSpaceClassBody;
      if (e == 'w' || e == 'W') body = kWordClassBody;
      if (e == 'Q') {
        return absl::UnimplementedError(absl::StrCat("pre-tokenizer pattern \"", ToAbsl(pattern),
                                                     "\": \\Q...\\E is not supported"));
      }
      if (!body.empty()) {
        const bool negated = e == 'S' || e == 'W';
        if (in_class && negated) {
          return absl::UnimplementedError(
              absl::StrCat("pre-tokenizer pattern \"", ToAbsl(pattern), "\": \\", std::string(1, e),
                           " inside a character class is not supported"));
        }
        if (in_class) {
          out.append(body);
        } else {
          absl::StrAppend(&out, negated ? "[^" : "[", ToAbsl(body), "]");
        }
        i += 2;
        continue;
      }
      out.append(pattern.substr(i, 2));
      i += 2;
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out.push_back(c);
      ++i;
      if (i < pattern.size() && pattern[i] == '^') out.push_back(pattern[i++]);
      if (i < pattern.size() && pattern[i] == ']') out.push_back(pattern[i++]);  // a literal ']'
      continue;
    }
    if (in_class && c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {
      const size_t close = pattern.find(":]", i + 2);
      if (close != std::string_view::npos) {
        out.append(pattern.substr(i, close + 2 - i));
        i = close + 2;
        continue;
      }
    }
    if (in_class && c == ']') in_class = false;
    out.push_back(c);
    ++i;
  }
  return out;
}

absl::StatusOr<std::unique_ptr<PretokenizerRegex>> PretokenizerRegex::Compile(
    std::string_view pattern) {
  absl::StatusOr<std::string> translated = TranslateOnigurumaPattern(pattern);
  if (!translated.ok()) return translated.status();
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated->data()), translated->size(),
                    PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof(message));
    return absl::InvalidArgumentError(
        absl::StrCat("pre-tokenizer pattern \"", ToAbsl(pattern),
                     "\" does not compile: ", reinterpret_cast<const char*>(message)));
  }
  auto regex = std::unique_ptr<PretokenizerRegex>(new PretokenizerRegex());
  regex->pattern_ = std::string(pattern);
  regex->code_ = code;
  // Without JIT (a build of PCRE2 that lacks it) the interpreter gives the same matches.
  regex->jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  return regex;
}

PretokenizerRegex::~PretokenizerRegex() { pcre2_code_free(Code(code_)); }

absl::Status PretokenizerRegex::ForEachMatch(
    std::string_view text, absl::FunctionRef<void(size_t begin, size_t end)> on_match) const {
  pcre2_match_data* match_data = ThreadMatchData();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0;
  size_t last_end = std::string_view::npos;
  while (start <= text.size()) {
    int rc = PCRE2_ERROR_JIT_STACKLIMIT;
    if (jit_) {
      rc = pcre2_jit_match(Code(code_), subject, text.size(), start, 0, match_data, nullptr);
    }
    // The interpreter keeps its backtracking on the heap: it takes over when the JIT's small
    // stack is not enough.
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      rc = pcre2_match(Code(code_), subject, text.size(), start, PCRE2_NO_UTF_CHECK, match_data,
                       nullptr);
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof(message));
      return absl::ResourceExhaustedError(absl::StrCat("pre-tokenizer pattern \"", pattern_,
                                                       "\" failed at byte ", start, ": ",
                                                       reinterpret_cast<const char*>(message)));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match_data);
    const size_t begin = ovector[0];
    const size_t end = ovector[1];
    if (begin == end) {
      if (begin != last_end) on_match(begin, end);
      if (begin == text.size()) break;
      start = begin + Utf8CharLength(static_cast<unsigned char>(text[begin]));
      continue;
    }
    on_match(begin, end);
    last_end = end;
    start = end;
  }
  return absl::OkStatus();
}

}  // namespace convoy::tokenizer_internal
