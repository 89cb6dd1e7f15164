#include "text/pretokenizer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "convoy/status_macros.h"
#include "text/string_views.h"
#include "text/utf8.h"

namespace convoy::tokenizer_internal {
namespace {

// A part of a piece: a delimiter the pattern matched, or text between delimiters.
struct Part {
  size_t begin;
  size_t end;
  bool is_match;
};

// Parts that cover `piece`: the literal's occurrences, left to right, without overlap.
void FindLiteral(std::string_view piece, std::string_view literal, std::vector<Part>* parts) {
  size_t prev = 0;
  size_t pos = piece.find(literal);
  while (pos != std::string_view::npos) {
    if (prev != pos) parts->push_back({prev, pos, false});
    parts->push_back({pos, pos + literal.size(), true});
    prev = pos + literal.size();
    pos = piece.find(literal, prev);
  }
  if (prev != piece.size()) parts->push_back({prev, piece.size(), false});
}

absl::Status FindRegex(std::string_view piece, const PretokenizerRegex& regex,
                       std::vector<Part>* parts) {
  size_t prev = 0;
  RETURN_IF_ERROR(regex.ForEachMatch(piece, [&](size_t begin, size_t end) {
    if (prev != begin) parts->push_back({prev, begin, false});
    parts->push_back({begin, end, true});
    prev = end;
  }));
  if (prev != piece.size()) parts->push_back({prev, piece.size(), false});
  return absl::OkStatus();
}

// Hugging Face's NormalizedString::split: what becomes of delimiters and the text between them.
// Appends the resulting non-empty pieces, shifted by `base`.
void ApplyBehavior(const std::vector<Part>& parts, SplitBehavior behavior, size_t base,
                   std::vector<PieceSpan>* spans) {
  std::vector<PieceSpan> merged;
  switch (behavior) {
    case SplitBehavior::kIsolated:
    case SplitBehavior::kRemoved:
      for (const Part& part : parts) {
        if (behavior == SplitBehavior::kRemoved && part.is_match) continue;
        merged.push_back({part.begin, part.end});
      }
      break;
    case SplitBehavior::kContiguous: {
      bool previous_match = false;
      for (const Part& part : parts) {
        if (part.is_match == previous_match && !merged.empty()) {
          merged.back().end = part.end;
        } else {
          merged.push_back({part.begin, part.end});
        }
        previous_match = part.is_match;
      }
      break;
    }
    case SplitBehavior::kMergedWithPrevious: {
      bool previous_match = false;
      for (const Part& part : parts) {
        if (part.is_match && !previous_match && !merged.empty()) {
          merged.back().end = part.end;
        } else {
          merged.push_back({part.begin, part.end});
        }
        previous_match = part.is_match;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool next_match = false;
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
        if (it->is_match && !next_match && !merged.empty()) {
          merged.back().begin = it->begin;
        } else {
          merged.push_back({it->begin, it->end});
        }
        next_match = it->is_match;
      }
      std::reverse(merged.begin(), merged.end());
      break;
    }
  }
  for (const PieceSpan& span : merged) {
    if (span.end > span.begin) spans->push_back({base + span.begin, base + span.end});
  }
}

}  // namespace

struct PreTokenizer::Step {
  enum class Kind { kRegexSplit, kLiteralSplit, kMetaspace, kByteLevel };
  Kind kind = Kind::kRegexSplit;
  std::unique_ptr<PretokenizerRegex> regex;  // kRegexSplit; kByteLevel when it splits
  std::string literal;                       // kLiteralSplit; kMetaspace: the replacement
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  PrependScheme scheme = PrependScheme::kAlways;  // kMetaspace
  bool split = true;                              // kMetaspace
  bool add_prefix_space = false;                  // kByteLevel

  bool Rewrites() const {
    return kind == Kind::kMetaspace || (kind == Kind::kByteLevel && add_prefix_space);
  }

  // Appends the piece as this step rewrites it.
  void Rewrite(std::string_view piece, bool at_text_start, std::string* out) const {
    if (kind == Kind::kByteLevel) {
      if (piece.empty() || piece[0] != ' ') out->push_back(' ');
      out->append(piece);
      return;
    }
    const bool starts_with_replacement =
        piece.substr(0, literal.size()) == literal || (!piece.empty() && piece[0] == ' ');
    if (!starts_with_replacement &&
        (scheme == PrependScheme::kAlways || (scheme == PrependScheme::kFirst && at_text_start))) {
      out->append(literal);
    }
    for (char c : piece) {
      if (c == ' ') {
        out->append(literal);
      } else {
        out->push_back(c);
      }
    }
  }

  // Appends the pieces that `piece` (at `base` in the text) splits into.
  absl::Status SplitPiece(std::string_view piece, size_t base, std::vector<Part>* parts,
                          std::vector<PieceSpan>* spans) const {
    parts->clear();
    SplitBehavior how = behavior;
    if (kind == Kind::kRegexSplit || (kind == Kind::kByteLevel && regex != nullptr)) {
      RETURN_IF_ERROR(FindRegex(piece, *regex, parts));
    } else if (kind == Kind::kLiteralSplit || (kind == Kind::kMetaspace && split)) {
      FindLiteral(piece, literal, parts);
      if (kind == Kind::kMetaspace) how = SplitBehavior::kMergedWithNext;
    } else {
      parts->push_back({0, piece.size(), false});
    }
    if (invert) {
      for (Part& part : *parts) part.is_match = !part.is_match;
    }
    ApplyBehavior(*parts, how, base, spans);
    return absl::OkStatus();
  }
};

PreTokenizer::PreTokenizer() = default;
PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

absl::Status PreTokenizer::AddSplit(std::string_view pattern, bool is_regex, SplitBehavior behavior,
                                    bool invert) {
  if (byte_level_) return absl::FailedPreconditionError("a split after ByteLevel");
  auto step = std::make_unique<Step>();
  if (is_regex) {
    ASSIGN_OR_RETURN(step->regex, PretokenizerRegex::Compile(pattern));
  } else {
    if (pattern.empty()) return absl::InvalidArgumentError("a Split on an empty string");
    step->kind = Step::Kind::kLiteralSplit;
    step->literal = std::string(pattern);
  }
  step->behavior = behavior;
  step->invert = invert;
  steps_.push_back(std::move(step));
  return absl::OkStatus();
}

absl::Status PreTokenizer::AddDigits(bool individual_digits) {
  // Each numeric character is a match of its own; runs join under kContiguous.
  return AddSplit("\\p{N}", /*is_regex=*/true,
                  individual_digits ? SplitBehavior::kIsolated : SplitBehavior::kContiguous,
                  /*invert=*/false);
}

absl::Status PreTokenizer::AddMetaspace(std::string_view replacement, PrependScheme scheme,
                                        bool split) {
  if (byte_level_) return absl::FailedPreconditionError("Metaspace after ByteLevel");
  size_t length = 0;
  if (replacement.empty() || ClassifyUtf8Start(replacement, &length) != Utf8Start::kCharacter ||
      length != replacement.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Metaspace replacement must be one character, not \"", ToAbsl(replacement), "\""));
  }
  auto step = std::make_unique<Step>();
  step->kind = Step::Kind::kMetaspace;
  step->literal = std::string(replacement);
  step->scheme = scheme;
  step->split = split;
  steps_.push_back(std::move(step));
  return absl::OkStatus();
}

absl::Status PreTokenizer::AddByteLevel(bool add_prefix_space, bool use_regex) {
  if (byte_level_) return absl::FailedPreconditionError("ByteLevel twice");
  auto step = std::make_unique<Step>();
  step->kind = Step::Kind::kByteLevel;
  step->add_prefix_space = add_prefix_space;
  if (use_regex) {
    ASSIGN_OR_RETURN(step->regex, PretokenizerRegex::Compile(Gpt2SplitPattern()));
  }
  steps_.push_back(std::move(step));
  byte_level_ = true;
  return absl::OkStatus();
}

absl::Status PreTokenizer::Split(std::string_view text, bool at_text_start, PieceList* out) const {
  out->text = text;
  out->storage.clear();
  out->spans.clear();
  if (!text.empty()) out->spans.push_back({0, text.size()});
  out->first_at_text_start = at_text_start;
  std::vector<Part> parts;
  std::vector<PieceSpan> next_spans;
  std::string next_storage;
  for (const std::unique_ptr<Step>& step : steps_) {
    next_spans.clear();
    next_storage.clear();
    const bool rewrites = step->Rewrites();
    bool first_at_start = false;
    for (size_t i = 0; i < out->spans.size(); ++i) {
      std::string_view piece = out->piece(i);
      const bool piece_at_start = i == 0 && out->first_at_text_start;
      size_t base = out->spans[i].begin;
      if (rewrites) {
        base = next_storage.size();
        step->Rewrite(piece, piece_at_start, &next_storage);
        piece = std::string_view(next_storage).substr(base);
      }
      const size_t first_new = next_spans.size();
      RETURN_IF_ERROR(step->SplitPiece(piece, base, &parts, &next_spans));
      if (piece_at_start && next_spans.size() > first_new && next_spans[first_new].begin == base) {
        first_at_start = true;
      }
    }
    if (rewrites) {
      out->storage.swap(next_storage);
      out->text = out->storage;
    }
    out->spans.swap(next_spans);
    out->first_at_text_start = first_at_start;
  }
  return absl::OkStatus();
}

}  // namespace convoy::tokenizer_internal
