#include "text/utf8.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace convoy::tokenizer_internal {
namespace {

bool InRange(unsigned char b, unsigned char lo, unsigned char hi) { return b >= lo && b <= hi; }

// Appends the longest prefix of `bytes` that is final under the lossy rule and returns its
// length; what remains is an incomplete character (at most 3 bytes).
size_t AppendLossyPrefix(std::string_view bytes, std::string* out) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    size_t run = pos;
    while (run < bytes.size() && static_cast<unsigned char>(bytes[run]) < 0x80) ++run;
    out->append(bytes.data() + pos, run - pos);
    pos = run;
    if (pos == bytes.size()) break;
    size_t length = 0;
    switch (ClassifyUtf8Start(bytes.substr(pos), &length)) {
      case Utf8Start::kCharacter:
        out->append(bytes.data() + pos, length);
        break;
      case Utf8Start::kInvalid:
        out->append(kReplacementCharacter);
        break;
      case Utf8Start::kIncomplete:
        return pos;
    }
    pos += length;
  }
  return pos;
}

}  // namespace

Utf8Start ClassifyUtf8Start(std::string_view bytes, size_t* length) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(bytes[i]); };
  const unsigned char lead = byte(0);
  *length = 1;
  if (lead < 0x80) return Utf8Start::kCharacter;
  size_t width;
  unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (InRange(lead, 0xC2, 0xDF)) {
    width = 2;
  } else if (InRange(lead, 0xE0, 0xEF)) {
    width = 3;
    if (lead == 0xE0) lo = 0xA0;  // no overlongs
    if (lead == 0xED) hi = 0x9F;  // no surrogates
  } else if (InRange(lead, 0xF0, 0xF4)) {
    width = 4;
    if (lead == 0xF0) lo = 0x90;  // no overlongs
    if (lead == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return Utf8Start::kInvalid;
  }
  for (size_t i = 1; i < width; ++i) {
    if (i >= bytes.size()) {
      *length = i;
      return Utf8Start::kIncomplete;
    }
    if (!InRange(byte(i), i == 1 ? lo : 0x80, i == 1 ? hi : 0xBF)) {
      *length = i;
      return Utf8Start::kInvalid;
    }
  }
  *length = width;
  return Utf8Start::kCharacter;
}

absl::Status ValidateUtf8(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    if (static_cast<unsigned char>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    size_t length = 0;
    const Utf8Start start = ClassifyUtf8Start(text.substr(pos), &length);
    if (start != Utf8Start::kCharacter) {
      return absl::InvalidArgumentError(
          absl::StrFormat("text is not valid UTF-8: %s sequence at byte offset %d (byte 0x%02X)",
                          start == Utf8Start::kIncomplete ? "truncated" : "invalid", pos,
                          static_cast<unsigned char>(text[pos])));
    }
    pos += length;
  }
  return absl::OkStatus();
}

char32_t NextCodePoint(std::string_view text, size_t* pos) {
  const auto byte = [&](size_t i) {
    return static_cast<char32_t>(static_cast<unsigned char>(text[i]));
  };
  const size_t p = *pos;
  const char32_t lead = byte(p);
  const size_t length = Utf8CharLength(static_cast<unsigned char>(lead));
  *pos = p + length;
  switch (length) {
    case 1:
      return lead;
    case 2:
      return ((lead & 0x1F) << 6) | (byte(p + 1) & 0x3F);
    case 3:
      return ((lead & 0x0F) << 12) | ((byte(p + 1) & 0x3F) << 6) | (byte(p + 2) & 0x3F);
    default:
      return ((lead & 0x07) << 18) | ((byte(p + 1) & 0x3F) << 12) | ((byte(p + 2) & 0x3F) << 6) |
             (byte(p + 3) & 0x3F);
  }
}

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string Utf8Lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  if (AppendLossyPrefix(bytes, &out) < bytes.size()) out.append(kReplacementCharacter);
  return out;
}

void Utf8LossyStream::Feed(std::string_view bytes, std::string* out) {
  if (pending_.empty()) {
    const size_t done = AppendLossyPrefix(bytes, out);
    pending_.assign(bytes.substr(done));
    return;
  }
  // The held character needs at most 3 more bytes: decode it joined with the first bytes fed,
  // then the rest of them from where that stopped.
  std::string joined = pending_;
  joined.append(bytes.substr(0, std::min<size_t>(bytes.size(), 4)));
  const size_t done = AppendLossyPrefix(joined, out);
  if (done < pending_.size()) {
    // Still incomplete: every byte fed so far was a continuation of the held character.
    pending_ = joined;
    return;
  }
  const size_t consumed = done - pending_.size();
  pending_.clear();
  const size_t rest_done = AppendLossyPrefix(bytes.substr(consumed), out);
  pending_.assign(bytes.substr(consumed + rest_done));
}

void Utf8LossyStream::Finish(std::string* out) {
  if (!pending_.empty()) out->append(kReplacementCharacter);
  pending_.clear();
}

}  // namespace convoy::tokenizer_internal
