#include "api/tool_calls.h"

#include <algorithm>
#include <optional>

#include "api/json_parse.h"

namespace spillway::api {

namespace {

using json = nlohmann::ordered_json;

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kMistralMarker = "[TOOL_CALLS]";
constexpr std::string_view kMistralArgs = "[ARGS]";
constexpr std::string_view kMistralCallId = "[CALL_ID]";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kMarkers[] = {kHermesOpen, kMistralMarker};

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

std::string_view ltrim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  return s;
}

size_t rtrimmed_size(std::string_view s) {
  size_t n = s.size();
  while (n > 0 && is_space(s[n - 1])) --n;
  return n;
}

// The length of the JSON object or array at the start of s (after which s may go on), or
// npos when it does not close.
size_t json_value_length(std::string_view s) {
  if (s.empty() || (s[0] != '{' && s[0] != '[')) return std::string_view::npos;
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

std::optional<json> parse_json(std::string_view s) { return parse_json_linear(s); }

// Arguments as a JSON text of an object: an object, a JSON string holding one, or absent.
std::optional<std::string> arguments_text(const json* args) {
  if (!args || args->is_null()) return std::string("{}");
  if (args->is_object()) return args->dump(-1, ' ', false, json::error_handler_t::replace);
  if (args->is_string()) {
    std::optional<json> inner = parse_json(args->get_ref<const std::string&>());
    if (inner && inner->is_object()) return inner->dump(-1, ' ', false, json::error_handler_t::replace);
  }
  return std::nullopt;
}

// {"name": .., "arguments"|"parameters": {..}} -> a call.
std::optional<ToolCall> call_from_object(const json& obj, bool parameters_allowed) {
  if (!obj.is_object()) return std::nullopt;
  auto name = obj.find("name");
  if (name == obj.end() || !name->is_string() || name->get_ref<const std::string&>().empty()) {
    return std::nullopt;
  }
  const json* args = nullptr;
  if (auto a = obj.find("arguments"); a != obj.end()) {
    args = &*a;
  } else if (auto p = obj.find("parameters"); parameters_allowed && p != obj.end()) {
    args = &*p;
  }
  std::optional<std::string> text = arguments_text(args);
  if (!text) return std::nullopt;
  return ToolCall{"", name->get<std::string>(), std::move(*text)};
}

std::optional<AssistantOutput> parse_hermes(std::string_view text) {
  size_t pos = text.find(kHermesOpen);
  if (pos == std::string_view::npos) return std::nullopt;
  AssistantOutput out;
  out.content.assign(text.substr(0, pos));
  while (pos != std::string_view::npos) {
    const size_t body_start = pos + kHermesOpen.size();
    size_t close = text.find(kHermesClose, body_start);
    // An unterminated last call (the model stopped at its end token) still counts.
    std::string_view body = text.substr(body_start, close == std::string_view::npos
                                                        ? std::string_view::npos
                                                        : close - body_start);
    std::optional<json> obj = parse_json(trim(body));
    if (!obj) return std::nullopt;
    std::optional<ToolCall> call = call_from_object(*obj, /*parameters_allowed=*/true);
    if (!call) return std::nullopt;
    out.tool_calls.push_back(std::move(*call));
    if (close == std::string_view::npos) break;
    const size_t after = close + kHermesClose.size();
    pos = text.find(kHermesOpen, after);
    out.content.append(text.substr(after, pos == std::string_view::npos ? std::string_view::npos
                                                                        : pos - after));
  }
  return out;
}

std::optional<AssistantOutput> parse_mistral(std::string_view text) {
  size_t pos = text.find(kMistralMarker);
  if (pos == std::string_view::npos) return std::nullopt;
  AssistantOutput out;
  out.content.assign(text.substr(0, pos));
  std::string_view rest = ltrim(text.substr(pos + kMistralMarker.size()));
  if (!rest.empty() && rest[0] == '[') {
    const size_t len = json_value_length(rest);
    if (len == std::string_view::npos) return std::nullopt;
    std::optional<json> arr = parse_json(rest.substr(0, len));
    if (!arr || !arr->is_array() || arr->empty()) return std::nullopt;
    for (const json& obj : *arr) {
      std::optional<ToolCall> call = call_from_object(obj, /*parameters_allowed=*/true);
      if (!call) return std::nullopt;
      out.tool_calls.push_back(std::move(*call));
    }
    out.content.append(rest.substr(len));
    return out;
  }
  // name[ARGS]{..} or name[CALL_ID]id[ARGS]{..}, each call after its own [TOOL_CALLS].
  while (true) {
    const size_t args_at = rest.find(kMistralArgs);
    if (args_at == std::string_view::npos) return std::nullopt;
    std::string_view name = rest.substr(0, args_at);
    if (size_t id_at = name.find(kMistralCallId); id_at != std::string_view::npos) {
      name = name.substr(0, id_at);
    }
    name = trim(name);
    if (name.empty()) return std::nullopt;
    std::string_view args = ltrim(rest.substr(args_at + kMistralArgs.size()));
    const size_t len = json_value_length(args);
    if (len == std::string_view::npos) return std::nullopt;
    std::optional<json> obj = parse_json(args.substr(0, len));
    if (!obj || !obj->is_object()) return std::nullopt;
    out.tool_calls.push_back({"", std::string(name), *arguments_text(&*obj)});
    rest = ltrim(args.substr(len));
    if (rest.substr(0, kMistralMarker.size()) != kMistralMarker) break;
    rest = ltrim(rest.substr(kMistralMarker.size()));
  }
  out.content.append(rest);
  return out;
}

std::optional<AssistantOutput> parse_llama_json(std::string_view text,
                                                std::span<const std::string> tool_names) {
  std::string_view rest = ltrim(text);
  if (rest.substr(0, kPythonTag.size()) == kPythonTag) rest = ltrim(rest.substr(kPythonTag.size()));
  if (rest.empty() || (rest[0] != '{' && rest[0] != '[')) return std::nullopt;
  AssistantOutput out;
  auto add = [&](const json& obj) {
    std::optional<ToolCall> call = call_from_object(obj, /*parameters_allowed=*/true);
    if (!call) return false;
    if (std::find(tool_names.begin(), tool_names.end(), call->name) == tool_names.end()) {
      return false;
    }
    out.tool_calls.push_back(std::move(*call));
    return true;
  };
  while (!rest.empty()) {
    const size_t len = json_value_length(rest);
    if (len == std::string_view::npos) return std::nullopt;
    std::optional<json> value = parse_json(rest.substr(0, len));
    if (!value) return std::nullopt;
    if (value->is_array()) {
      if (value->empty()) return std::nullopt;
      for (const json& obj : *value) {
        if (!add(obj)) return std::nullopt;
      }
    } else if (!add(*value)) {
      return std::nullopt;
    }
    rest = ltrim(rest.substr(len));
    if (!rest.empty() && rest[0] == ';') rest = ltrim(rest.substr(1));
  }
  return out;
}

// The length of the longest proper prefix of a marker that text ends with.
size_t partial_marker_suffix(std::string_view text) {
  size_t best = 0;
  for (std::string_view marker : kMarkers) {
    for (size_t k = std::min(marker.size() - 1, text.size()); k > best; --k) {
      if (text.substr(text.size() - k) == marker.substr(0, k)) {
        best = k;
        break;
      }
    }
  }
  return best;
}

}  // namespace

AssistantOutput parse_tool_calls(std::string_view text, std::span<const std::string> tool_names) {
  std::optional<AssistantOutput> parsed = parse_hermes(text);
  if (!parsed) parsed = parse_mistral(text);
  if (!parsed) parsed = parse_llama_json(text, tool_names);
  if (!parsed || parsed->tool_calls.empty()) return {std::string(text), {}};
  parsed->content.resize(rtrimmed_size(parsed->content));
  return std::move(*parsed);
}

ToolCallStreamFilter::ToolCallStreamFilter(std::vector<std::string> tool_names)
    : tool_names_(std::move(tool_names)) {}

std::string ToolCallStreamFilter::push(std::string_view piece) {
  text_.append(piece);
  if (capturing_) return {};
  const std::string_view text(text_);
  size_t marker_at = std::string_view::npos;
  for (std::string_view marker : kMarkers) marker_at = std::min(marker_at, text.find(marker, emitted_));
  if (marker_at != std::string_view::npos) {
    capturing_ = true;
    const size_t end = std::max(emitted_, rtrimmed_size(text.substr(0, marker_at)));
    std::string out(text.substr(emitted_, end - emitted_));
    emitted_ = end;
    return out;
  }
  if (emitted_ == 0) {
    // Output that may turn out to be a Llama JSON call is held until the end.
    const std::string_view start = ltrim(text);
    if (start.empty() || start[0] == '{' || start[0] == '[' ||
        start.substr(0, kPythonTag.size()) == kPythonTag.substr(0, start.size())) {
      return {};
    }
  }
  const size_t held = partial_marker_suffix(text.substr(emitted_));
  const size_t end = std::max(emitted_, rtrimmed_size(text.substr(0, text.size() - held)));
  std::string out(text.substr(emitted_, end - emitted_));
  emitted_ = end;
  return out;
}

AssistantOutput ToolCallStreamFilter::finish() {
  AssistantOutput full = parse_tool_calls(text_, tool_names_);
  if (full.tool_calls.empty()) return {text_.substr(emitted_), {}};
  const std::string_view sent(text_.data(), emitted_);
  std::string rest;
  if (std::string_view(full.content).substr(0, sent.size()) == sent) {
    rest = full.content.substr(sent.size());
  }
  return {std::move(rest), std::move(full.tool_calls)};
}

json render_tool_calls(std::span<const ToolCall> calls) {
  json out = json::array();
  for (const ToolCall& c : calls) {
    json call;
    call["id"] = c.id;
    call["type"] = "function";
    call["function"] = {{"name", c.name}, {"arguments", c.arguments}};
    out.push_back(std::move(call));
  }
  return out;
}

}  // namespace spillway::api
