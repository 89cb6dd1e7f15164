#include "text/bpe.h"

#include <algorithm>
#include <queue>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "text/byte_level.h"
#include "text/string_views.h"
#include "text/utf8.h"

namespace convoy::tokenizer_internal {

absl::StatusOr<std::unique_ptr<BpeModel>> BpeModel::Create(
    absl::flat_hash_map<std::string, int32_t> vocab,
    const std::vector<std::pair<std::string, std::string>>& merges, const BpeOptions& options) {
  auto model = std::unique_ptr<BpeModel>(new BpeModel());
  model->options_ = options;
  model->merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    auto l = vocab.find(left);
    auto r = vocab.find(right);
    auto merged = vocab.find(absl::StrCat(left, right));
    if (l == vocab.end() || r == vocab.end() || merged == vocab.end()) {
      return absl::InvalidArgumentError(absl::StrCat("BPE merge ", rank, " (\"", left, "\" \"",
                                                     right, "\") names a token ",
                                                     "that is not in the vocabulary"));
    }
    // A pair listed twice keeps its last rank, as a map built from the list would.
    model->merges_[PairKey(l->second, r->second)] = {static_cast<int32_t>(rank), merged->second};
    if (!left.empty() && !right.empty()) {
      size_t last = left.size() - 1;
      while (last > 0 && (static_cast<unsigned char>(left[last]) & 0xC0) == 0x80) --last;
      size_t first = 0;
      model->joinable_.insert(PairKey(static_cast<int32_t>(NextCodePoint(left, &last)),
                                      static_cast<int32_t>(NextCodePoint(right, &first))));
    }
  }
  for (int b = 0; b < 256; ++b) {
    auto spelled = vocab.find(ToByteLevel(std::string(1, static_cast<char>(b))));
    model->byte_symbol_[b] = spelled == vocab.end() ? -1 : spelled->second;
    auto fallback = vocab.find(absl::StrFormat("<0x%02X>", b));
    model->byte_fallback_[b] = fallback == vocab.end() ? -1 : fallback->second;
  }
  model->vocab_ = std::move(vocab);
  return model;
}

void BpeModel::AddUnknown(std::string_view character, BpeScratch& scratch) const {
  auto push = [&](int32_t id) {
    const auto index = static_cast<int32_t>(scratch.symbols.size());
    scratch.symbols.push_back({id, index - 1, -1, true});
  };
  if (options_.byte_fallback && std::all_of(character.begin(), character.end(), [&](char c) {
        return byte_fallback_[static_cast<unsigned char>(c)] >= 0;
      })) {
    // As in Hugging Face: these go in before a pending unknown token.
    for (char c : character) push(byte_fallback_[static_cast<unsigned char>(c)]);
    return;
  }
  if (!options_.unk_id.has_value()) return;
  if (scratch.unk_pending && !options_.fuse_unk) push(*options_.unk_id);
  scratch.unk_pending = true;
}

void BpeModel::Encode(std::string_view piece, BpeScratch& scratch,
                      std::vector<int32_t>* ids) const {
  if (piece.empty()) return;
  if (options_.ignore_merges) {
    auto whole = options_.byte_level ? vocab_.find(ToByteLevel(piece)) : vocab_.find(ToAbsl(piece));
    if (whole != vocab_.end()) {
      ids->push_back(whole->second);
      return;
    }
  }
  std::vector<BpeScratch::Symbol>& symbols = scratch.symbols;
  symbols.clear();
  scratch.unk_pending = false;
  auto add_unk = [&] {
    scratch.unk_pending = false;
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({*options_.unk_id, index - 1, -1, true});
  };
  auto push = [&](int32_t id) {
    if (scratch.unk_pending) add_unk();
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, index - 1, -1, true});
  };
  // Merges the symbols so far and appends them.
  auto finish = [&] {
    if (scratch.unk_pending) add_unk();
    const auto count = static_cast<int32_t>(symbols.size());
    for (int32_t i = 0; i + 1 < count; ++i) symbols[i].next = i + 1;
    MergeAll(scratch);
    for (const BpeScratch::Symbol& symbol : symbols) {
      if (symbol.live) ids->push_back(symbol.id);
    }
    symbols.clear();
  };
  // A long piece is merged in segments, cut between two known characters that no merge joins:
  // no symbol can ever span such a cut, so each side merges as it would in the whole piece, and
  // the heap stays small.
  bool previous_known = false;
  char32_t previous = 0;
  auto add_known = [&](char32_t code_point, int32_t id) {
    if (previous_known && symbols.size() >= kSegmentSymbols &&
        !joinable_.contains(
            PairKey(static_cast<int32_t>(previous), static_cast<int32_t>(code_point)))) {
      finish();
    }
    push(id);
    previous_known = true;
    previous = code_point;
  };
  if (options_.byte_level) {
    for (char c : piece) {
      const auto byte = static_cast<unsigned char>(c);
      const int32_t id = byte_symbol_[byte];
      if (id >= 0) {
        add_known(ByteLevelCodePoint(byte), id);
      } else {
        AddUnknown(ToByteLevel(std::string_view(&c, 1)), scratch);
        previous_known = false;
      }
    }
  } else {
    size_t pos = 0;
    while (pos < piece.size()) {
      const size_t start = pos;
      const char32_t code_point = NextCodePoint(piece, &pos);
      const std::string_view character = piece.substr(start, pos - start);
      auto it = vocab_.find(ToAbsl(character));
      if (it != vocab_.end()) {
        add_known(code_point, it->second);
      } else {
        AddUnknown(character, scratch);
        previous_known = false;
      }
    }
  }
  finish();
}

void BpeModel::MergeAll(BpeScratch& scratch) const {
  std::vector<BpeScratch::Symbol>& symbols = scratch.symbols;
  std::vector<BpeScratch::Candidate>& heap = scratch.heap;
  heap.clear();
  auto consider = [&](int32_t pos) {
    const int32_t next = symbols[pos].next;
    if (next < 0) return;
    auto it = merges_.find(PairKey(symbols[pos].id, symbols[next].id));
    if (it == merges_.end()) return;
    heap.push_back({it->second.rank, pos, it->second.id});
    std::push_heap(heap.begin(), heap.end());
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) {
    auto it = merges_.find(PairKey(symbols[i].id, symbols[i + 1].id));
    if (it != merges_.end()) heap.push_back({it->second.rank, i, it->second.id});
  }
  std::make_heap(heap.begin(), heap.end());
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    const BpeScratch::Candidate top = heap.back();
    heap.pop_back();
    BpeScratch::Symbol& left = symbols[top.pos];
    if (!left.live || left.next < 0) continue;
    // A candidate is stale when either symbol has changed since it was queued.
    BpeScratch::Symbol& right = symbols[left.next];
    auto it = merges_.find(PairKey(left.id, right.id));
    if (it == merges_.end() || it->second.id != top.id) continue;
    left.id = top.id;
    right.live = false;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.pos;
    if (left.prev >= 0) consider(left.prev);
    consider(top.pos);
  }
}

}  // namespace convoy::tokenizer_internal
