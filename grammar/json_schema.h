// JSON Schema front end: a JSON Schema (draft 7 or 2020-12 semantics) -> grammar IR
// whose language is the JSON texts that validate, written with bounded whitespace.
//
// Supported: type (incl. arrays, "nullable"), enum/const, properties/required/
// additionalProperties (schema order or sorted order; unknown keys allowed anywhere unless
// additionalProperties is false), items/prefixItems/additionalItems, minItems/maxItems,
// anyOf, oneOf (as anyOf), allOf (merged), $ref/$defs/definitions (local JSON pointers,
// recursive), min/maxLength, pattern, format (date-time, date, time, uuid, email, uri,
// ipv4, hostname), integer bounds, number bounds with integer-valued limits,
// min/maxProperties where implied by the properties, boolean schemas, annotations ignored.
// Anything else is an error naming the keyword and its JSON pointer.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "common/result.h"
#include "grammar/ir.h"

namespace spillway::grammar {

struct JsonSchemaOptions {
  bool strict = false;              // additionalProperties defaults to false (OpenAI strict)
  bool sorted_properties = false;   // properties in byte order (how nlohmann::json dumps
                                    // objects) instead of schema order
  bool draft7 = false;              // draft-07 semantics ($ref siblings ignored, items as a
                                    // tuple, additionalItems) even without a $schema saying so
};

// An unsupported or invalid schema: `pointer` is the JSON pointer of the offending
// keyword (e.g. "/properties/a/not"), `keyword` the keyword (may be empty).
struct SchemaIssue {
  std::string keyword;
  std::string pointer;
};

// On error, *issue (if given) names the keyword and pointer; the Error's message says the
// same in words.
Result<Grammar> json_schema_grammar(const nlohmann::ordered_json& schema, const JsonSchemaOptions& options = {},
                                    SchemaIssue* issue = nullptr);

// JSON mode: any JSON object (response_format json_object).
Grammar json_object_grammar();

}  // namespace spillway::grammar
