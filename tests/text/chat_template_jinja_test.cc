// The Jinja2 interpreter behind ChatTemplate, one behaviour at a time: small templates rendered by
// Python's Jinja2 (tests/fixtures/chat_template/snippets.json) must render the same here, fail
// where Jinja2 fails, and fail to parse where Jinja2 fails to parse. Then a fuzz-style test: cut
// and mutated templates must come back as errors or renders, never as a crash or a hang.
#include <chrono>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "status_matchers.h"
#include "test_paths.h"
#include "text/chat_template.h"

namespace convoy {
namespace {

using ::convoy::testing::StatusIs;
using Json = nlohmann::ordered_json;

Json ReadFixture(const std::string& name) {
  const std::string path = TestSourceDir() + "/tests/fixtures/chat_template/" + name + ".json";
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  Json json = Json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(json.is_discarded()) << "cannot read " << path;
  return json;
}

// Renders each case of a fixture of small templates (with no messages and the fixture's context
// as variables) and compares with Jinja2's result.
class JinjaFixtureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(JinjaFixtureTest, MatchesJinja2) {
  const Json fixture = ReadFixture(GetParam());
  ASSERT_TRUE(fixture.is_object());
  ChatTemplateOptions options;
  options.extra_context_json = fixture["context"].dump();
  options.now = std::chrono::system_clock::from_time_t(fixture["now_unix"].get<std::time_t>());
  int passed = 0;
  for (const Json& test_case : fixture["cases"]) {
    const std::string source = test_case["template"].get<std::string>();
    SCOPED_TRACE(test_case["name"].get<std::string>() + ": " + Json(source).dump());
    const absl::StatusOr<ChatTemplate> parsed = ChatTemplate::Parse(source);
    if (test_case.contains("error") && test_case["error"]["phase"] == "parse") {
      EXPECT_THAT(parsed, StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_))
          << "Jinja2: " << test_case["error"].dump();
      if (!parsed.ok()) ++passed;
      continue;
    }
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    const absl::StatusOr<std::string> text = parsed->Render({}, options);
    if (test_case.contains("expected")) {
      const std::string want = test_case["expected"].get<std::string>();
      if (!text.ok()) {
        ADD_FAILURE() << "want " << Json(want).dump() << ", got " << text.status();
      } else {
        EXPECT_EQ(*text, want) << "got " << Json(*text).dump() << "\nwant " << Json(want).dump();
        if (*text == want) ++passed;
      }
      continue;
    }
    const Json& error = test_case["error"];
    EXPECT_FALSE(text.ok()) << "Jinja2: " << error.dump() << "; we rendered "
                            << Json(text.value_or("")).dump();
    if (text.ok()) continue;
    if (error["kind"] == "raise_exception") {
      EXPECT_TRUE(IsRaisedByTemplate(text.status()));
      EXPECT_EQ(text.status().message(), error["message"].get<std::string>());
    }
    ++passed;
  }
  std::cout << "[ agreement ] " << GetParam() << ": " << passed << "/" << fixture["cases"].size()
            << " cases\n";
}

// snippets: one behaviour each, written by hand; generated: random expressions and random
// statement layouts (whitespace control, trim_blocks, lstrip_blocks, nesting).
INSTANTIATE_TEST_SUITE_P(Jinja2, JinjaFixtureTest, ::testing::Values("snippets", "generated"),
                         [](const auto& info) { return info.param; });

// Every fixture template, plus constructs the fuzzer should meet.
std::vector<std::string> Seeds() {
  std::vector<std::string> seeds;
  for (const char* name : {"chatml_qwen2", "qwen2_5", "smollm2", "llama3", "llama3_1", "llama3_2",
                           "llama2", "mistral_v0_1", "mistral_v0_2", "mistral_v0_3", "zephyr"}) {
    seeds.push_back(ReadFixture(name)["template"].get<std::string>());
  }
  for (const char* name : {"snippets", "generated"}) {
    const Json fixture = ReadFixture(name);
    for (const Json& test_case : fixture["cases"]) {
      seeds.push_back(test_case["template"].get<std::string>());
    }
  }
  return seeds;
}

// Renders whatever parses, with a conversation and tight limits; only crashes and hangs fail.
void Exercise(const std::string& source) {
  const absl::StatusOr<ChatTemplate> parsed = ChatTemplate::Parse(source);
  if (!parsed.ok()) {
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << parsed.status();
    EXPECT_THAT(std::string(parsed.status().message()), ::testing::HasSubstr("line "));
    return;
  }
  ChatTemplateOptions options;
  options.bos_token = "<s>";
  options.eos_token = "</s>";
  options.add_generation_prompt = true;
  options.max_steps = 200'000;
  options.max_output_bytes = 1 << 20;
  options.extra_context_json = R"({"tools": [{"function": {"name": "f", "arguments": {}}}]})";
  const absl::StatusOr<std::string> text = parsed->Render(
      {{"system", "s"}, {"user", "hi {{ x }}"}, {"assistant", " a "}, {"user", "q"}}, options);
  if (!text.ok()) {
    EXPECT_THAT(text.status().code(), ::testing::AnyOf(absl::StatusCode::kInvalidArgument,
                                                       absl::StatusCode::kResourceExhausted))
        << text.status();
  }
}

TEST(JinjaFuzzTest, TruncatedTemplatesFailCleanly) {
  for (const std::string& seed : Seeds()) {
    const size_t step = std::max<size_t>(1, seed.size() / 97);
    for (size_t cut = 0; cut < seed.size(); cut += step) Exercise(seed.substr(0, cut));
  }
}

TEST(JinjaFuzzTest, MutatedTemplatesFailCleanly) {
  const std::vector<std::string> seeds = Seeds();
  std::mt19937 rng(20260101);
  const std::string alphabet =
      "{}%#-+()[]'\".,:|~=!<>*/ \n\tabcdefinorstx0123456789_\\\xc3\xa9\xff";
  const char* fragments[] = {"{%",       "%}",         "{{",
                             "}}",       "{#",         "#}",
                             "{%-",      "-%}",        " if ",
                             " for ",    " in ",       " endif ",
                             " endfor ", " else ",     " set ",
                             " is ",     " not ",      "loop.",
                             "messages", "[0]",        "[1:]",
                             "|trim",    "|tojson",    "(",
                             ")",        "namespace(", "raise_exception(",
                             " ~ ",      " + ",        "'",
                             "\"",       "\\"};
  const auto start = std::chrono::steady_clock::now();
  for (int iteration = 0; iteration < 4000; ++iteration) {
    std::string source = seeds[rng() % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 6);
    for (int e = 0; e < edits; ++e) {
      const size_t at = source.empty() ? 0 : rng() % (source.size() + 1);
      switch (rng() % 4) {
        case 0:  // delete a run
          source.erase(at, rng() % 8);
          break;
        case 1:  // insert a random character
          source.insert(at, 1, alphabet[rng() % alphabet.size()]);
          break;
        case 2:  // insert a Jinja fragment
          source.insert(at, fragments[rng() % (sizeof(fragments) / sizeof(fragments[0]))]);
          break;
        default:  // overwrite a byte with anything
          if (at < source.size()) source[at] = static_cast<char>(rng() % 256);
      }
    }
    Exercise(source);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(120));
}

TEST(JinjaFuzzTest, RandomTokenSoupFailsCleanly) {
  std::mt19937 rng(7);
  const char* tokens[] = {
      "{{",   "}}",   "{%",   "%}", "if",  "for",  "x",    "in",    "messages", "(",
      ")",    "[",    "]",    "{",  "}",   ",",    ":",    ".",     "|",        "is",
      "not",  "and",  "or",   "1",  "'s'", "+",    "-",    "*",     "/",        "//",
      "%",    "**",   "~",    "==", "<",   "set",  "=",    "endif", "endfor",   "else",
      "elif", "loop", "trim", "\n", " ",   "none", "true", "range", "namespace"};
  for (int iteration = 0; iteration < 3000; ++iteration) {
    std::string source;
    const int length = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < length; ++i) {
      source += tokens[rng() % (sizeof(tokens) / sizeof(tokens[0]))];
      source += ' ';
    }
    Exercise(source);
  }
}

}  // namespace
}  // namespace convoy
