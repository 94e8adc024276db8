// Chat templates: a model's Jinja2 template (GGUF tokenizer.chat_template or
// tokenizer_config.json "chat_template") rendered the way Hugging Face transformers'
// apply_chat_template renders it (jinja2 with trim_blocks and lstrip_blocks, loopcontrols,
// a json.dumps-style tojson, raise_exception, strftime_now), by a Jinja2-subset
// interpreter of our own (api/jinja_*.cpp).
//
// Untrusted input: a template is text from a model file. Parsing and rendering return
// errors as values; rendering is bounded (recursion depth, loop iterations, output size).
// Thread contract: a parsed ChatTemplate is immutable; render() is const and may run on
// many threads at once.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace spillway::jinja {
struct RenderLimits;
}

namespace spillway::api {

struct ChatTemplateInputs {
  // OpenAI-style messages. tool_calls[].function.arguments must already be an object (the
  // wire format's JSON string parsed), as transformers passes them.
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  // The tools list, or null (null is *defined* in the template, as in transformers).
  nlohmann::ordered_json tools = nullptr;
  bool add_generation_prompt = true;
  // Undefined in the template when not set (not the empty string).
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
  // Extra variables (chat_template_kwargs, e.g. enable_thinking); an object or null.
  nlohmann::ordered_json extra = nullptr;
  // strftime_now(format) inside the template; null: the current local time.
  std::function<std::string(std::string_view format)> strftime_now;
};

class ChatTemplate {
 public:
  // Parses the template source; a syntax error names the line and what was expected.
  static Result<ChatTemplate> parse(std::string source);

  // Renders the prompt. raise_exception("msg") in the template becomes Error{"msg"}; other
  // failures read "chat template error at line N: ..." (jinja2's message where there is one).
  Result<std::string> render(const ChatTemplateInputs& inputs) const;
  // The same under other bounds than the interpreter's defaults (sized for < 1 s); the fuzz
  // target renders with smaller ones, because instrumentation slows the interpreter ~15x.
  Result<std::string> render(const ChatTemplateInputs& inputs, const jinja::RenderLimits& limits) const;

  const std::string& source() const;

  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;
  ~ChatTemplate();

 private:
  struct Program;  // the parsed template (api/jinja_*.h)
  explicit ChatTemplate(std::unique_ptr<const Program> program);
  std::unique_ptr<const Program> program_;
};

// A built-in template for models that ship none, chosen by family: "chatml" (Qwen and
// most others), "llama3", "llama2", "mistral", "gemma", "phi3". nullopt for an unknown name.
std::optional<std::string> builtin_chat_template(std::string_view family);

}  // namespace spillway::api
