// Helpers shared by the grammar tests.
#pragma once

#include <memory>
#include <string>

#include "grammar/fsm.h"
#include "grammar/matcher.h"

namespace spillway::grammar::testing {

// Whether the compiled grammar accepts exactly `text` (byte-level, no tokenizer).
inline bool accepts(const std::shared_ptr<const CompiledGrammar>& g, const std::string& text) {
  Matcher m(g, nullptr);
  return m.accept_bytes(text) && m.is_accepting();
}

inline CompileLimits test_limits() {
  CompileLimits l;
  l.max_seconds = 1e9;
  return l;
}

inline std::shared_ptr<const CompiledGrammar> must_compile(const Result<Grammar>& g) {
  if (!g.ok()) throw std::runtime_error(g.error().message);
  // No wall-clock cap in tests (the machine may be loaded); the state caps still apply.
  auto c = CompiledGrammar::compile(*g, test_limits());
  if (!c.ok()) throw std::runtime_error(c.error().message);
  return *c;
}

}  // namespace spillway::grammar::testing
