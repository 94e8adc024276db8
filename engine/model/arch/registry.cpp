// Every supported family, one line each; the families themselves live in their own files.
#include <array>

#include "engine/model/arch/architecture.h"

namespace spillway::engine {

namespace {

const std::array<const Architecture*, 10>& registry() {
  static const std::array<const Architecture*, 10> all = {
      &llama_architecture(),
      &qwen2_architecture(),
      &qwen3_architecture(),
      &qwen3moe_architecture(),
      &qwen35_architecture(),
      &qwen35moe_architecture(),
      &qwen3next_architecture(),
      &llada_architecture(),
      &dream_architecture(),
      &llada_moe_architecture(),
  };
  return all;
}

}  // namespace

const Architecture* find_architecture(std::string_view name) {
  for (const Architecture* a : registry()) {
    if (a->name == name) return a;
  }
  return nullptr;
}

std::string supported_architectures() {
  std::string out;
  for (const Architecture* a : registry()) {
    if (!out.empty()) out += ", ";
    out += a->name;
  }
  return out;
}

}  // namespace spillway::engine
