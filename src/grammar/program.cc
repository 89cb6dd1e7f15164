#include "grammar/program.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "convoy/status_macros.h"
#include "grammar/limits.h"
#include "grammar/utf8_ranges.h"

namespace convoy::grammar {
namespace {

bool IsAscii(const std::vector<CodepointRange>& ranges) {
  return ranges.empty() || ranges.back().hi < 0x80;
}

ByteSet AsciiSet(const std::vector<CodepointRange>& ranges) {
  ByteSet set;
  for (const CodepointRange& r : ranges) {
    for (char32_t c = r.lo; c <= r.hi; ++c) set.set(c);
  }
  return set;
}

absl::Status TooLarge(const char* what, int64_t limit) {
  return absl::InvalidArgumentError(
      absl::StrCat("grammar too large: more than ", limit, " ", what, " after compilation"));
}

}  // namespace

int32_t GrammarBuilder::AddRule(std::string name) {
  names_.push_back(std::move(name));
  bodies_.emplace_back();
  has_body_.push_back(false);
  alts_.emplace_back();
  return static_cast<int32_t>(names_.size()) - 1;
}

void GrammarBuilder::SetBody(int32_t rule, Expr body) {
  bodies_[rule] = std::move(body);
  has_body_[rule] = true;
}

absl::StatusOr<Program> GrammarBuilder::Build(int32_t root) {
  for (int32_t r = 0; r < rule_count(); ++r) {
    if (!has_body_[r]) {
      return absl::InvalidArgumentError(absl::StrCat("rule '", names_[r], "' is not defined"));
    }
    pending_.emplace_back(r, std::move(bodies_[r]));
  }
  while (!pending_.empty()) {
    auto [rule, body] = std::move(pending_.back());
    pending_.pop_back();
    RETURN_IF_ERROR(LowerRule(rule, body));
  }
  program_.root = root;
  program_.rule_names = names_;
  program_.rule_alts.push_back(0);
  for (const std::vector<int32_t>& starts : alts_) {
    program_.alt_starts.insert(program_.alt_starts.end(), starts.begin(), starts.end());
    program_.rule_alts.push_back(static_cast<int32_t>(program_.alt_starts.size()));
  }
  RETURN_IF_ERROR(CheckLeftRecursion());
  return std::move(program_);
}

absl::Status GrammarBuilder::LowerRule(int32_t rule, const Expr& body) {
  if (body.kind == Expr::Kind::kAlt) {
    for (const Expr& child : body.children) {
      std::vector<Element> seq;
      RETURN_IF_ERROR(AppendSequence(rule, child, seq));
      RETURN_IF_ERROR(AddAlternative(rule, seq));
    }
    return absl::OkStatus();
  }
  std::vector<Element> seq;
  RETURN_IF_ERROR(AppendSequence(rule, body, seq));
  return AddAlternative(rule, seq);
}

absl::Status GrammarBuilder::AddAlternative(int32_t rule, const std::vector<Element>& elements) {
  if (static_cast<int64_t>(program_.elements.size() + elements.size()) >= kMaxElements) {
    return TooLarge("elements", kMaxElements);
  }
  alts_[rule].push_back(static_cast<int32_t>(program_.elements.size()));
  program_.elements.insert(program_.elements.end(), elements.begin(), elements.end());
  program_.elements.push_back(Element{Element::kEnd, rule});
  return absl::OkStatus();
}

Element GrammarBuilder::SetElement(const ByteSet& set) {
  std::string key(32, '\0');
  for (int b = 0; b < 256; ++b) {
    if (set.test(b)) key[b / 8] = static_cast<char>(key[b / 8] | (1 << (b % 8)));
  }
  auto [it, inserted] = set_ids_.try_emplace(key, static_cast<int32_t>(program_.sets.size()));
  if (inserted) program_.sets.push_back(set);
  return Element{Element::kSet, it->second};
}

absl::StatusOr<int32_t> GrammarBuilder::HelperRule(int32_t owner, const char* what, Expr body) {
  if (rule_count() >= kMaxRules) return TooLarge("rules", kMaxRules);
  (void)what;
  const int32_t rule = AddRule(names_[owner]);
  has_body_[rule] = true;
  pending_.emplace_back(rule, std::move(body));
  return rule;
}

absl::StatusOr<int32_t> GrammarBuilder::ClassRule(int32_t owner,
                                                  const std::vector<CodepointRange>& ranges) {
  std::string key;
  for (const CodepointRange& r : ranges) absl::StrAppend(&key, r.lo, "-", r.hi, ",");
  if (auto it = class_rules_.find(key); it != class_rules_.end()) return it->second;
  if (rule_count() >= kMaxRules) return TooLarge("rules", kMaxRules);
  const int32_t rule = AddRule(names_[owner]);
  has_body_[rule] = true;
  class_rules_[key] = rule;
  ByteSet single;
  std::vector<std::vector<Element>> multi;
  for (const Utf8Sequence& seq : Utf8Sequences(ranges)) {
    if (seq.size() == 1) {
      for (int b = seq[0].lo; b <= seq[0].hi; ++b) single.set(b);
      continue;
    }
    std::vector<Element> elements;
    for (const ByteRangePair& r : seq) {
      ByteSet set;
      for (int b = r.lo; b <= r.hi; ++b) set.set(b);
      elements.push_back(SetElement(set));
    }
    multi.push_back(std::move(elements));
  }
  if (single.any()) RETURN_IF_ERROR(AddAlternative(rule, {SetElement(single)}));
  for (const std::vector<Element>& elements : multi)
    RETURN_IF_ERROR(AddAlternative(rule, elements));
  return rule;
}

absl::StatusOr<Element> GrammarBuilder::SingleElement(int32_t owner, const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::kByteSet:
      return SetElement(e.bytes);
    case Expr::Kind::kBytes:
      if (e.text.size() == 1) {
        ByteSet set;
        set.set(static_cast<unsigned char>(e.text[0]));
        return SetElement(set);
      }
      break;
    case Expr::Kind::kClass:
      if (IsAscii(e.ranges)) return SetElement(AsciiSet(e.ranges));
      break;
    case Expr::Kind::kRef:
      return Element{Element::kRef, e.rule};
    default:
      break;
  }
  ASSIGN_OR_RETURN(const int32_t rule, HelperRule(owner, "group", e));
  return Element{Element::kRef, rule};
}

absl::Status GrammarBuilder::AppendSequence(int32_t owner, const Expr& e,
                                            std::vector<Element>& out) {
  if (static_cast<int64_t>(out.size() + program_.elements.size()) >= kMaxElements) {
    return TooLarge("elements", kMaxElements);
  }
  switch (e.kind) {
    case Expr::Kind::kSeq:
      for (const Expr& child : e.children) RETURN_IF_ERROR(AppendSequence(owner, child, out));
      return absl::OkStatus();
    case Expr::Kind::kBytes:
      for (char c : e.text) {
        ByteSet set;
        set.set(static_cast<unsigned char>(c));
        out.push_back(SetElement(set));
      }
      return absl::OkStatus();
    case Expr::Kind::kByteSet:
      out.push_back(SetElement(e.bytes));
      return absl::OkStatus();
    case Expr::Kind::kClass:
      if (IsAscii(e.ranges)) {
        out.push_back(SetElement(AsciiSet(e.ranges)));
      } else {
        ASSIGN_OR_RETURN(const int32_t rule, ClassRule(owner, e.ranges));
        out.push_back(Element{Element::kRef, rule});
      }
      return absl::OkStatus();
    case Expr::Kind::kRef:
      out.push_back(Element{Element::kRef, e.rule});
      return absl::OkStatus();
    case Expr::Kind::kAlt:
      if (e.children.empty()) {
        out.push_back(SetElement(ByteSet()));  // matches nothing
      } else {
        ASSIGN_OR_RETURN(const int32_t rule, HelperRule(owner, "alt", e));
        out.push_back(Element{Element::kRef, rule});
      }
      return absl::OkStatus();
    case Expr::Kind::kRepeat:
      break;
  }
  if (e.min < 0 || e.min > kMaxRepetition || e.max > kMaxRepetition ||
      (e.max != Expr::kUnbounded && e.max < e.min)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "in rule '", names_[owner], "': repetition {", e.min, ",",
        e.max == Expr::kUnbounded ? std::string() : absl::StrCat(e.max),
        "} is out of range (bounds must be ordered and at most ", kMaxRepetition, ")"));
  }
  if (e.max == 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(const Element item, SingleElement(owner, e.children[0]));
  for (int64_t i = 0; i < e.min; ++i) out.push_back(item);
  if (e.max == Expr::kUnbounded) {
    if (rule_count() >= kMaxRules) return TooLarge("rules", kMaxRules);
    const int32_t star = AddRule(names_[owner]);
    has_body_[star] = true;
    RETURN_IF_ERROR(AddAlternative(star, {item, Element{Element::kRef, star}}));
    RETURN_IF_ERROR(AddAlternative(star, {}));
    out.push_back(Element{Element::kRef, star});
    return absl::OkStatus();
  }
  int32_t previous = -1;
  for (int64_t j = e.min; j < e.max; ++j) {
    if (rule_count() >= kMaxRules) return TooLarge("rules", kMaxRules);
    const int32_t optional = AddRule(names_[owner]);
    has_body_[optional] = true;
    std::vector<Element> body = {item};
    if (previous >= 0) body.push_back(Element{Element::kRef, previous});
    RETURN_IF_ERROR(AddAlternative(optional, body));
    RETURN_IF_ERROR(AddAlternative(optional, {}));
    previous = optional;
  }
  if (previous >= 0) out.push_back(Element{Element::kRef, previous});
  return absl::OkStatus();
}

absl::Status GrammarBuilder::CheckLeftRecursion() const {
  const Program& p = program_;
  const int32_t n = p.rule_count();
  // nullable[r]: some alternative of r matches the empty string.
  std::vector<bool> nullable(n, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (int32_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (int32_t a = p.rule_alts[r]; a < p.rule_alts[r + 1] && !nullable[r]; ++a) {
        bool all = true;
        for (int32_t i = p.alt_starts[a]; p.elements[i].kind != Element::kEnd; ++i) {
          const Element& el = p.elements[i];
          if (el.kind == Element::kSet || !nullable[el.arg]) {
            all = false;
            break;
          }
        }
        if (all) nullable[r] = changed = true;
      }
    }
  }
  // Rules each rule may call before consuming a byte.
  std::vector<std::vector<int32_t>> first_calls(n);
  for (int32_t r = 0; r < n; ++r) {
    for (int32_t a = p.rule_alts[r]; a < p.rule_alts[r + 1]; ++a) {
      for (int32_t i = p.alt_starts[a]; p.elements[i].kind == Element::kRef; ++i) {
        first_calls[r].push_back(p.elements[i].arg);
        if (!nullable[p.elements[i].arg]) break;
      }
    }
  }
  // Iterative depth-first search for a cycle.
  std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the path, 2 done
  for (int32_t start = 0; start < n; ++start) {
    if (color[start] != 0) continue;
    std::vector<std::pair<int32_t, size_t>> path = {{start, 0}};
    color[start] = 1;
    while (!path.empty()) {
      auto& [rule, next] = path.back();
      if (next == first_calls[rule].size()) {
        color[rule] = 2;
        path.pop_back();
        continue;
      }
      const int32_t callee = first_calls[rule][next++];
      if (color[callee] == 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("rule '", names_[callee],
                         "' can reach itself without consuming input (left recursion)"));
      }
      if (color[callee] == 0) {
        color[callee] = 1;
        path.emplace_back(callee, 0);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace convoy::grammar
