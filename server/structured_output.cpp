#include "server/structured_output.h"

#include <algorithm>
#include <chrono>
#include <mutex>

#include <fmt/format.h>

#include "engine/tokenizer/tokenizer.h"
#include "grammar/compile_cache.h"

namespace spillway::server {

namespace {

using json = nlohmann::ordered_json;

std::mutex counters_mu;
GrammarCompileCounters counters;

grammar::CompileCache& cache() {
  static grammar::CompileCache c(256);
  return c;
}

// Compiles through the cache, timing the compiles that ran.
grammar::CompileResult compile(const grammar::GrammarSpec& spec) {
  const uint64_t hits_before = cache().hits();
  const auto t0 = std::chrono::steady_clock::now();
  grammar::CompileResult r = cache().get(spec);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const bool hit = cache().hits() > hits_before;  // approximate under concurrency, exact alone
  std::lock_guard lock(counters_mu);
  if (hit) {
    ++counters.cache_hits;
  } else {
    ++counters.cache_misses;
    ++counters.compiles;
    counters.compile_seconds += seconds;
    size_t b = 0;
    while (b < std::size(GrammarCompileCounters::kCompileBucketBounds) &&
           seconds > GrammarCompileCounters::kCompileBucketBounds[b]) {
      ++b;
    }
    ++counters.compile_bucket[b];
  }
  if (std::holds_alternative<grammar::CompileError>(r)) ++counters.compile_errors;
  return r;
}

// The 400 of a compile error: JSON Schema issues name the keyword and pointer.
api::ApiError compile_error(const grammar::CompileError& e, const std::string& param, std::string_view what) {
  if (!e.issue.pointer.empty() || !e.issue.keyword.empty()) {
    const std::string pointer = e.issue.pointer.empty() ? "" : e.issue.pointer;
    return api::invalid_value(param + "#" + pointer, fmt::format("Invalid schema in '{}': {}", param, e.message));
  }
  return api::invalid_value(param, fmt::format("Invalid {} in '{}': {}", what, param, e.message));
}

GrammarResult finish(grammar::CompileResult r, const std::string& param, std::string_view what) {
  if (auto* e = std::get_if<grammar::CompileError>(&r)) return compile_error(*e, param, what);
  return std::get<std::shared_ptr<const grammar::CompiledGrammar>>(std::move(r));
}

// Rewrites local $refs of a tool's parameters schema so that it can live at
// #/$defs/<prefix>root of a combined schema whose $defs also hold its own definitions
// (renamed <prefix><name>).
void rewrite_refs(json& node, const std::string& prefix) {
  if (node.is_object()) {
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (it.key() == "$ref" && it->is_string()) {
        const std::string ref = it->get<std::string>();
        if (ref.rfind("#/$defs/", 0) == 0) {
          *it = "#/$defs/" + prefix + ref.substr(8);
        } else if (ref.rfind("#/definitions/", 0) == 0) {
          *it = "#/$defs/" + prefix + ref.substr(14);
        } else if (ref.rfind('#', 0) == 0) {
          *it = "#/$defs/" + prefix + "root" + ref.substr(1);
        }
      } else {
        rewrite_refs(*it, prefix);
      }
    }
  } else if (node.is_array()) {
    for (json& kid : node) rewrite_refs(kid, prefix);
  }
}

}  // namespace

ToolCallSyntax tool_call_syntax(const engine::Tokenizer& tokenizer) {
  if (tokenizer.find_token("[TOOL_CALLS]")) return ToolCallSyntax::Mistral;
  if (tokenizer.find_token("<|python_tag|>") && !tokenizer.find_token("<tool_call>")) {
    return ToolCallSyntax::Llama3Json;
  }
  return ToolCallSyntax::Hermes;
}

GrammarResult compile_structured_output(const api::StructuredOutput& s) {
  grammar::GrammarSpec spec;
  std::string_view what = "grammar";
  switch (s.kind) {
    case api::StructuredOutput::Kind::None:
    case api::StructuredOutput::Kind::JsonObject: spec.kind = grammar::GrammarSpec::Kind::kJsonObject; break;
    case api::StructuredOutput::Kind::JsonSchema:
      spec.kind = grammar::GrammarSpec::Kind::kJsonSchema;
      spec.text = s.text;
      // Always strict for generation: additionalProperties defaults to false, so the output
      // is one of the schema's valid instances (XGrammar's strict mode; OpenAI's strict flag
      // only promises adherence). An explicit additionalProperties still applies.
      spec.json.strict = true;
      what = "schema";
      break;
    case api::StructuredOutput::Kind::Regex:
      spec.kind = grammar::GrammarSpec::Kind::kRegex;
      spec.text = s.text;
      what = "regular expression";
      break;
    case api::StructuredOutput::Kind::Choice:
      spec.kind = grammar::GrammarSpec::Kind::kChoice;
      spec.choices = s.choices;
      what = "choice list";
      break;
    case api::StructuredOutput::Kind::Grammar:
      spec.kind = grammar::GrammarSpec::Kind::kGbnf;
      spec.text = s.text;
      what = "GBNF grammar";
      break;
  }
  return finish(compile(spec), s.param, what);
}

GrammarResult compile_tool_calls(const api::ChatRequest& req, ToolCallSyntax syntax) {
  json defs = json::object();
  json calls = json::array();
  const std::string args_key = syntax == ToolCallSyntax::Llama3Json ? "parameters" : "arguments";
  for (size_t i = 0; i < req.tools.size(); ++i) {
    const json& function = req.tools[i].at("function");
    const std::string name = function.at("name").get<std::string>();
    if (req.tool_choice == api::ToolChoice::Function && name != req.tool_choice_function) continue;
    json params = function.contains("parameters") && function["parameters"].is_object()
                      ? function["parameters"]
                      : json{{"type", "object"}, {"properties", json::object()}};
    const std::string param = fmt::format("tools[{}].function.parameters", i);
    // Alone first, so that an error's JSON pointer is the tool's own.
    {
      grammar::GrammarSpec alone;
      alone.kind = grammar::GrammarSpec::Kind::kJsonSchema;
      alone.text = params.dump();
      alone.json.strict = true;  // as response_format: a subset of the valid instances
      grammar::CompileResult r = compile(alone);
      if (auto* e = std::get_if<grammar::CompileError>(&r)) return compile_error(*e, param, "schema");
    }
    const std::string prefix = fmt::format("t{}_", i);
    rewrite_refs(params, prefix);
    for (const char* key : {"$defs", "definitions"}) {
      if (params.contains(key) && params[key].is_object()) {
        for (auto it = params[key].begin(); it != params[key].end(); ++it) defs[prefix + it.key()] = *it;
        params.erase(key);
      }
    }
    defs[prefix + "root"] = std::move(params);
    json call = {{"type", "object"},
                 {"properties", {{"name", {{"const", name}}}, {args_key, {{"$ref", "#/$defs/" + prefix + "root"}}}}},
                 {"required", {"name", args_key}},
                 {"additionalProperties", false}};
    calls.push_back(std::move(call));
  }
  if (calls.empty()) {  // parse_chat_request checked the name; keep a clear error anyway
    return api::invalid_value("tool_choice", "Invalid value for 'tool_choice': no matching function in 'tools'.");
  }
  json item = calls.size() == 1 ? calls[0] : json{{"anyOf", calls}};
  const bool many = req.tool_choice == api::ToolChoice::Required && req.parallel_tool_calls;
  grammar::GrammarSpec spec;
  spec.kind = grammar::GrammarSpec::Kind::kJsonSchema;
  spec.json.strict = true;
  spec.wrap = true;
  spec.min_items = 1;
  spec.max_items = many ? grammar::kUnbounded : 1;
  json root;
  switch (syntax) {
    case ToolCallSyntax::Hermes:
      root = std::move(item);
      spec.prefix = "<tool_call>\n";
      spec.suffix = "\n</tool_call>";
      spec.separator = "\n";
      break;
    case ToolCallSyntax::Llama3Json:
      root = std::move(item);
      spec.separator = ";";
      break;
    case ToolCallSyntax::Mistral:
      root = {{"type", "array"}, {"items", std::move(item)}, {"minItems", 1}};
      if (!many) root["maxItems"] = 1;
      spec.prefix = "[TOOL_CALLS]";
      spec.max_items = 1;
      break;
  }
  if (!defs.empty()) root["$defs"] = std::move(defs);
  spec.text = root.dump();
  return finish(compile(spec), "tools", "tool schema");
}

GrammarCompileCounters grammar_compile_counters() {
  std::lock_guard lock(counters_mu);
  return counters;
}

}  // namespace spillway::server
