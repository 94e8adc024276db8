// From chat messages to prompt tokens: the model's chat template (GGUF
// tokenizer.chat_template), or a built-in one for its family when it has none or ours
// cannot parse or render it; then tokenization with special tokens parsed and BOS added
// only when the tokenizer wants it and the rendered text did not produce it.
//
// Thread contract: immutable after create(); render/tokenize are const and thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/chat_template.h"
#include "common/result.h"
#include "engine/format/model_source.h"
#include "engine/tokenizer/tokenizer.h"

namespace spillway::server {

// Prompt text to ids: parse_special = true; BOS as described above when add_special.
std::vector<int32_t> tokenize_prompt(const engine::Tokenizer& tokenizer, std::string_view text,
                                     bool add_special);

// The built-in template family for a model without a usable template: from marker tokens
// in its vocabulary, else its architecture ("chatml" when nothing else fits).
std::string guess_template_family(const engine::Tokenizer& tokenizer, std::string_view architecture);

class ChatPrompt {
 public:
  // Logs which template is used and why a model's own was rejected.
  static Result<std::unique_ptr<ChatPrompt>> create(const engine::Metadata& metadata,
                                                    const engine::Tokenizer& tokenizer,
                                                    std::string_view architecture);

  // messages in template form (api/chat_messages.h); tools and kwargs may be null.
  Result<std::string> render(const nlohmann::ordered_json& messages,
                             const nlohmann::ordered_json& tools, bool add_generation_prompt,
                             const nlohmann::ordered_json& kwargs) const;

  // "model" or "builtin:<family>".
  const std::string& origin() const { return origin_; }

 private:
  ChatPrompt(api::ChatTemplate tmpl, std::string origin, const engine::Tokenizer& tokenizer);
  api::ChatTemplate template_;
  std::string origin_;
  std::optional<std::string> bos_text_;
  std::optional<std::string> eos_text_;
};

}  // namespace spillway::server
