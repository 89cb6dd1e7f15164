#include "text/added_tokens.h"

#include <algorithm>
#include <memory>

#include "text/pretokenizer_regex.h"
#include "text/utf8.h"

namespace convoy::tokenizer_internal {
namespace {

// Unicode White_Space (what Hugging Face strips for lstrip / rstrip).
bool IsWhiteSpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

// A word character for single_word: what Rust's regex \\w matches (Alphabetic, marks, decimal
// digits, connector punctuation, joiners), with letters and letter numbers for Alphabetic.
bool IsWordCharacter(std::string_view character) {
  static const PretokenizerRegex* const word = [] {
    absl::StatusOr<std::unique_ptr<PretokenizerRegex>> regex =
        PretokenizerRegex::Compile("[\\p{L}\\p{Nl}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}]");
    return regex.ok() ? regex->release() : nullptr;
  }();
  bool found = false;
  if (word != nullptr) {
    word->ForEachMatch(character, [&](size_t, size_t) { found = true; }).IgnoreError();
  }
  return found;
}

// The last character of non-empty valid UTF-8.
std::string_view LastCharacter(std::string_view text) {
  size_t begin = text.size() - 1;
  while (begin > 0 && (static_cast<unsigned char>(text[begin]) & 0xC0) == 0x80) --begin;
  return text.substr(begin);
}

// Where the white space that ends `text` begins.
size_t TrailingSpaceBegin(std::string_view text) {
  size_t end = text.size();
  while (end > 0) {
    size_t begin = end - 1;
    while (begin > 0 && (static_cast<unsigned char>(text[begin]) & 0xC0) == 0x80) --begin;
    size_t pos = begin;
    if (!IsWhiteSpace(NextCodePoint(text, &pos))) break;
    end = begin;
  }
  return end;
}

// The length of the white space that starts `text`.
size_t LeadingSpaceLength(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t next = pos;
    if (!IsWhiteSpace(NextCodePoint(text, &next))) break;
    pos = next;
  }
  return pos;
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedToken>& tokens) {
  terminal_.push_back(-1);
  for (const AddedToken& token : tokens) {
    if (token.content.empty()) continue;
    int32_t node = 0;
    for (char c : token.content) {
      const uint64_t key = (static_cast<uint64_t>(node) << 8) | static_cast<unsigned char>(c);
      auto [it, inserted] = children_.try_emplace(key, static_cast<int32_t>(terminal_.size()));
      if (inserted) terminal_.push_back(-1);
      node = it->second;
    }
    // The same content twice: the later entry wins, as in a map keyed by content.
    terminal_[node] = static_cast<int32_t>(patterns_.size());
    first_byte_[static_cast<unsigned char>(token.content[0])] = true;
    patterns_.push_back({token});
  }
}

int AddedTokenMatcher::LongestAt(std::string_view text, size_t pos) const {
  int found = -1;
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    const uint64_t key = (static_cast<uint64_t>(node) << 8) | static_cast<unsigned char>(text[i]);
    auto it = children_.find(key);
    if (it == children_.end()) break;
    node = it->second;
    if (terminal_[node] >= 0) found = terminal_[node];
  }
  return found;
}

void AddedTokenMatcher::Split(std::string_view text, std::vector<TextSegment>* out) const {
  out->clear();
  size_t segment_begin = 0;  // where the current run of text begins
  size_t pos = 0;
  while (pos < text.size()) {
    if (!first_byte_[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    const int index = LongestAt(text, pos);
    if (index < 0) {
      ++pos;
      continue;
    }
    const AddedToken& token = patterns_[index].token;
    size_t begin = pos;
    size_t end = pos + token.content.size();
    // A match that is rejected is skipped whole: the search goes on after it.
    pos = end;
    if (token.single_word) {
      const bool word_before = begin > 0 && IsWordCharacter(LastCharacter(text.substr(0, begin)));
      const bool word_after =
          end < text.size() &&
          IsWordCharacter(text.substr(end, Utf8CharLength(static_cast<unsigned char>(text[end]))));
      if (word_before || word_after) continue;
    }
    if (token.lstrip) begin = std::max(TrailingSpaceBegin(text.substr(0, begin)), segment_begin);
    if (token.rstrip) end += LeadingSpaceLength(text.substr(end));
    if (segment_begin < begin) out->push_back({segment_begin, begin, -1});
    out->push_back({begin, end, token.id});
    segment_begin = end;
    pos = std::max(pos, end);
  }
  if (segment_begin < text.size()) out->push_back({segment_begin, text.size(), -1});
}

}  // namespace convoy::tokenizer_internal
