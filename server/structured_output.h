// Structured output for the HTTP layer: the request's constraint (api::StructuredOutput, or
// forced tool calls) compiled with grammar/ into the grammar the engine's per-sequence
// matcher follows. Compiles go through one process-wide CompileCache (LRU, keyed by the
// canonical spec); every error is a 400 invalid_request_error naming the field, and for
// JSON Schema the keyword and its JSON pointer (param "<field>#<pointer>").
//
// Tool calls are forced in the tool-call syntax of the model (from its vocabulary's marker
// tokens): Hermes / Qwen `<tool_call>\n{"name": .., "arguments": {..}}\n</tool_call>`
// (several separated by "\n"), Mistral `[TOOL_CALLS][{"name": .., "arguments": {..}}, ..]`,
// Llama 3 `{"name": .., "parameters": {..}}` (several separated by ";"), all of which
// api::parse_tool_calls reads back.
//
// Thread contract: every function is thread-safe (HTTP threads).
#pragma once

#include <cstdint>
#include <memory>

#include "api/api_error.h"
#include "api/requests/chat_request.h"
#include "api/requests/structured_fields.h"
#include "grammar/fsm.h"

namespace spillway::engine {
class Tokenizer;
}

namespace spillway::server {

enum class ToolCallSyntax { Hermes, Mistral, Llama3Json };

// From marker tokens in the vocabulary: [TOOL_CALLS] -> Mistral, <|python_tag|> without
// <tool_call> -> Llama 3, else Hermes.
ToolCallSyntax tool_call_syntax(const engine::Tokenizer& tokenizer);

using GrammarResult = api::ApiResult<std::shared_ptr<const grammar::CompiledGrammar>>;

// A response_format / structured_outputs / guided_* / json_schema / grammar constraint.
// Must be active().
GrammarResult compile_structured_output(const api::StructuredOutput& structured);

// tool_choice "required" (one call, or several with parallel_tool_calls) or a named
// function (exactly that call), over the request's tools. req.forced_tool_calls() must hold.
GrammarResult compile_tool_calls(const api::ChatRequest& req, ToolCallSyntax syntax);

// Process-wide counters for /metrics (cumulative). Compile seconds are kept per bucket of
// kCompileBucketBounds (upper bounds in seconds; the last bucket is +Inf).
struct GrammarCompileCounters {
  static constexpr double kCompileBucketBounds[] = {1e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 0.1, 0.5, 2.0};
  static constexpr size_t kCompileBuckets = std::size(kCompileBucketBounds) + 1;
  uint64_t compiles = 0;           // compiles that ran (cache misses), successful or not
  double compile_seconds = 0;
  uint64_t compile_bucket[kCompileBuckets] = {};
  uint64_t cache_hits = 0;
  uint64_t cache_misses = 0;
  uint64_t compile_errors = 0;     // 400s from compiling
};
GrammarCompileCounters grammar_compile_counters();

}  // namespace spillway::server
