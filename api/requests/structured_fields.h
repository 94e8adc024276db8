// Structured-output request fields, read and shape-checked into one plain description (the
// server compiles it with grammar/, which api/ does not see):
//   OpenAI        response_format {type: text | json_object | json_schema {name, schema, strict}}
//   vLLM          structured_outputs {json, regex, choice, grammar, json_object}
//                 and the older guided_json / guided_regex / guided_choice / guided_grammar
//   llama-server  json_schema (a schema object), grammar (GBNF text)
// At most one of them may constrain a request; a second is a 400 naming both fields.
#pragma once

#include <string>
#include <vector>

#include "api/requests/json_fields.h"

namespace spillway::api {

struct StructuredOutput {
  enum class Kind { None, JsonObject, JsonSchema, Regex, Choice, Grammar };
  Kind kind = Kind::None;
  std::string text;                  // JsonSchema: the schema as JSON text; Regex; Grammar (GBNF)
  std::vector<std::string> choices;  // Choice: non-empty strings
  bool strict = false;               // JsonSchema: OpenAI strict (additionalProperties false)
  std::string param;                 // the field it came from, for errors ("response_format")
  std::string name;                  // response_format.json_schema.name
  bool active() const { return kind != Kind::None; }
};

// Reads every structured-output field the body has; errors go to body.fail().
void read_structured_fields(FieldReader& body, StructuredOutput& out);

}  // namespace spillway::api
