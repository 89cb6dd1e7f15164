#include <string>

#include "gmock/gmock.h"
#include "grammar/grammar.h"
#include "grammar/limits.h"
#include "grammar_test_util.h"
#include "gtest/gtest.h"
#include "status_matchers.h"

namespace convoy::grammar {
namespace {

using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;
using testing::Matches;

std::shared_ptr<const Grammar> Schema(const std::string& json) {
  auto g = CompileJsonSchema(json);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *g : nullptr;
}

void ExpectRefused(const std::string& schema, const std::string& message) {
  EXPECT_THAT(CompileJsonSchema(schema),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(message)))
      << schema;
}

TEST(JsonSchemaTest, ObjectPropertiesInOrder) {
  auto g = Schema(R"({"type":"object","properties":{"b":{"type":"integer"},"a":{"type":"string"},
    "c":{"type":"boolean"}},"required":["a"],"additionalProperties":false})");
  EXPECT_TRUE(Matches(g, R"({"b":1,"a":"x","c":true})"));
  EXPECT_TRUE(Matches(g, R"({"a":"x"})"));
  EXPECT_TRUE(Matches(g, "{\n  \"a\": \"x\",\n  \"c\": false\n}"));
  EXPECT_FALSE(Matches(g, R"({"a":"x","b":1})"));  // schema order
  EXPECT_FALSE(Matches(g, R"({"b":1})"));          // a is required
  EXPECT_FALSE(Matches(g, R"({"a":"x","d":1})"));  // no extra properties
  EXPECT_FALSE(Matches(g, R"({"a":"x",})"));
}

TEST(JsonSchemaTest, NoExtraPropertiesBesidePropertiesUnlessAllowed) {
  // Absent beside "properties": only the listed ones (and unlisted required ones).
  auto closed = Schema(R"({"type":"object","properties":{"name":{"type":"integer"}},
    "required":["id"]})");
  EXPECT_TRUE(Matches(closed, R"({"name":1,"id":"x"})"));
  EXPECT_FALSE(Matches(closed, R"({"name":1,"id":2,"other":3})"));
  EXPECT_FALSE(Matches(closed, R"({"name":1})"));
  // Absent with no "properties": any object.
  EXPECT_TRUE(Matches(Schema(R"({"type":"object"})"), R"({"a":[1,{"b":null}]})"));
}

TEST(JsonSchemaTest, AnUnboundedIntegerTakesEighteenDigitsEitherWay) {
  // The limit 10^18 - 1 rounds to 10^18 as a double; the range must still stop at 18 digits
  // (the grammar fuzzer found 19, and a signed overflow, through an unbounded integer).
  auto g = Schema(R"({"type":"integer"})");
  EXPECT_TRUE(Matches(g, "0"));
  EXPECT_TRUE(Matches(g, "-5"));
  EXPECT_TRUE(Matches(g, "999999999999999999"));
  EXPECT_TRUE(Matches(g, "-999999999999999999"));
  EXPECT_FALSE(Matches(g, "1000000000000000000"));
  EXPECT_FALSE(Matches(g, "01"));
}

TEST(JsonSchemaTest, ExtraPropertiesWhenTrue) {
  auto g = Schema(
      R"({"type":"object","properties":{"name":{"type":"integer"}},"additionalProperties":true})");
  EXPECT_TRUE(Matches(g, R"({"name":1,"other":[1,{"x":null}]})"));
  EXPECT_TRUE(Matches(g, R"({"nam":"x","names":2,"x\u0061":3})"));
  EXPECT_FALSE(Matches(g, R"({"n\u0061me":3})"));  // no escapes while a key spells a listed one
  EXPECT_FALSE(Matches(g, R"({"name":1,"name":"x"})"));  // an extra key never repeats a listed one
  EXPECT_FALSE(Matches(g, R"({"other":1,"name":1})"));   // extras come after listed properties
  auto typed = Schema(R"({"type":"object","additionalProperties":{"type":"integer"}})");
  EXPECT_TRUE(Matches(typed, R"({"a":1,"b":2})"));
  EXPECT_FALSE(Matches(typed, R"({"a":"1"})"));
}

TEST(JsonSchemaTest, Arrays) {
  auto g = Schema(R"({"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":3})");
  EXPECT_TRUE(Matches(g, "[1,2]"));
  EXPECT_TRUE(Matches(g, "[ 1 , 2 , 3 ]"));
  EXPECT_FALSE(Matches(g, "[1]"));
  EXPECT_FALSE(Matches(g, "[1,2,3,4]"));
  auto prefix = Schema(R"({"type":"array","prefixItems":[{"type":"string"},{"type":"null"}],
    "items":false})");
  EXPECT_TRUE(Matches(prefix, R"([])"));
  EXPECT_TRUE(Matches(prefix, R"(["a"])"));
  EXPECT_TRUE(Matches(prefix, R"(["a",null])"));
  EXPECT_FALSE(Matches(prefix, R"(["a",null,1])"));
  EXPECT_FALSE(Matches(prefix, R"([null])"));
}

TEST(JsonSchemaTest, IntegerBoundsAreExact) {
  auto g = Schema(R"({"type":"integer","minimum":-15,"exclusiveMaximum":123})");
  for (int i = -30; i < 200; ++i) {
    EXPECT_EQ(Matches(g, std::to_string(i)), i >= -15 && i < 123) << i;
  }
  EXPECT_FALSE(Matches(g, "-0"));
  EXPECT_FALSE(Matches(g, "007"));
  EXPECT_FALSE(Matches(g, "1.0"));
}

TEST(JsonSchemaTest, NumberBounds) {
  auto g = Schema(R"({"type":"number","minimum":-1.5,"maximum":2.5})");
  EXPECT_TRUE(Matches(g, "-1"));
  EXPECT_TRUE(Matches(g, "-0.75"));
  EXPECT_TRUE(Matches(g, "1.999"));
  EXPECT_TRUE(Matches(g, "2"));
  EXPECT_FALSE(Matches(g, "3"));
  EXPECT_FALSE(Matches(g, "2.6"));
  EXPECT_FALSE(Matches(g, "-1.6"));
  EXPECT_FALSE(Matches(g, "1e0"));
  auto any = Schema(R"({"type":"number"})");
  EXPECT_TRUE(Matches(any, "-12.5e+10"));
  EXPECT_FALSE(Matches(any, "1e100000"));
}

TEST(JsonSchemaTest, StringsAndFormats) {
  auto len = Schema(R"({"type":"string","minLength":2,"maxLength":3})");
  EXPECT_TRUE(Matches(len, R"("ab")"));
  EXPECT_TRUE(Matches(len, R"("\u00e9\n")"));
  EXPECT_TRUE(Matches(len, "\"日本語\""));
  EXPECT_FALSE(Matches(len, R"("a")"));
  EXPECT_FALSE(Matches(len, R"("abcd")"));
  auto date = Schema(R"({"type":"string","format":"date-time"})");
  EXPECT_TRUE(Matches(date, R"("2024-02-28T23:59:59.123+05:30")"));
  EXPECT_FALSE(Matches(date, R"("2024-02-30T00:00:00Z")"));
  auto uuid = Schema(R"({"format":"uuid"})");
  EXPECT_TRUE(Matches(uuid, R"("123e4567-e89b-12d3-a456-426614174000")"));
  auto pattern = Schema(R"({"type":"string","pattern":"^a\"\\d$"})");
  EXPECT_TRUE(Matches(pattern, R"("a\"7")"));
  EXPECT_FALSE(Matches(pattern, R"("a"7")"));
}

TEST(JsonSchemaTest, CombinatorsAndRefs) {
  auto g = Schema(R"({"$defs":{"t":{"type":"object","properties":{"v":{"type":"integer"},
    "kids":{"type":"array","items":{"$ref":"#/$defs/t"}}},"required":["v"],
    "additionalProperties":false}},"anyOf":[{"$ref":"#/$defs/t"},{"const":"leaf"}]})");
  EXPECT_TRUE(Matches(g, R"({"v":1,"kids":[{"v":2},{"v":3,"kids":[]}]})"));
  EXPECT_TRUE(Matches(g, R"("leaf")"));
  EXPECT_FALSE(Matches(g, R"({"kids":[]})"));
  auto all = Schema(R"({"allOf":[{"enum":[1,"a",null]}],"title":"x"})");
  EXPECT_TRUE(Matches(all, "null"));
  EXPECT_FALSE(Matches(all, "2"));
}

TEST(JsonSchemaTest, RefusesUnsupportedKeywordsNamingThePointer) {
  ExpectRefused(R"({"properties":{"age":{"type":"integer","multipleOf":2}}})",
                "schema at /properties/age: keyword \"multipleOf\" is not supported");
  ExpectRefused(R"({"type":"array","uniqueItems":true})", "keyword \"uniqueItems\"");
  ExpectRefused(R"({"type":"object","patternProperties":{}})", "keyword \"patternProperties\"");
  ExpectRefused(R"({"type":"object","minProperties":1})", "keyword \"minProperties\"");
  ExpectRefused(R"({"not":{}})", "schema at /: keyword \"not\" is not supported");
  ExpectRefused(R"({"allOf":[{},{}]})", "exactly one member");
  ExpectRefused(R"({"type":"string","format":"uri"})", "format \"uri\" is not supported");
  ExpectRefused(R"({"type":"string","pattern":"(a)\\1"})", "back references");
  ExpectRefused(R"({"$ref":"#/$defs/missing"})", "does not resolve");
  ExpectRefused(R"({"$ref":"other.json#/a"})", "only references into this schema");
  ExpectRefused(R"({"$ref":"#/$defs/a","type":"string","$defs":{"a":{}}})", "beside \"$ref\"");
  ExpectRefused(
      R"({"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})",
      "left recursion");
  ExpectRefused(R"({"type":"strong"})", "unknown type");
  ExpectRefused(R"({"type":"string","nullable":true})", "keyword \"nullable\"");
  ExpectRefused("{", "not valid JSON");
  ExpectRefused("[1]", "must be an object or a boolean");
  ExpectRefused("false", "matches nothing");
}

TEST(JsonSchemaTest, RefusesContradictions) {
  ExpectRefused(R"({"type":"integer","minimum":5,"maximum":4})", "minimum is above the maximum");
  ExpectRefused(R"({"type":"integer","minimum":4.2,"maximum":4.8})", "no integer");
  ExpectRefused(R"({"type":"string","minLength":5,"maxLength":4})", "minLength is above");
  ExpectRefused(R"({"type":"array","minItems":3,"maxItems":2})", "minItems is above");
  ExpectRefused(R"({"type":"array","prefixItems":[{}],"items":false,"minItems":2})",
                "minItems is above");
  ExpectRefused(R"({"type":"object","required":["a"],"additionalProperties":false})",
                "required property \"a\"");
  ExpectRefused(R"({"enum":[1,2],"type":"string"})", "no \"enum\" value");
}

TEST(JsonSchemaTest, RefusesPastLimits) {
  ExpectRefused(R"({"type":"string","maxLength":100000})", "over the limit of 1000");
  ExpectRefused(R"({"type":"array","minItems":5000})", "over the limit");
  ExpectRefused(R"({"type":"integer","minimum":1e30})", "bounds outside");
  std::string deep = "{}";
  for (int i = 0; i < kMaxNestingDepth + 5; ++i) deep = R"({"type":"array","items":)" + deep + "}";
  ExpectRefused(deep, "nested deeper");
  ExpectRefused(std::string(kMaxSchemaBytes + 1, ' '), "over the limit");
  ExpectRefused(R"({"type":"string","pattern":")" + std::string(kMaxPatternBytes + 1, 'a') + "\"}",
                "over the limit");
}

TEST(JsonSchemaTest, AnnotationsAreIgnored) {
  auto g = Schema(R"({"$schema":"https://json-schema.org/draft/2020-12/schema","$id":"x",
    "title":"t","description":"d","examples":[1],"default":1,"$comment":"c","type":"integer",
    "minimum":0,"maximum":3,"deprecated":true,"readOnly":false})");
  EXPECT_TRUE(Matches(g, "2"));
}

}  // namespace
}  // namespace convoy::grammar
