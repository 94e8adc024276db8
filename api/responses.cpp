#include "api/responses.h"

#include "api/text_encoding.h"

namespace spillway::api {

namespace {

using json = nlohmann::ordered_json;

json head(const ResponseMeta& meta, const char* object) {
  json j;
  j["id"] = meta.id;
  j["object"] = object;
  j["created"] = meta.created;
  j["model"] = meta.model;
  return j;
}

json tool_call_deltas(std::span<const ToolCall> calls, int32_t first_index) {
  json out = render_tool_calls(calls);
  for (size_t i = 0; i < out.size(); ++i) {
    json entry;
    entry["index"] = first_index + static_cast<int32_t>(i);
    for (auto& [k, v] : out[i].items()) entry[k] = v;
    out[i] = std::move(entry);
  }
  return out;
}

}  // namespace

const char* finish_reason_text(FinishReason reason) {
  switch (reason) {
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::ToolCalls: return "tool_calls";
  }
  return "stop";
}

json render_usage(const Usage& usage) {
  json j;
  j["prompt_tokens"] = usage.prompt_tokens;
  j["completion_tokens"] = usage.completion_tokens;
  j["total_tokens"] = usage.prompt_tokens + usage.completion_tokens;
  j["prompt_tokens_details"] = {{"cached_tokens", usage.cached_tokens}};
  if (usage.diffusion) {
    const DiffusionUsage& d = *usage.diffusion;
    j["diffusion"] = {{"forwards", d.forwards},
                      {"tokens_per_forward", d.forwards > 0 ? double(d.committed) / double(d.forwards) : 0.0},
                      {"rows_evaluated", d.rows_evaluated}};
  }
  return j;
}

json render_chat_completion(const ResponseMeta& meta, std::span<const ChatChoice> choices,
                            const Usage& usage) {
  json j = head(meta, "chat.completion");
  json list = json::array();
  for (const ChatChoice& c : choices) {
    json message;
    message["role"] = "assistant";
    if (c.content.empty() && !c.tool_calls.empty()) {
      message["content"] = nullptr;
    } else {
      message["content"] = valid_utf8(c.content);
    }
    message["refusal"] = nullptr;
    if (!c.tool_calls.empty()) message["tool_calls"] = render_tool_calls(c.tool_calls);
    json choice;
    choice["index"] = c.index;
    choice["message"] = std::move(message);
    choice["logprobs"] = c.logprobs;
    choice["finish_reason"] = finish_reason_text(c.finish_reason);
    list.push_back(std::move(choice));
  }
  j["choices"] = std::move(list);
  j["usage"] = render_usage(usage);
  return j;
}

json render_chat_chunk(const ResponseMeta& meta, std::span<const ChatDelta> deltas,
                       bool with_usage_field) {
  json j = head(meta, "chat.completion.chunk");
  json list = json::array();
  for (const ChatDelta& d : deltas) {
    json delta = json::object();
    if (d.first) {
      delta["role"] = "assistant";
      delta["content"] = valid_utf8(d.content.value_or(""));
      delta["refusal"] = nullptr;
    } else if (d.content) {
      delta["content"] = valid_utf8(*d.content);
    }
    if (!d.tool_calls.empty()) delta["tool_calls"] = tool_call_deltas(d.tool_calls, d.first_tool_call_index);
    json choice;
    choice["index"] = d.index;
    choice["delta"] = std::move(delta);
    choice["logprobs"] = d.logprobs;
    choice["finish_reason"] =
        d.finish_reason ? json(finish_reason_text(*d.finish_reason)) : json(nullptr);
    list.push_back(std::move(choice));
  }
  j["choices"] = std::move(list);
  if (with_usage_field) j["usage"] = nullptr;
  return j;
}

json render_chat_usage_chunk(const ResponseMeta& meta, const Usage& usage) {
  json j = head(meta, "chat.completion.chunk");
  j["choices"] = json::array();
  j["usage"] = render_usage(usage);
  return j;
}

namespace {

json completion_choices(std::span<const CompletionChoice> choices) {
  json list = json::array();
  for (const CompletionChoice& c : choices) {
    json choice;
    choice["text"] = valid_utf8(c.text);
    choice["index"] = c.index;
    choice["logprobs"] = c.logprobs;
    choice["finish_reason"] =
        c.finish_reason ? json(finish_reason_text(*c.finish_reason)) : json(nullptr);
    list.push_back(std::move(choice));
  }
  return list;
}

}  // namespace

json render_completion(const ResponseMeta& meta, std::span<const CompletionChoice> choices,
                       const Usage& usage) {
  json j = head(meta, "text_completion");
  j["choices"] = completion_choices(choices);
  j["usage"] = render_usage(usage);
  return j;
}

json render_completion_chunk(const ResponseMeta& meta, std::span<const CompletionChoice> choices,
                             bool with_usage_field) {
  json j = head(meta, "text_completion");
  j["choices"] = completion_choices(choices);
  if (with_usage_field) j["usage"] = nullptr;
  return j;
}

json render_completion_usage_chunk(const ResponseMeta& meta, const Usage& usage) {
  json j = head(meta, "text_completion");
  j["choices"] = json::array();
  j["usage"] = render_usage(usage);
  return j;
}

json render_model(const ModelCard& model) {
  json j;
  j["id"] = model.id;
  j["object"] = "model";
  j["created"] = model.created;
  j["owned_by"] = model.owned_by;
  if (model.max_model_len > 0) j["max_model_len"] = model.max_model_len;
  return j;
}

json render_model_list(std::span<const ModelCard> models) {
  json j;
  j["object"] = "list";
  json data = json::array();
  for (const ModelCard& m : models) data.push_back(render_model(m));
  j["data"] = std::move(data);
  return j;
}

}  // namespace spillway::api
