#include "api/chat_template.h"

#include <ctime>
#include <exception>

#include "jinja/interp.h"
#include "jinja/parser.h"

namespace spillway::api {

struct ChatTemplate::Program {
  std::string source;
  jinja::Program ast;
};

namespace {

// transformers' strftime_now: the current local time.
std::string local_strftime(std::string_view format) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  const std::string fmt(format);
  if (fmt.empty()) return {};
  for (size_t size = 256; size <= 65536; size *= 4) {
    std::string buf(size, '\0');
    const size_t n = std::strftime(buf.data(), buf.size(), fmt.c_str(), &tm);
    if (n > 0) {
      buf.resize(n);
      return buf;
    }
  }
  return {};
}

}  // namespace

ChatTemplate::ChatTemplate(std::unique_ptr<const Program> program) : program_(std::move(program)) {}
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;
ChatTemplate::~ChatTemplate() = default;

const std::string& ChatTemplate::source() const { return program_->source; }

Result<ChatTemplate> ChatTemplate::parse(std::string source) {
  try {
    auto ast = jinja::parse_template(source);
    if (!ast.ok()) return Error{"chat template " + ast.error().message};
    auto program = std::make_unique<Program>();
    program->source = std::move(source);
    program->ast = std::move(ast).value();
    return ChatTemplate(std::move(program));
  } catch (const std::exception& e) {
    return Error{std::string("chat template could not be parsed: ") + e.what()};
  }
}

Result<std::string> ChatTemplate::render(const ChatTemplateInputs& inputs) const {
  return render(inputs, jinja::RenderLimits{});
}

Result<std::string> ChatTemplate::render(const ChatTemplateInputs& inputs,
                                         const jinja::RenderLimits& limits) const {
  try {
    using jinja::Value;
    std::vector<std::pair<std::string, Value>> vars;
    if (!inputs.messages.is_array()) return Error{"chat template input 'messages' must be a list"};
    auto messages = jinja::from_json(inputs.messages);
    if (!messages.ok()) return Error{"chat template input 'messages': " + messages.error().message};
    auto tools = jinja::from_json(inputs.tools);
    if (!tools.ok()) return Error{"chat template input 'tools': " + tools.error().message};
    if (!inputs.extra.is_null() && !inputs.extra.is_object()) {
      return Error{"chat template kwargs must be an object"};
    }
    if (inputs.bos_token) vars.emplace_back("bos_token", Value::string(*inputs.bos_token));
    if (inputs.eos_token) vars.emplace_back("eos_token", Value::string(*inputs.eos_token));
    if (inputs.extra.is_object()) {
      for (auto it = inputs.extra.begin(); it != inputs.extra.end(); ++it) {
        const std::string& key = it.key();
        if (key == "messages" || key == "tools" || key == "documents" || key == "add_generation_prompt") {
          return Error{"chat template kwargs may not set '" + key + "'"};
        }
        auto v = jinja::from_json(it.value());
        if (!v.ok()) return Error{"chat template kwarg '" + key + "': " + v.error().message};
        vars.emplace_back(key, std::move(v).value());
      }
    }
    vars.emplace_back("messages", std::move(messages).value());
    vars.emplace_back("tools", std::move(tools).value());
    vars.emplace_back("documents", Value::none());
    vars.emplace_back("add_generation_prompt", Value::boolean(inputs.add_generation_prompt));

    jinja::Interpreter::Clock clock = inputs.strftime_now;
    if (!clock) clock = local_strftime;
    jinja::Interpreter interp(program_->ast, limits, std::move(clock));
    auto out = interp.render(std::move(vars));
    if (!out.ok()) {
      if (interp.raised()) return out.error();
      return Error{"chat template error at " + out.error().message};
    }
    return out;
  } catch (const std::exception& e) {
    return Error{std::string("chat template could not be rendered: ") + e.what()};
  }
}

}  // namespace spillway::api
