#include "server/chat_prompt.h"

#include <algorithm>

#include "server/observability/logging.h"

namespace spillway::server {

namespace {

using json = nlohmann::ordered_json;

api::ChatTemplateInputs inputs_for(const json& messages, const json& tools, bool add_generation_prompt,
                                   const json& kwargs, const std::optional<std::string>& bos,
                                   const std::optional<std::string>& eos) {
  api::ChatTemplateInputs in;
  in.messages = messages;
  in.tools = tools;
  in.add_generation_prompt = add_generation_prompt;
  in.bos_token = bos;
  in.eos_token = eos;
  in.extra = kwargs;
  return in;
}

// A conversation every family's template accepts (no system message: Gemma refuses it;
// alternating roles: Mistral insists).
const json& test_conversation() {
  static const json conversation = json::parse(R"([
    {"role": "user", "content": "Hello!"},
    {"role": "assistant", "content": "Hi! How can I help?"},
    {"role": "user", "content": "Tell me a story."}])");
  return conversation;
}

Status check_renders(const api::ChatTemplate& tmpl, const std::optional<std::string>& bos,
                     const std::optional<std::string>& eos) {
  Result<std::string> out =
      tmpl.render(inputs_for(test_conversation(), nullptr, true, nullptr, bos, eos));
  if (!out) return out.error();
  if (out->find("Tell me a story.") == std::string::npos) {
    return Error{"the rendered test conversation does not contain its last message"};
  }
  return {};
}

std::optional<std::string> special_text(const engine::Tokenizer& tokenizer, int32_t id) {
  if (id < 0 || id >= tokenizer.n_vocab()) return std::nullopt;
  return tokenizer.token_text(id);
}

}  // namespace

std::vector<int32_t> tokenize_prompt(const engine::Tokenizer& tokenizer, std::string_view text,
                                     bool add_special) {
  std::vector<int32_t> ids = tokenizer.encode(text, /*add_special=*/false, /*parse_special=*/true);
  const int32_t bos = tokenizer.bos_id();
  if (add_special && tokenizer.add_bos() && bos >= 0 && (ids.empty() || ids.front() != bos)) {
    ids.insert(ids.begin(), bos);
  }
  return ids;
}

std::string guess_template_family(const engine::Tokenizer& tokenizer, std::string_view architecture) {
  auto has = [&](std::string_view text) { return tokenizer.find_token(text).has_value(); };
  if (has("<|im_start|>")) return "chatml";
  if (has("<|start_header_id|>")) return "llama3";
  if (has("<start_of_turn>")) return "gemma";
  if (has("<|user|>") && has("<|end|>")) return "phi3";
  if (has("[INST]")) return "mistral";
  if (architecture == "gemma" || architecture == "gemma2" || architecture == "gemma3") return "gemma";
  if (architecture == "phi3") return "phi3";
  return "chatml";
}

ChatPrompt::ChatPrompt(api::ChatTemplate tmpl, std::string origin, const engine::Tokenizer& tokenizer)
    : template_(std::move(tmpl)),
      origin_(std::move(origin)),
      bos_text_(special_text(tokenizer, tokenizer.bos_id())),
      eos_text_(special_text(tokenizer, tokenizer.eos_id())) {}

Result<std::unique_ptr<ChatPrompt>> ChatPrompt::create(const engine::Metadata& metadata,
                                                       const engine::Tokenizer& tokenizer,
                                                       std::string_view architecture) {
  const std::optional<std::string> bos = special_text(tokenizer, tokenizer.bos_id());
  const std::optional<std::string> eos = special_text(tokenizer, tokenizer.eos_id());
  Result<std::optional<std::string>> source = metadata.get_string("tokenizer.chat_template");
  std::string reason;
  if (!source) {
    reason = source.error().message;
  } else if (!source->has_value()) {
    reason = "the model has no tokenizer.chat_template";
  } else {
    Result<api::ChatTemplate> parsed = api::ChatTemplate::parse(**source);
    if (!parsed) {
      reason = "its chat template does not parse: " + parsed.error().message;
    } else if (Status st = check_renders(*parsed, bos, eos); !st) {
      reason = "its chat template fails on a test conversation: " + st.error().message;
    } else {
      log_info("chat template", {{"origin", "model"}});
      return std::unique_ptr<ChatPrompt>(new ChatPrompt(std::move(*parsed), "model", tokenizer));
    }
  }
  const std::string family = guess_template_family(tokenizer, architecture);
  std::optional<std::string> builtin = api::builtin_chat_template(family);
  if (!builtin) return Error{"no built-in chat template for family '" + family + "'"};
  Result<api::ChatTemplate> parsed = api::ChatTemplate::parse(*builtin);
  if (!parsed) {
    return Error{"the built-in '" + family + "' chat template does not parse: " + parsed.error().message};
  }
  log_warn("using a built-in chat template", {{"family", family}, {"reason", reason}});
  return std::unique_ptr<ChatPrompt>(
      new ChatPrompt(std::move(*parsed), "builtin:" + family, tokenizer));
}

Result<std::string> ChatPrompt::render(const json& messages, const json& tools,
                                       bool add_generation_prompt, const json& kwargs) const {
  Result<std::string> out = template_.render(
      inputs_for(messages, tools, add_generation_prompt, kwargs, bos_text_, eos_text_));
  if (out.ok()) return out;
  // An assistant message with only tool calls has content null, as transformers passes it
  // (templates such as DeepSeek's test `content is none`). Templates that concatenate the
  // content unconditionally (plain chatml, the built-in fallbacks) fail on it: retry those
  // with "" in its place.
  const auto null_content = [](const json& m) {
    return m.is_object() && m.contains("content") && m["content"].is_null();
  };
  if (std::none_of(messages.begin(), messages.end(), null_content)) return out;
  json patched = messages;  // copied only when there is something to patch
  for (json& m : patched) {
    if (null_content(m)) m["content"] = "";
  }
  Result<std::string> retry = template_.render(
      inputs_for(patched, tools, add_generation_prompt, kwargs, bos_text_, eos_text_));
  return retry.ok() ? std::move(retry) : std::move(out);
}

}  // namespace spillway::server
