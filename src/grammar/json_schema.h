// JSON Schema (draft 2020-12, with draft 7's "definitions") to grammar: the texts the grammar
// matches are JSON documents valid against the schema. What is supported, refused and how each
// keyword is enforced is in docs/grammar.md; in short:
//  - types (and type lists), enum, const, anyOf, oneOf (as anyOf: keep its branches disjoint),
//    allOf with one member, $ref to "#..." JSON pointers (recursion included), $defs/definitions;
//  - objects: properties in the schema's order, optional ones may be left out, required; extra
//    properties only when additionalProperties is absent, true or a schema (then after the listed
//    ones, with keys that differ from every listed name);
//  - arrays: items, prefixItems, minItems, maxItems; strings: minLength, maxLength, pattern (the
//    whole string matches it), format date, time, date-time, uuid, email;
//  - integers: minimum, maximum, exclusiveMinimum, exclusiveMaximum exactly; numbers: the same
//    bounds, written without exponent;
//  - annotations (title, description, examples, default, $schema, $id, $comment, ...) ignored.
// Any other keyword, and these in combinations not listed, are refused naming the keyword and the
// JSON pointer of the schema that holds it.
#ifndef CONVOY_GRAMMAR_JSON_SCHEMA_H_
#define CONVOY_GRAMMAR_JSON_SCHEMA_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "grammar/program.h"

namespace convoy::grammar {

// INVALID_ARGUMENT "schema at /pointer: what" for a schema that is not JSON, is not a schema,
// uses what is not supported, cannot be satisfied, or passes a limit of limits.h.
absl::StatusOr<Program> JsonSchemaToProgram(std::string_view schema_json);

// Any JSON object.
Program AnyJsonObjectProgram();

}  // namespace convoy::grammar

#endif  // CONVOY_GRAMMAR_JSON_SCHEMA_H_
