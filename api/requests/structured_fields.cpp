#include "api/requests/structured_fields.h"

#include <fmt/format.h>

namespace spillway::api {

namespace {

using json = nlohmann::ordered_json;

// Sets out from one source; a second source is a 400.
bool claim(FieldReader& body, StructuredOutput& out, std::string param) {
  if (out.active()) {
    body.fail(invalid_value(param, fmt::format("'{}' and '{}' both constrain the output; give only one.",
                                               out.param, param)));
    return false;
  }
  out.param = std::move(param);
  return true;
}

// A schema given as an object (or, as vLLM allows for guided_json, as JSON text).
void read_schema(FieldReader& body, StructuredOutput& out, const json& schema, const std::string& param,
                 bool allow_text) {
  if (schema.is_string() && allow_text) {
    auto parsed = json::parse(schema.get_ref<const std::string&>(), nullptr, false);
    if (parsed.is_discarded() || !(parsed.is_object() || parsed.is_boolean())) {
      return body.fail(invalid_value(param, fmt::format("Invalid '{}': the string is not a JSON schema object.", param)));
    }
    out.text = parsed.dump();
  } else if (schema.is_object() || schema.is_boolean()) {
    out.text = schema.dump();
  } else {
    return body.fail(invalid_type(param, allow_text ? "an object or a string" : "an object", json_type_phrase(schema)));
  }
  out.kind = StructuredOutput::Kind::JsonSchema;
}

void read_string(FieldReader& body, StructuredOutput& out, const json& v, const std::string& param,
                 StructuredOutput::Kind kind) {
  if (!v.is_string()) return body.fail(invalid_type(param, "a string", json_type_phrase(v)));
  if (v.get_ref<const std::string&>().empty()) {
    return body.fail(invalid_value(param, fmt::format("Invalid '{}': empty string.", param)));
  }
  out.text = v.get<std::string>();
  out.kind = kind;
}

void read_choices(FieldReader& body, StructuredOutput& out, const json& v, const std::string& param) {
  if (!v.is_array()) return body.fail(invalid_type(param, "an array of strings", json_type_phrase(v)));
  if (v.empty()) return body.fail(invalid_value(param, fmt::format("Invalid '{}': empty array.", param)));
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string()) return body.fail(invalid_type(indexed(param, i), "a string", json_type_phrase(v[i])));
    if (v[i].get_ref<const std::string&>().empty()) {
      return body.fail(invalid_value(indexed(param, i), fmt::format("Invalid '{}': empty string.", indexed(param, i))));
    }
    out.choices.push_back(v[i].get<std::string>());
  }
  out.kind = StructuredOutput::Kind::Choice;
}

void read_response_format(FieldReader& body, StructuredOutput& out) {
  const json* format = body.object("response_format");
  if (!format) return;
  FieldReader r(*format, "response_format");
  std::optional<std::string> type = r.string("type", true);
  if (!r.ok()) return body.fail(*r.error());
  if (*type == "text") return;
  if (*type == "json_object") {
    if (claim(body, out, "response_format")) out.kind = StructuredOutput::Kind::JsonObject;
    return;
  }
  if (*type == "json_schema") {
    const json* spec = r.object("json_schema", true);
    if (!r.ok()) return body.fail(*r.error());
    FieldReader s(*spec, "response_format.json_schema");
    std::optional<std::string> name = s.string("name", true);
    std::optional<bool> strict = s.boolean("strict");
    const json* schema = s.find("schema");
    if (!s.ok()) return body.fail(*s.error());
    if (!claim(body, out, "response_format.json_schema.schema")) return;
    out.name = *name;
    out.strict = strict.value_or(false);
    if (!schema) {  // OpenAI: the schema is optional; without one any JSON value is valid
      out.kind = StructuredOutput::Kind::JsonSchema;
      out.text = "{}";
      return;
    }
    return read_schema(body, out, *schema, "response_format.json_schema.schema", /*allow_text=*/false);
  }
  body.fail(invalid_value("response_format.type",
                          fmt::format("Invalid value: '{}'. Supported values are: 'text', "
                                      "'json_object' and 'json_schema'.",
                                      *type)));
}

// vLLM's structured_outputs object (and guided_* fields, its older spelling).
void read_vllm(FieldReader& body, StructuredOutput& out) {
  if (const json* so = body.object("structured_outputs")) {
    FieldReader r(*so, "structured_outputs");
    for (const char* key : {"json", "regex", "choice", "grammar", "json_object"}) {
      const json* v = r.find(key);
      if (!v) continue;
      const std::string param = r.param(key);
      if (std::string_view(key) == "json_object") {
        if (!v->is_boolean()) return body.fail(invalid_type(param, "a boolean", json_type_phrase(*v)));
        if (!v->get<bool>()) continue;
        if (claim(body, out, param)) out.kind = StructuredOutput::Kind::JsonObject;
        continue;
      }
      if (!claim(body, out, param)) return;
      if (std::string_view(key) == "json") read_schema(body, out, *v, param, true);
      if (std::string_view(key) == "regex") read_string(body, out, *v, param, StructuredOutput::Kind::Regex);
      if (std::string_view(key) == "choice") read_choices(body, out, *v, param);
      if (std::string_view(key) == "grammar") read_string(body, out, *v, param, StructuredOutput::Kind::Grammar);
    }
  }
  if (const json* v = body.find("guided_json"); v && claim(body, out, "guided_json")) {
    read_schema(body, out, *v, "guided_json", true);
  }
  if (const json* v = body.find("guided_regex"); v && claim(body, out, "guided_regex")) {
    read_string(body, out, *v, "guided_regex", StructuredOutput::Kind::Regex);
  }
  if (const json* v = body.find("guided_choice"); v && claim(body, out, "guided_choice")) {
    read_choices(body, out, *v, "guided_choice");
  }
  if (const json* v = body.find("guided_grammar"); v && claim(body, out, "guided_grammar")) {
    read_string(body, out, *v, "guided_grammar", StructuredOutput::Kind::Grammar);
  }
}

// llama-server: json_schema (an object) and grammar (GBNF).
void read_llama_server(FieldReader& body, StructuredOutput& out) {
  if (const json* v = body.find("json_schema"); v && claim(body, out, "json_schema")) {
    read_schema(body, out, *v, "json_schema", false);
  }
  if (const json* v = body.find("grammar"); v && claim(body, out, "grammar")) {
    read_string(body, out, *v, "grammar", StructuredOutput::Kind::Grammar);
  }
}

}  // namespace

void read_structured_fields(FieldReader& body, StructuredOutput& out) {
  if (!body.ok()) return;
  read_response_format(body, out);
  if (body.ok()) read_vllm(body, out);
  if (body.ok()) read_llama_server(body, out);
  if (!body.ok()) out = StructuredOutput{};
}

}  // namespace spillway::api
