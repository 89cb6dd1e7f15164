#include "frontend/output_constraints.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "grammar/grammar_matcher.h"

namespace convoy {
namespace {

// A GrammarMatcher as the engine's TokenConstraint.
class GrammarConstraint : public TokenConstraint {
 public:
  GrammarConstraint(std::shared_ptr<const grammar::Grammar> grammar,
                    std::shared_ptr<const grammar::TokenVocabulary> vocabulary)
      : matcher_(std::move(grammar), std::move(vocabulary)) {}

  void FillNextTokenMask(uint32_t* bits, int32_t) override { matcher_.FillNextTokenMask(bits); }
  absl::Status AcceptToken(int32_t token) override { return matcher_.AcceptToken(token); }
  bool IsTerminated() const override { return matcher_.IsTerminated(); }

 private:
  grammar::GrammarMatcher matcher_;
};

// The oneof's field name, for error messages.
const char* KindField(const v1::OutputConstraint& constraint) {
  switch (constraint.kind_case()) {
    case v1::OutputConstraint::kJsonSchema:
      return "constraint.json_schema";
    case v1::OutputConstraint::kJsonObject:
      return "constraint.json_object";
    case v1::OutputConstraint::kRegex:
      return "constraint.regex";
    case v1::OutputConstraint::kGrammar:
      return "constraint.grammar";
    case v1::OutputConstraint::kChoices:
      return "constraint.choices";
    case v1::OutputConstraint::KIND_NOT_SET:
      break;
  }
  return "constraint";
}

}  // namespace

absl::StatusOr<std::unique_ptr<OutputConstraints>> OutputConstraints::Create(
    const Tokenizer& tokenizer, int32_t model_vocab_size, std::vector<int32_t> end_ids) {
  // The model's vocabulary: ids past the tokenizer's have no bytes and are never allowed.
  std::vector<std::string> bytes(std::max(model_vocab_size, 0));
  for (int32_t id = 0; id < model_vocab_size; ++id) bytes[id] = tokenizer.TokenBytes(id);
  std::sort(end_ids.begin(), end_ids.end());
  end_ids.erase(std::unique(end_ids.begin(), end_ids.end()), end_ids.end());
  absl::StatusOr<std::shared_ptr<const grammar::TokenVocabulary>> vocabulary =
      grammar::TokenVocabulary::Create(std::move(bytes), std::move(end_ids));
  if (!vocabulary.ok()) return vocabulary.status();
  return std::unique_ptr<OutputConstraints>(
      new OutputConstraints(*std::move(vocabulary), model_vocab_size));
}

absl::StatusOr<std::shared_ptr<const grammar::Grammar>> OutputConstraints::Compile(
    const v1::OutputConstraint& constraint) {
  switch (constraint.kind_case()) {
    case v1::OutputConstraint::kJsonSchema:
      return grammar::CompileJsonSchema(constraint.json_schema());
    case v1::OutputConstraint::kJsonObject:
      if (!constraint.json_object()) {
        return absl::InvalidArgumentError("json_object must be true when set");
      }
      return grammar::AnyJsonObject();
    case v1::OutputConstraint::kRegex:
      return grammar::CompileRegex(constraint.regex());
    case v1::OutputConstraint::kGrammar:
      return grammar::CompileGbnf(constraint.grammar());
    case v1::OutputConstraint::kChoices:
      return grammar::CompileChoices(std::vector<std::string>(
          constraint.choices().choices().begin(), constraint.choices().choices().end()));
    case v1::OutputConstraint::KIND_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError(
      "set one of json_schema, json_object, regex, grammar or choices");
}

absl::StatusOr<std::shared_ptr<TokenMask>> OutputConstraints::Make(
    const v1::OutputConstraint& constraint) {
  const std::string key = absl::StrCat(constraint.kind_case(), ":", constraint.SerializeAsString());
  std::shared_ptr<const grammar::Grammar> compiled;
  {
    absl::MutexLock lock(&mu_);
    if (auto it = by_key_.find(key); it != by_key_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      compiled = it->second->second;
      ++stats_.cache_hits;
    }
  }
  if (compiled == nullptr) {
    // Compiled unlocked: a slow schema holds up no other request. Two requests with the same new
    // schema may both compile it; the cache keeps one.
    const absl::Time start = absl::Now();
    absl::StatusOr<std::shared_ptr<const grammar::Grammar>> result = Compile(constraint);
    const absl::Duration took = absl::Now() - start;
    if (!result.ok()) {
      return absl::Status(result.status().code(),
                          absl::StrCat(KindField(constraint), ": ", result.status().message()));
    }
    compiled = *std::move(result);
    absl::MutexLock lock(&mu_);
    ++stats_.compiled;
    stats_.compile_time += took;
    if (!by_key_.contains(key)) {
      lru_.emplace_front(key, compiled);
      by_key_[key] = lru_.begin();
      if (lru_.size() > kCacheEntries) {
        by_key_.erase(lru_.back().first);
        lru_.pop_back();
      }
    }
  }
  return std::make_shared<TokenMask>(std::make_unique<GrammarConstraint>(compiled, vocabulary_),
                                     model_vocab_size_);
}

OutputConstraints::Stats OutputConstraints::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace convoy
