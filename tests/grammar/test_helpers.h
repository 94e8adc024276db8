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

inline std::shared_ptr<const CompiledGrammar> must_compile(const Result<Grammar>& g) {
  if (!g.ok()) throw std::runtime_error(g.error().message);
  auto c = CompiledGrammar::compile(*g);
  if (!c.ok()) throw std::runtime_error(c.error().message);
  return *c;
}

}  // namespace spillway::grammar::testing
