// Response bodies compared with JSON literals in the shapes OpenAI documents
// (platform.openai.com/docs/api-reference/chat/object, .../chat-streaming, .../completions).
#include <gtest/gtest.h>

#include "api/api_error.h"
#include "api/responses.h"
#include "api/sse.h"

namespace spillway::api {
namespace {

using json = nlohmann::ordered_json;

const ResponseMeta kMeta{"chatcmpl-123", 1677652288, "stories260K"};

TEST(OpenAiResponses, ChatCompletion) {
  ChatChoice choice;
  choice.content = "Hello there, how may I assist you today?";
  const Usage usage{9, 12, 0};
  EXPECT_EQ(render_chat_completion(kMeta, {&choice, 1}, usage), json::parse(R"({
    "id": "chatcmpl-123", "object": "chat.completion", "created": 1677652288,
    "model": "stories260K",
    "choices": [{"index": 0,
                 "message": {"role": "assistant",
                             "content": "Hello there, how may I assist you today?",
                             "refusal": null},
                 "logprobs": null, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 9, "completion_tokens": 12, "total_tokens": 21,
              "prompt_tokens_details": {"cached_tokens": 0}}})"));
}

TEST(OpenAiResponses, ChatCompletionWithToolCallsHasNullContent) {
  ChatChoice choice;
  choice.finish_reason = FinishReason::ToolCalls;
  choice.tool_calls.push_back({"call_abc", "get_current_weather", R"({"location":"Boston, MA"})"});
  const Usage usage{82, 17, 64};
  EXPECT_EQ(render_chat_completion(kMeta, {&choice, 1}, usage), json::parse(R"({
    "id": "chatcmpl-123", "object": "chat.completion", "created": 1677652288,
    "model": "stories260K",
    "choices": [{"index": 0,
                 "message": {"role": "assistant", "content": null, "refusal": null,
                             "tool_calls": [{"id": "call_abc", "type": "function",
                                             "function": {"name": "get_current_weather",
                                                          "arguments": "{\"location\":\"Boston, MA\"}"}}]},
                 "logprobs": null, "finish_reason": "tool_calls"}],
    "usage": {"prompt_tokens": 82, "completion_tokens": 17, "total_tokens": 99,
              "prompt_tokens_details": {"cached_tokens": 64}}})"));
}

TEST(OpenAiResponses, ChatChunks) {
  ChatDelta first;
  first.first = true;
  EXPECT_EQ(render_chat_chunk(kMeta, {&first, 1}, false), json::parse(R"({
    "id": "chatcmpl-123", "object": "chat.completion.chunk", "created": 1677652288,
    "model": "stories260K",
    "choices": [{"index": 0, "delta": {"role": "assistant", "content": "", "refusal": null},
                 "logprobs": null, "finish_reason": null}]})"));

  ChatDelta middle;
  middle.content = "Hello";
  EXPECT_EQ(render_chat_chunk(kMeta, {&middle, 1}, true), json::parse(R"({
    "id": "chatcmpl-123", "object": "chat.completion.chunk", "created": 1677652288,
    "model": "stories260K",
    "choices": [{"index": 0, "delta": {"content": "Hello"}, "logprobs": null,
                 "finish_reason": null}],
    "usage": null})"));

  ChatDelta last;
  last.index = 1;
  last.finish_reason = FinishReason::Length;
  EXPECT_EQ(render_chat_chunk(kMeta, {&last, 1}, false)["choices"], json::parse(R"([
    {"index": 1, "delta": {}, "logprobs": null, "finish_reason": "length"}])"));

  EXPECT_EQ(render_chat_usage_chunk(kMeta, {5, 3, 2}), json::parse(R"({
    "id": "chatcmpl-123", "object": "chat.completion.chunk", "created": 1677652288,
    "model": "stories260K", "choices": [],
    "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8,
              "prompt_tokens_details": {"cached_tokens": 2}}})"));
}

TEST(OpenAiResponses, ChatChunkToolCallsCarryTheirIndex) {
  ChatDelta d;
  d.tool_calls = {{"call_1", "f", "{}"}, {"call_2", "g", R"({"a":1})"}};
  d.finish_reason = FinishReason::ToolCalls;
  EXPECT_EQ(render_chat_chunk(kMeta, {&d, 1}, false)["choices"][0], json::parse(R"({
    "index": 0,
    "delta": {"tool_calls": [
      {"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
      {"index": 1, "id": "call_2", "type": "function", "function": {"name": "g", "arguments": "{\"a\":1}"}}]},
    "logprobs": null, "finish_reason": "tool_calls"})"));
}

TEST(OpenAiResponses, TextCompletion) {
  const ResponseMeta meta{"cmpl-uqkvl", 1589478378, "m"};
  CompletionChoice c;
  c.text = "\n\nThis is indeed a test";
  c.finish_reason = FinishReason::Length;
  EXPECT_EQ(render_completion(meta, {&c, 1}, {5, 7, 0}), json::parse(R"({
    "id": "cmpl-uqkvl", "object": "text_completion", "created": 1589478378, "model": "m",
    "choices": [{"text": "\n\nThis is indeed a test", "index": 0, "logprobs": null,
                 "finish_reason": "length"}],
    "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12,
              "prompt_tokens_details": {"cached_tokens": 0}}})"));

  CompletionChoice chunk;
  chunk.text = "This";
  EXPECT_EQ(render_completion_chunk(meta, {&chunk, 1}, false), json::parse(R"({
    "id": "cmpl-uqkvl", "object": "text_completion", "created": 1589478378, "model": "m",
    "choices": [{"text": "This", "index": 0, "logprobs": null, "finish_reason": null}]})"));
  EXPECT_EQ(render_completion_usage_chunk(meta, {1, 2, 0})["choices"], json::array());
}

TEST(OpenAiResponses, InvalidUtf8IsReplacedNotThrown) {
  ChatChoice choice;
  choice.content = "caf\xC3";  // a cut multi-byte sequence
  json j = render_chat_completion(kMeta, {&choice, 1}, {});
  EXPECT_EQ(j["choices"][0]["message"]["content"], "caf\xEF\xBF\xBD");
  EXPECT_NO_THROW(dump_json(j));
}

TEST(OpenAiResponses, Models) {
  const ModelCard card{"org/model-7b", 1700000000, "spillway", 0};
  EXPECT_EQ(render_model_list({&card, 1}), json::parse(R"({"object": "list", "data": [
    {"id": "org/model-7b", "object": "model", "created": 1700000000, "owned_by": "spillway"}]})"));
}

TEST(OpenAiErrors, OneBodyShapeForEveryError) {
  EXPECT_EQ(error_body(invalid_value("temperature", "bad")), json::parse(R"({"error": {
    "message": "bad", "type": "invalid_request_error", "param": "temperature",
    "code": "invalid_value"}})"));
  const ApiError auth = invalid_api_key();
  EXPECT_EQ(auth.status, 401);
  EXPECT_EQ(error_body(auth)["error"]["type"], "authentication_error");
  EXPECT_EQ(error_body(auth)["error"]["code"], "invalid_api_key");
  const ApiError missing = model_not_found("gpt-9");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(error_body(missing), json::parse(R"({"error": {
    "message": "The model `gpt-9` does not exist.", "type": "invalid_request_error",
    "param": "model", "code": "model_not_found"}})"));
  EXPECT_EQ(payload_too_large(16).status, 413);
  EXPECT_EQ(error_body(payload_too_large(16))["error"]["type"], "invalid_request_error");
  const ApiError busy = overloaded("queue full", 1);
  EXPECT_EQ(busy.status, 429);
  EXPECT_EQ(busy.type, "server_error");
  EXPECT_EQ(busy.retry_after_seconds, 1);
  EXPECT_EQ(unavailable("loading", 5).status, 503);
  EXPECT_EQ(internal_error("bug").status, 500);
  EXPECT_TRUE(error_body(invalid_json("x"))["error"]["param"].is_null());
}

TEST(OpenAiSse, Framing) {
  EXPECT_EQ(sse_event(json::parse(R"({"a":1})")), "data: {\"a\":1}\n\n");
  EXPECT_EQ(sse_done(), "data: [DONE]\n\n");
  EXPECT_EQ(sse_comment("keepalive"), ": keepalive\n\n");
  EXPECT_EQ(sse_event(json("line1\nline2")), "data: \"line1\\nline2\"\n\n")
      << "JSON never spans lines";
}

}  // namespace
}  // namespace spillway::api
