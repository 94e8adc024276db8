// The grammar compiler on arbitrary specs: JSON Schema, regex and GBNF (the first byte
// picks the kind), within the default compile limits.
#include <cstdint>
#include <string>

#include "grammar/compile_cache.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using spillway::grammar::GrammarSpec;
  if (size == 0) return 0;
  GrammarSpec spec;
  switch (data[0] % 3) {
    case 0: spec.kind = GrammarSpec::Kind::kJsonSchema; break;
    case 1: spec.kind = GrammarSpec::Kind::kRegex; break;
    default: spec.kind = GrammarSpec::Kind::kGbnf; break;
  }
  spec.text.assign(reinterpret_cast<const char*>(data + 1), size - 1);
  (void)spillway::grammar::compile_spec(spec);
  return 0;
}
