#include "grammar/grammar.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "convoy/status_macros.h"
#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "grammar/limits.h"
#include "grammar/regex_parser.h"

namespace convoy::grammar {
namespace {

absl::StatusOr<std::shared_ptr<const Grammar>> FromBuilder(GrammarBuilder& builder, int32_t root) {
  ASSIGN_OR_RETURN(Program program, builder.Build(root));
  return std::make_shared<const Grammar>(std::move(program));
}

}  // namespace

Grammar::ForVocabulary& Grammar::EntryFor(
    const std::shared_ptr<const TokenVocabulary>& vocab) const {
  std::erase_if(caches_, [](const ForVocabulary& entry) { return entry.owner.expired(); });
  for (ForVocabulary& entry : caches_) {
    if (!entry.owner.owner_before(vocab) && !vocab.owner_before(entry.owner)) return entry;
  }
  ForVocabulary& entry = caches_.emplace_back();
  entry.owner = vocab;
  entry.masks = std::make_shared<MaskCache>(this, vocab.get(), kMaxSharedMaskBytes);
  return entry;
}

std::shared_ptr<MaskCache> Grammar::MaskCacheFor(
    const std::shared_ptr<const TokenVocabulary>& vocab) const {
  absl::MutexLock lock(&mutex_);
  return EntryFor(vocab).masks;
}

std::shared_ptr<const PositionMasks> Grammar::PositionMasksFor(
    const std::shared_ptr<const TokenVocabulary>& vocab) const {
  absl::MutexLock lock(&mutex_);
  ForVocabulary& entry = EntryFor(vocab);
  if (!entry.tables_built) {
    entry.tables =
        PositionMasks::Build(program_, *vocab, kMaxPositionMaskBytes, kMaxPositionMaskSteps);
    entry.tables_built = true;
  }
  return entry.tables;
}

absl::StatusOr<std::shared_ptr<const Grammar>> CompileGbnf(std::string_view text) {
  ASSIGN_OR_RETURN(Program program, ParseGbnf(text));
  return std::make_shared<const Grammar>(std::move(program));
}

absl::StatusOr<std::shared_ptr<const Grammar>> CompileRegex(std::string_view pattern) {
  ASSIGN_OR_RETURN(Expr body, ParseRegex(pattern, /*json_string=*/false));
  GrammarBuilder builder;
  const int32_t root = builder.AddRule("root");
  builder.SetBody(root, std::move(body));
  return FromBuilder(builder, root);
}

absl::StatusOr<std::shared_ptr<const Grammar>> CompileChoices(
    const std::vector<std::string>& choices) {
  if (choices.empty()) return absl::InvalidArgumentError("no choices given");
  if (static_cast<int64_t>(choices.size()) > kMaxChoices) {
    return absl::InvalidArgumentError(
        absl::StrCat(choices.size(), " choices are over the limit of ", kMaxChoices));
  }
  std::vector<Expr> alternatives;
  for (size_t i = 0; i < choices.size(); ++i) {
    if (static_cast<int64_t>(choices[i].size()) > kMaxChoiceBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "choice ", i, " has ", choices[i].size(), " bytes, over the limit of ", kMaxChoiceBytes));
    }
    alternatives.push_back(Literal(choices[i]));
  }
  GrammarBuilder builder;
  const int32_t root = builder.AddRule("root");
  // Each choice its own alternative (not Alt(), which would fold a single choice into a sequence).
  Expr body;
  body.kind = Expr::Kind::kAlt;
  body.children = std::move(alternatives);
  builder.SetBody(root, std::move(body));
  return FromBuilder(builder, root);
}

absl::StatusOr<std::shared_ptr<const Grammar>> CompileJsonSchema(std::string_view schema_json) {
  ASSIGN_OR_RETURN(Program program, JsonSchemaToProgram(schema_json));
  return std::make_shared<const Grammar>(std::move(program));
}

std::shared_ptr<const Grammar> AnyJsonObject() {
  static const auto* grammar =
      new std::shared_ptr<const Grammar>(std::make_shared<const Grammar>(AnyJsonObjectProgram()));
  return *grammar;
}

}  // namespace convoy::grammar
