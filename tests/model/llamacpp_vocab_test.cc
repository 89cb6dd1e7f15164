// Real vocabularies through convoy's GGUF tokenizer path (TokenizerSpecFromGguf, then
// Tokenizer::FromSpec: what LoadModelTokenizer does for convoyd), against an independent
// reference: llama.cpp's test vocabularies, vendor/llama.cpp/models/ggml-vocab-NAME.gguf in the
// sdist of llama-cpp-python (fetched by scripts/fetch-llamacpp-vocab.sh; not in the repository).
// Each .gguf holds a model's tokenizer metadata as llama.cpp's converter writes it (no weights);
// its .gguf.inp holds test strings (separated by "\n__ggml_vocab_test__\n") and its .gguf.out one
// line of ids per string, which llama.cpp's convert_hf_to_gguf_update.py wrote with Hugging
// Face's AutoTokenizer(...).encode(text, add_special_tokens=False): no BOS, and no llama.cpp code
// involved. Every string must give those ids exactly and decode back to itself.
#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "convoy/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/gguf_file.h"
#include "model/gguf_tokenizer.h"
#include "model/model_tokenizer.h"
#include "nlohmann/json.hpp"
#include "status_matchers.h"
#include "test_dir.h"
#include "test_paths.h"
#include "text/tokenizer.h"

namespace convoy {
namespace {

using ::convoy::testing::ReadBytes;
using ::convoy::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr char kFetchScript[] = "scripts/fetch-llamacpp-vocab.sh";

// Where the fetch script puts the files: $CONVOY_LLAMACPP_VOCAB_DIR (relative to the source tree
// when relative), by default .cache/llamacpp-vocab.
std::string VocabDir() {
  const char* env = std::getenv("CONVOY_LLAMACPP_VOCAB_DIR");
  std::string dir = env != nullptr && *env != '\0' ? env : ".cache/llamacpp-vocab";
  if (dir.front() != '/') dir = absl::StrCat(TestSourceDir(), "/", dir);
  return dir;
}

std::string VocabPath(const std::string& name) {
  return absl::StrCat(VocabDir(), "/ggml-vocab-", name, ".gguf");
}

// A missing file fails the test and says how to get it.
void ExpectFetched(const std::string& path) {
  ASSERT_TRUE(std::filesystem::exists(path))
      << path << " is missing: run " << kFetchScript
      << " (it downloads llama-cpp-python's sdist from PyPI once; scripts/test.sh runs it)";
}

struct Case {
  std::string text;
  std::vector<int32_t> ids;
};

std::vector<Case> ReadCases(const std::string& name) {
  const std::string inp = ReadBytes(VocabPath(name) + ".inp");
  const std::string out = ReadBytes(VocabPath(name) + ".out");
  // Every string, the last included, is followed by the separator.
  constexpr std::string_view kSeparator = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  size_t pos = 0;
  while (pos < inp.size()) {
    const size_t next = inp.find(kSeparator, pos);
    if (next == std::string::npos) {
      texts.push_back(inp.substr(pos));
      break;
    }
    texts.push_back(inp.substr(pos, next - pos));
    pos = next + kSeparator.size();
  }
  std::vector<std::string> lines = absl::StrSplit(out, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  EXPECT_EQ(texts.size(), lines.size()) << name << ": .inp and .out differ in length";
  std::vector<Case> cases;
  for (size_t i = 0; i < texts.size() && i < lines.size(); ++i) {
    Case c{texts[i], {}};
    for (absl::string_view id : absl::StrSplit(lines[i], ' ', absl::SkipEmpty())) {
      int32_t value = 0;
      EXPECT_TRUE(absl::SimpleAtoi(id, &value)) << name << ".out line " << i + 1;
      c.ids.push_back(value);
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadVocab(const std::string& name) {
  ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::Open(VocabPath(name)));
  ASSIGN_OR_RETURN(TokenizerSpec spec, TokenizerSpecFromGguf(*file));
  return Tokenizer::FromSpec(spec);
}

class LlamaCppVocabTest : public ::testing::TestWithParam<std::string> {};

TEST_P(LlamaCppVocabTest, IdsAreHuggingFacesAndDecodeBack) {
  const std::string name = GetParam();
  ExpectFetched(VocabPath(name));
  if (::testing::Test::HasFatalFailure()) return;
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = LoadVocab(name);
  ASSERT_OK(tokenizer);
  const std::vector<Case> cases = ReadCases(name);
  ASSERT_GE(cases.size(), 30u);
  int encoded = 0;
  int decoded = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const std::string shown = nlohmann::json(c.text).dump();
    absl::StatusOr<std::vector<int32_t>> ids = (*tokenizer)->Encode(c.text, /*add_special=*/false);
    ASSERT_TRUE(ids.ok()) << "string " << i << " " << shown << ": " << ids.status();
    if (*ids == c.ids) {
      ++encoded;
    } else {
      ADD_FAILURE() << name << " string " << i << " " << shown
                    << "\n  convoy:       " << nlohmann::json(*ids).dump()
                    << "\n  Hugging Face: " << nlohmann::json(c.ids).dump();
    }
    absl::StatusOr<std::string> text = (*tokenizer)->Decode(c.ids, /*skip_special=*/false);
    ASSERT_TRUE(text.ok()) << "string " << i << " " << shown << ": " << text.status();
    if (*text == c.text) {
      ++decoded;
    } else {
      ADD_FAILURE() << name << " string " << i << " decodes to " << nlohmann::json(*text).dump()
                    << ", not " << shown;
    }
  }
  std::cout << "[ agreement ] " << name << ": " << encoded << "/" << cases.size() << " encoded, "
            << decoded << "/" << cases.size() << " decoded back\n";
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, LlamaCppVocabTest,
                         ::testing::Values("phi-3", "llama-spm", "gemma-4", "llama-bpe", "qwen2",
                                           "gpt-2", "starcoder", "refact"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

// The tokens a chat turn ends with are among those that end generation, though these files (as
// many converted models) name only the end of text as eos and set no tokenizer.ggml.eot_token_id;
// tokens of the same text that the vocabulary does not mark special are text, not stops (Phi-3's
// "</s>" is user-defined, Gemma 4's and Qwen2's "</s>" normal).
TEST(LlamaCppVocabStopTest, EndOfTurnTokensOfEachFamily) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> families = {
      {"phi-3", {"<|end|>", "<|endoftext|>"}},           // Phi-3, Phi-3.5
      {"llama-spm", {"</s>"}},                           // Llama 2, Mistral
      {"gemma-4", {"<turn|>"}},                          // Gemma 4
      {"llama-bpe", {"<|eot_id|>", "<|end_of_text|>"}},  // Llama 3
      {"qwen2", {"<|im_end|>", "<|endoftext|>"}},        // Qwen2, Qwen2.5 (ChatML)
      {"gpt-2", {"<|endoftext|>"}},
  };
  for (const auto& [name, texts] : families) {
    SCOPED_TRACE(name);
    ExpectFetched(VocabPath(name));
    if (::testing::Test::HasFatalFailure()) return;
    absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = LoadVocab(name);
    ASSERT_OK(tokenizer);
    std::vector<int32_t> want;
    for (const std::string& text : texts) {
      const std::optional<int32_t> id = (*tokenizer)->TokenToId(text);
      ASSERT_TRUE(id.has_value()) << text;
      want.push_back(*id);
      // Written in a prompt (as a template writes it), it is that one token.
      absl::StatusOr<std::vector<int32_t>> ids = (*tokenizer)->Encode(text, false);
      ASSERT_OK(ids);
      EXPECT_EQ(*ids, std::vector<int32_t>{*id}) << text;
    }
    EXPECT_EQ(EndOfTurnTokenIds(**tokenizer), want);
  }
}

// Gemma 2 and 3 end a turn with <end_of_turn> (no such vocabulary among llama.cpp's files: a small
// one in their format).
TEST(LlamaCppVocabStopTest, GemmaThreesEndOfTurn) {
  TokenizerSpec spec;
  spec.model = "llama";
  spec.tokens = {"<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>", "a"};
  spec.token_types = {TokenType::kControl, TokenType::kControl, TokenType::kControl,
                      TokenType::kUnknown, TokenType::kControl, TokenType::kControl,
                      TokenType::kNormal};
  spec.bos_id = 2;
  spec.eos_id = 1;
  spec.unk_id = 3;
  spec.add_space_prefix = false;
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromSpec(spec);
  ASSERT_OK(tokenizer);
  EXPECT_EQ(EndOfTurnTokenIds(**tokenizer), std::vector<int32_t>{5});
}

// A vocabulary whose tokenizer convoy does not implement is refused, naming what is missing.
TEST(LlamaCppVocabRefusalTest, UnknownModelsAndPreTokenizersAreNamed) {
  for (const char* name : {"bert-bge", "mpt", "qwen35", "gemma-4"}) ExpectFetched(VocabPath(name));
  if (::testing::Test::HasFatalFailure()) return;
  EXPECT_THAT(LoadVocab("bert-bge"),
              StatusIs(absl::StatusCode::kUnimplemented,
                       AllOf(HasSubstr("model \"bert\""),
                             HasSubstr("known: \"gpt2\", \"llama\", \"gemma4\""))));
  EXPECT_THAT(LoadVocab("mpt"), StatusIs(absl::StatusCode::kUnimplemented,
                                         HasSubstr("GGUF pre-tokenizer \"mpt\" is not known")));
  // Gemma 4's merges cannot be derived from scores as SentencePiece's can: they are required.
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(VocabPath("gemma-4"));
  ASSERT_OK(file);
  absl::StatusOr<TokenizerSpec> spec = TokenizerSpecFromGguf(**file);
  ASSERT_OK(spec);
  spec->merges.clear();
  EXPECT_THAT(Tokenizer::FromSpec(*spec),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("merges: required for model \"gemma4\", absent")));
  EXPECT_THAT(LoadVocab("qwen35"),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("GGUF pre-tokenizer \"qwen35\" is not known")));
}

}  // namespace
}  // namespace convoy
