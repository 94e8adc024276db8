#include "grammar/compile_cache.h"

#include "grammar/gbnf.h"
#include "grammar/regex.h"

namespace spillway::grammar {

CompileResult compile_spec(const GrammarSpec& spec, const CompileLimits& limits) {
  Result<Grammar> g = Error{"unknown grammar kind"};
  SchemaIssue issue;
  switch (spec.kind) {
    case GrammarSpec::Kind::kJsonObject: g = json_object_grammar(); break;
    case GrammarSpec::Kind::kJsonSchema: {
      auto parsed = nlohmann::ordered_json::parse(spec.text, nullptr, false);
      if (parsed.is_discarded()) return CompileError{"the JSON schema is not valid JSON", {}};
      g = json_schema_grammar(parsed, spec.json, &issue);
      break;
    }
    case GrammarSpec::Kind::kRegex: g = regex_grammar(spec.text); break;
    case GrammarSpec::Kind::kChoice: g = choice_grammar(spec.choices); break;
    case GrammarSpec::Kind::kGbnf: g = gbnf_grammar(spec.text); break;
  }
  if (!g) return CompileError{g.error().message, issue};
  if (spec.wrap) {
    if (spec.min_items < 1 || spec.max_items < spec.min_items) return CompileError{"invalid repetition bounds", {}};
    Grammar& gr = *g;
    const RuleId inner = gr.root();
    const ExprId item = gr.seq({gr.literal(spec.prefix), gr.call(inner), gr.literal(spec.suffix)});
    const uint32_t more_max = spec.max_items == kUnbounded ? kUnbounded : spec.max_items - 1;
    const ExprId more = gr.repeat(gr.seq({gr.literal(spec.separator), item}), spec.min_items - 1, more_max);
    gr.set_root(gr.add_rule("wrapped", gr.seq({item, more})));
  }
  auto c = CompiledGrammar::compile(*g, limits);
  if (!c) return CompileError{c.error().message, {}};
  return *c;
}

std::string CompileCache::key_of(const GrammarSpec& spec) {
  std::string key = std::to_string(static_cast<int>(spec.kind)) + (spec.json.strict ? "s" : "-") +
                    (spec.json.sorted_properties ? "o" : "-") + (spec.json.draft7 ? "7" : "-") + '\n';
  if (spec.kind == GrammarSpec::Kind::kJsonSchema) {
    auto parsed = nlohmann::ordered_json::parse(spec.text, nullptr, false);
    key += parsed.is_discarded() ? spec.text : parsed.dump();  // whitespace-insensitive
  } else {
    key += spec.text;
  }
  for (const auto& c : spec.choices) key += '\0' + c;
  if (spec.wrap) {
    key += std::string("\0wrap\0", 6) + spec.prefix + '\0' + spec.suffix + '\0' + spec.separator + '\0' +
           std::to_string(spec.min_items) + ',' + std::to_string(spec.max_items);
  }
  return key;
}

CompileResult CompileCache::get(const GrammarSpec& spec) {
  const std::string key = key_of(spec);
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = index_.find(key);
    if (it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      ++hits_;
      return it->second->second;
    }
    ++misses_;
  }
  CompileResult r = compile_spec(spec, limits_);
  if (auto* g = std::get_if<std::shared_ptr<const CompiledGrammar>>(&r)) {
    std::lock_guard<std::mutex> l(mu_);
    if (!index_.count(key)) {
      lru_.emplace_front(key, *g);
      index_[key] = lru_.begin();
      while (lru_.size() > capacity_) {
        index_.erase(lru_.back().first);
        lru_.pop_back();
      }
    }
  }
  return r;
}

}  // namespace spillway::grammar
