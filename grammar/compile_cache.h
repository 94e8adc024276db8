// GrammarSpec -> CompiledGrammar, with an LRU cache keyed by the spec's canonical text
// (hashed; the full key is compared on a hit). Thread-safe: one mutex around the map;
// compiles run outside the lock (two threads may compile the same spec once each).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "common/result.h"
#include "grammar/fsm.h"
#include "grammar/json_schema.h"

namespace spillway::grammar {

struct GrammarSpec {
  enum class Kind { kJsonSchema, kJsonObject, kRegex, kChoice, kGbnf };
  Kind kind = Kind::kJsonObject;
  std::string text;                  // schema JSON text, regex or GBNF
  std::vector<std::string> choices;  // kChoice
  JsonSchemaOptions json;            // kJsonSchema
  // Repetition wrapper (forced tool calls): when set, the language becomes
  //   prefix G suffix (separator prefix G suffix){min_items - 1, max_items - 1}
  // around the front end's grammar G (max_items == kUnbounded: no upper bound).
  bool wrap = false;
  std::string prefix = {}, suffix = {}, separator = {};
  uint32_t min_items = 1, max_items = 1;
};

// An error from compiling a spec: what the API turns into a 400. For JSON Schema,
// `issue` names the keyword and its JSON pointer.
struct CompileError {
  std::string message;
  SchemaIssue issue;
};

using CompileResult = std::variant<std::shared_ptr<const CompiledGrammar>, CompileError>;

// Compiles without caching.
CompileResult compile_spec(const GrammarSpec& spec, const CompileLimits& limits = {});

class CompileCache {
 public:
  explicit CompileCache(size_t capacity = 256, CompileLimits limits = {}) : capacity_(capacity), limits_(limits) {}
  CompileResult get(const GrammarSpec& spec);
  uint64_t hits() const { std::lock_guard<std::mutex> l(mu_); return hits_; }
  uint64_t misses() const { std::lock_guard<std::mutex> l(mu_); return misses_; }

  static std::string key_of(const GrammarSpec& spec);

 private:
  using Entry = std::pair<std::string, std::shared_ptr<const CompiledGrammar>>;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // front = most recent
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  size_t capacity_;
  CompileLimits limits_;
  uint64_t hits_ = 0, misses_ = 0;
};

}  // namespace spillway::grammar
