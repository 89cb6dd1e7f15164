// ChatTemplate against the independent reference: Python's Jinja2 configured as transformers
// configures it, rendering real models' chat templates over many conversations
// (tests/fixtures/chat_template/*.json, written by scripts/fixtures/chat_template_fixtures.py; the
// lcpp_* templates are llama.cpp's copies of Gemma 2, Phi-3.5, Mistral Nemo, Llama 3.x, Qwen2.5,
// Qwen3 and SmolLM3's, from the sdist scripts/fetch-llamacpp-vocab.sh unpacks).
// Every rendered case must match byte for byte; every case the template rejects through
// raise_exception() must fail with the same message; every other Jinja2 failure must fail too.
#include "text/chat_template.h"

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "status_matchers.h"
#include "test_paths.h"

namespace convoy {
namespace {

using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;
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

std::vector<ChatMessage> Messages(const Json& json) {
  std::vector<ChatMessage> messages;
  for (const Json& m : json) {
    messages.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
  }
  return messages;
}

// Where two texts first differ, for a readable failure.
std::string FirstDifference(const std::string& got, const std::string& want) {
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  auto around = [&](const std::string& s) {
    const size_t from = i < 40 ? 0 : i - 40;
    return Json(s.substr(from, 80)).dump();
  };
  return "first difference at byte " + std::to_string(i) + ":\n  got:  " + around(got) +
         "\n  want: " + around(want);
}

class ChatTemplateFixtureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ChatTemplateFixtureTest, MatchesJinja2) {
  const Json fixture = ReadFixture(GetParam());
  ASSERT_TRUE(fixture.is_object());
  const absl::StatusOr<ChatTemplate> chat_template =
      ChatTemplate::Parse(fixture["template"].get<std::string>());
  ASSERT_TRUE(chat_template.ok()) << chat_template.status();

  int passed = 0;
  int rendered = 0;
  int rejected = 0;
  for (const Json& test_case : fixture["cases"]) {
    const std::string name = test_case["name"].get<std::string>();
    SCOPED_TRACE(name);
    ChatTemplateOptions options;
    options.add_generation_prompt = test_case["add_generation_prompt"].get<bool>();
    options.bos_token = fixture["bos_token"].get<std::string>();
    options.eos_token = fixture["eos_token"].get<std::string>();
    options.now = std::chrono::system_clock::from_time_t(fixture["now_unix"].get<std::time_t>());
    if (test_case.contains("extra_context")) {
      options.extra_context_json = test_case["extra_context"].dump();
    }
    const absl::StatusOr<std::string> text =
        chat_template->Render(Messages(test_case["messages"]), options);
    if (test_case.contains("expected")) {
      ++rendered;
      const std::string want = test_case["expected"].get<std::string>();
      if (!text.ok()) {
        ADD_FAILURE() << "Jinja2 rendered it; we failed: " << text.status();
      } else if (*text != want) {
        ADD_FAILURE() << FirstDifference(*text, want);
      } else {
        ++passed;
      }
      continue;
    }
    ++rejected;
    const Json& error = test_case["error"];
    if (text.ok()) {
      ADD_FAILURE() << "Jinja2 failed (" << error.dump() << "); we rendered " << Json(*text).dump();
    } else if (error["kind"] == "raise_exception") {
      EXPECT_TRUE(IsRaisedByTemplate(text.status())) << text.status();
      EXPECT_THAT(text.status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                          error["message"].get<std::string>()));
      if (IsRaisedByTemplate(text.status()) &&
          text.status().message() == error["message"].get<std::string>()) {
        ++passed;
      }
    } else {
      EXPECT_FALSE(IsRaisedByTemplate(text.status())) << text.status();
      EXPECT_THAT(text.status(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("line ")));
      ++passed;
    }
  }
  std::cout << "[ agreement ] " << GetParam() << ": " << passed << "/" << (rendered + rejected)
            << " cases (" << rendered << " rendered, " << rejected << " rejected by Jinja2)\n";
  EXPECT_GT(rendered, 0);
}

INSTANTIATE_TEST_SUITE_P(RealTemplates, ChatTemplateFixtureTest,
                         ::testing::Values("chatml_qwen2", "qwen2_5", "smollm2", "llama3",
                                           "llama3_1", "llama3_2", "llama2", "mistral_v0_1",
                                           "mistral_v0_2", "mistral_v0_3", "zephyr",
                                           // llama.cpp's copies of real templates.
                                           "lcpp_gemma2", "lcpp_phi3_5", "lcpp_mistral_nemo",
                                           "lcpp_llama3_1", "lcpp_llama3_2", "lcpp_llama3_3",
                                           "lcpp_qwen2_5", "lcpp_qwen3", "lcpp_smollm3"),
                         [](const auto& info) { return info.param; });

// ---------------------------------------------------------------------------------------------
// The API around the interpreter.

TEST(ChatTemplateTest, RendersAConversation) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::Parse(
      "{% for m in messages %}<{{ m.role }}>{{ m['content'] }}{% endfor %}"
      "{% if add_generation_prompt %}<assistant>{% endif %}");
  ASSERT_OK(t);
  ChatTemplateOptions options;
  options.add_generation_prompt = true;
  EXPECT_EQ(*t->Render({{"system", "S"}, {"user", "U"}}, options), "<system>S<user>U<assistant>");
  options.add_generation_prompt = false;
  EXPECT_EQ(*t->Render({{"user", "U"}}, options), "<user>U");
}

TEST(ChatTemplateTest, SpecialTokensAreUndefinedWhenEmpty) {
  absl::StatusOr<ChatTemplate> t =
      ChatTemplate::Parse("{{ bos_token is defined }}|{{ eos_token }}|{{ tools }}");
  ASSERT_OK(t);
  ChatTemplateOptions options;
  options.eos_token = "</s>";
  EXPECT_EQ(*t->Render({}, options), "False|</s>|None");
}

TEST(ChatTemplateTest, ExtraContextBecomesVariables) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::Parse(
      "{{ date_string }}|{{ tools | length }}|{{ enable_thinking }}|{{ n + 1 }}|{{ f }}|"
      "{{ tools[0].function.name }}|{{ tools | tojson }}");
  ASSERT_OK(t);
  ChatTemplateOptions options;
  options.extra_context_json =
      R"({"date_string": "1 Jan 2030", "enable_thinking": false, "n": 41, "f": 0.5,
          "tools": [{"function": {"name": "f", "z": 1, "a": null}}]})";
  EXPECT_EQ(*t->Render({}, options),
            "1 Jan 2030|1|False|42|0.5|f|[{\"function\": {\"name\": \"f\", \"z\": 1, \"a\": "
            "null}}]");
}

TEST(ChatTemplateTest, AMessagesExtraMembersReachTheTemplate) {
  // As Hermes-style templates read an agent's history: an assistant's tool_calls, a tool's id.
  absl::StatusOr<ChatTemplate> t = ChatTemplate::Parse(
      "{% for m in messages %}{{ m.role }}:{% if m.tool_calls %}{% for c in m.tool_calls %}"
      "{{ c.function.name }}{{ c.function.arguments | tojson }}{% endfor %}{% else %}"
      "{{ m.content }}{% endif %}{% if m.tool_call_id %}#{{ m.tool_call_id }}{% endif %};"
      "{% endfor %}");
  ASSERT_OK(t);
  ChatMessage call{"assistant", "",
                   R"({"tool_calls": [{"function": {"name": "f", "arguments": {"x": 1}}}]})"};
  ChatMessage result{"tool", "sunny", R"({"tool_call_id": "c1"})"};
  EXPECT_EQ(*t->Render({{"user", "U"}, call, result}, {}),
            "user:U;assistant:f{\"x\": 1};tool:sunny#c1;");
  ChatMessage bad{"assistant", "", R"({"role": "user"})"};
  EXPECT_THAT(t->Render({bad}, {}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("may not set 'role'")));
}

TEST(ChatTemplateTest, RefusesBadExtraContext) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::Parse("x");
  ASSERT_OK(t);
  ChatTemplateOptions options;
  for (const char* bad : {"[1]", "{", "{\"messages\": []}", "nope"}) {
    options.extra_context_json = bad;
    EXPECT_THAT(t->Render({}, options),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("extra_context_json")))
        << bad;
  }
  options.extra_context_json = "{\"a\": " + std::string(1000, '[') + std::string(1000, ']') + "}";
  EXPECT_THAT(t->Render({}, options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("deeper")));
}

TEST(ChatTemplateTest, StrftimeNowFormatsTheGivenClock) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::Parse("{{ strftime_now('%Y-%m-%d') }}");
  ASSERT_OK(t);
  ChatTemplateOptions options;
  options.now = std::chrono::system_clock::from_time_t(1735732800);  // 2025-01-01 12:00 UTC
  EXPECT_EQ(*t->Render({}, options), "2025-01-01");
  options.now.reset();
  EXPECT_EQ(t->Render({}, options)->size(), 10u);
}

TEST(ChatTemplateTest, RaiseExceptionKeepsTheTemplatesMessage) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::Parse(
      "{% if messages[0].role != 'user' %}{{ raise_exception('Say something first!') }}"
      "{% endif %}ok");
  ASSERT_OK(t);
  const absl::StatusOr<std::string> text = t->Render({{"assistant", "hi"}}, {});
  EXPECT_THAT(text, StatusIs(absl::StatusCode::kInvalidArgument, "Say something first!"));
  EXPECT_TRUE(IsRaisedByTemplate(text.status()));
  // A failure of the template itself names where it happened.
  const absl::StatusOr<std::string> empty = t->Render({}, {});
  EXPECT_THAT(empty, StatusIs(absl::StatusCode::kInvalidArgument,
                              "chat template: line 1, column 18: list object has no element 0"));
  EXPECT_FALSE(IsRaisedByTemplate(empty.status()));
}

TEST(ChatTemplateTest, BrokenTemplatesNameLineAndColumn) {
  struct Case {
    const char* source;
    const char* message;
  };
  const Case cases[] = {
      {"{% if true %}never closed",
       "line 1, column 26: unexpected end of template: 'if' opened at line 1, column 4 is never "
       "closed with 'endif'"},
      {"ok\n{{ x | nosuch }}", "line 2, column 8: unknown filter 'nosuch'"},
      {"{{ x is nosuch }}", "line 1, column 9: unknown test 'nosuch'"},
      {"line one\n  {{ 1 + }}",
       "line 2, column 10: expected an expression, got end of print "
       "statement '}}'"},
      {"{{ 'open", "line 1, column 4: string literal is never closed"},
      {"{{ x ", "line 1, column 1: tag '{{' is never closed with '}}'"},
      {"{% for x in y %}",
       "line 1, column 17: unexpected end of template: 'for' opened at line 1, "
       "column 4 is never closed with 'endfor'"},
      {"{% for x in y %}{% endif %}",
       "line 1, column 20: unexpected 'endif': the innermost open block is 'for' (line 1, column "
       "4), closed by 'endfor'"},
      {"{% endfor %}", "line 1, column 4: unknown tag 'endfor'"},
      {"{% macro m() %}{% endmacro %}", "line 1, column 4: 'macro' tags are not supported"},
      {"{# never closed", "line 1, column 1: comment '{#' is never closed with '#}'"},
      {"{{ (1, 2 }}", "line 1, column 10: unexpected '}', expected ')'"},
      {"{{ a b }}", "line 1, column 6: expected end of print statement '}}', got 'b'"},
      {"{% break %}", "line 1, column 4: 'break' outside of a loop"},
      {"{{ x ! y }}", "line 1, column 6: unexpected character '!'"},
      {"{% set 1 = 2 %}", "line 1, column 8: expected a variable name, got number 1"},
      {"\n\n   {{ f(*args) }}", "line 3, column 9: *args and **kwargs are not supported"},
      {"{{ caf\xc3\xa9 }}", "line 1, column 7: unexpected character '\xc3\xa9'"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(ChatTemplate::Parse(c.source), StatusIs(absl::StatusCode::kInvalidArgument,
                                                        std::string("chat template: ") + c.message))
        << c.source;
  }
}

TEST(ChatTemplateTest, DeepNestingIsRefusedNotOverflowed) {
  const std::string parens = "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
  EXPECT_THAT(ChatTemplate::Parse(parens),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("nested deeper")));
  std::string ifs;
  for (int i = 0; i < 2000; ++i) ifs += "{% if true %}";
  EXPECT_THAT(ChatTemplate::Parse(ifs),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("nested deeper")));
  const std::string nots = "{{ " + [] {
    std::string s;
    for (int i = 0; i < 5000; ++i) s += "not ";
    return s;
  }() + "1 }}";
  EXPECT_THAT(ChatTemplate::Parse(nots),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("nested deeper")));
}

TEST(ChatTemplateTest, RunawayTemplatesStopAtTheirLimits) {
  ChatTemplateOptions options;
  options.max_steps = 1'000'000;
  options.max_output_bytes = 1 << 20;
  const char* runaway[] = {
      "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
      "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}"
      "{% endfor %}",
      "{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}"
      "{% endfor %}",
      "{{ 'x' * 1000000000000 }}",
      "{{ [0] * 1000000000000 }}",
      "{{ range(1000000000000) | length }}",
      "{% for i in range(100000) %}{{ 'more output' }}{% endfor %}",
      "{% set ns = namespace(l=[]) %}{% for i in range(60) %}{% set ns.l = [ns.l, ns.l] %}"
      "{% endfor %}{{ ns.l }}",
  };
  for (const char* source : runaway) {
    absl::StatusOr<ChatTemplate> t = ChatTemplate::Parse(source);
    ASSERT_OK(t);
    const auto start = std::chrono::steady_clock::now();
    EXPECT_THAT(t->Render({}, options),
                StatusIs(absl::StatusCode::kResourceExhausted, ::testing::_))
        << source;
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5)) << source;
  }
}

TEST(ChatTemplateTest, NamespacesCannotHoldNamespaces) {
  absl::StatusOr<ChatTemplate> t =
      ChatTemplate::Parse("{% set ns = namespace() %}{% set ns.self = ns %}{{ ns }}");
  ASSERT_OK(t);
  EXPECT_THAT(t->Render({}, {}), StatusIs(absl::StatusCode::kInvalidArgument,
                                          HasSubstr("a namespace cannot hold a namespace")));
}

TEST(ChatTemplateTest, CopiesRenderConcurrently) {
  absl::StatusOr<ChatTemplate> parsed = ChatTemplate::Parse(
      "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
      "{{ m.content }}{% endfor %}{{ ns.n }}");
  ASSERT_OK(parsed);
  const ChatTemplate copy = *parsed;
  std::vector<std::thread> threads;
  std::vector<std::string> results(8);
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      const ChatTemplate& t = i % 2 ? copy : *parsed;
      for (int k = 0; k < 200; ++k) {
        results[i] =
            t.Render({{"user", std::to_string(i)}, {"assistant", "x"}}, {}).value_or("failed");
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int i = 0; i < 8; ++i) EXPECT_EQ(results[i], std::to_string(i) + "x2");
}

}  // namespace
}  // namespace convoy
