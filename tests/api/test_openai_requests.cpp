// Request parsing and validation of /v1/chat/completions, /v1/completions, /tokenize and
// /detokenize: accepted shapes and every 400 api/ decides, with OpenAI's param names.
#include <gtest/gtest.h>

#include <string>

#include "api/requests/chat_request.h"
#include "api/requests/completion_request.h"
#include "api/requests/tokenize_request.h"

namespace spillway::api {
namespace {

using json = nlohmann::ordered_json;

// A valid chat body with `extra` merged in (a null value removes the key).
std::string chat_body(const json& extra = json::object()) {
  json body = {{"model", "m"}, {"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}};
  for (auto& [k, v] : extra.items()) {
    if (v.is_null()) {
      body.erase(k);
    } else {
      body[k] = v;
    }
  }
  return body.dump();
}

std::string completion_body(const json& extra = json::object()) {
  json body = {{"model", "m"}, {"prompt", "Once upon a time"}};
  for (auto& [k, v] : extra.items()) body[k] = v;
  return body.dump();
}

// Expects a 400 invalid_request_error naming `param`.
void expect_400(const ApiResult<ChatRequest>& r, const std::string& param) {
  ASSERT_FALSE(r.ok()) << "expected an error for " << param;
  EXPECT_EQ(r.error().status, 400);
  EXPECT_EQ(r.error().type, "invalid_request_error");
  ASSERT_TRUE(r.error().param.has_value()) << r.error().message;
  EXPECT_EQ(*r.error().param, param) << r.error().message;
  EXPECT_FALSE(r.error().message.empty());
}

void expect_400(const ApiResult<CompletionRequest>& r, const std::string& param) {
  ASSERT_FALSE(r.ok()) << "expected an error for " << param;
  EXPECT_EQ(r.error().status, 400);
  EXPECT_EQ(r.error().type, "invalid_request_error");
  ASSERT_TRUE(r.error().param.has_value()) << r.error().message;
  EXPECT_EQ(*r.error().param, param) << r.error().message;
}

TEST(OpenAiChatRequest, MinimalRequestGetsOpenAiDefaults) {
  ApiResult<ChatRequest> r = parse_chat_request(chat_body());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->model, "m");
  EXPECT_EQ(r->messages, json::parse(R"([{"role":"user","content":"hi"}])"));
  EXPECT_DOUBLE_EQ(r->sampling.temperature, 1.0);
  EXPECT_DOUBLE_EQ(r->sampling.top_p, 1.0);
  EXPECT_EQ(r->sampling.n, 1);
  EXPECT_FALSE(r->sampling.max_tokens.has_value());
  EXPECT_FALSE(r->sampling.stream);
  EXPECT_FALSE(r->logprobs);
  EXPECT_TRUE(r->tools.is_null());
  EXPECT_FALSE(r->parse_tool_calls());
}

TEST(OpenAiChatRequest, ReadsEverySamplingField) {
  ApiResult<ChatRequest> r = parse_chat_request(chat_body(json::parse(R"({
    "temperature": 0.5, "top_p": 0.9, "top_k": 40, "min_p": 0.05, "repetition_penalty": 1.1,
    "presence_penalty": -1.5, "frequency_penalty": 2, "logit_bias": {"15": -100, "7": 3.5},
    "seed": -42, "stop": ["\n\n", "END"], "stop_token_ids": [2, 3], "max_tokens": 10,
    "max_completion_tokens": 20, "min_tokens": 5, "ignore_eos": true,
    "skip_special_tokens": false, "n": 3, "stream": true,
    "stream_options": {"include_usage": true}, "user": "u1", "logprobs": true,
    "top_logprobs": 20, "chat_template_kwargs": {"enable_thinking": false},
    "some_unknown_field": {"ignored": true}})")));
  ASSERT_TRUE(r.ok()) << r.error().message;
  const SamplingFields& s = r->sampling;
  EXPECT_DOUBLE_EQ(s.temperature, 0.5);
  EXPECT_DOUBLE_EQ(s.top_p, 0.9);
  EXPECT_EQ(s.top_k, 40);
  EXPECT_DOUBLE_EQ(s.min_p, 0.05);
  EXPECT_DOUBLE_EQ(s.repetition_penalty, 1.1);
  EXPECT_DOUBLE_EQ(s.presence_penalty, -1.5);
  EXPECT_DOUBLE_EQ(s.frequency_penalty, 2.0);
  ASSERT_EQ(s.logit_bias.size(), 2u);
  EXPECT_EQ(s.logit_bias[0], (std::pair<int32_t, float>{15, -100.0f}));
  EXPECT_EQ(s.logit_bias[1], (std::pair<int32_t, float>{7, 3.5f}));
  EXPECT_EQ(s.seed, -42);
  EXPECT_EQ(s.stop, (std::vector<std::string>{"\n\n", "END"}));
  EXPECT_EQ(s.stop_token_ids, (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(s.max_tokens, 20) << "max_completion_tokens wins over the deprecated max_tokens";
  EXPECT_EQ(s.min_tokens, 5);
  EXPECT_TRUE(s.ignore_eos);
  EXPECT_EQ(s.skip_special_tokens, false);
  EXPECT_EQ(s.n, 3);
  EXPECT_TRUE(s.stream);
  EXPECT_TRUE(s.include_usage);
  EXPECT_EQ(s.user, "u1");
  EXPECT_TRUE(r->logprobs);
  EXPECT_EQ(r->top_logprobs, 20);
  EXPECT_EQ(r->chat_template_kwargs, json::parse(R"({"enable_thinking":false})"));
}

TEST(OpenAiChatRequest, DeprecatedMaxTokensAloneIsUsed) {
  ApiResult<ChatRequest> r = parse_chat_request(chat_body({{"max_tokens", 7}}));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->sampling.max_tokens, 7);
}

TEST(OpenAiChatRequest, StopAsOneStringAndNullsAsAbsent) {
  ApiResult<ChatRequest> r = parse_chat_request(
      R"({"model":"m","messages":[{"role":"user","content":"x"}],"stop":"###",
          "temperature":null,"max_tokens":null,"stream_options":null})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->sampling.stop, std::vector<std::string>{"###"});
  EXPECT_DOUBLE_EQ(r->sampling.temperature, 1.0);
}

TEST(OpenAiChatRequest, TopKMinusOneMeansOff) {
  ApiResult<ChatRequest> r = parse_chat_request(chat_body({{"top_k", -1}}));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->sampling.top_k, 0);
}

TEST(OpenAiChatRequest, ContentPartsAreJoinedAndDeveloperBecomesSystem) {
  ApiResult<ChatRequest> r = parse_chat_request(R"({"model":"m","messages":[
      {"role":"developer","content":"be brief"},
      {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->messages, json::parse(R"([{"role":"system","content":"be brief"},
                                         {"role":"user","content":"a\nb"}])"));
}

TEST(OpenAiChatRequest, AssistantToolCallArgumentsBecomeObjects) {
  ApiResult<ChatRequest> r = parse_chat_request(R"({"model":"m","messages":[
      {"role":"user","content":"weather?"},
      {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",
        "function":{"name":"get_weather","arguments":"{\"city\":\"Paris\",\"unit\":\"C\"}"}}]},
      {"role":"tool","tool_call_id":"call_1","content":"20"}],
      "tools":[{"type":"function","function":{"name":"get_weather",
        "parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->messages[1], json::parse(R"({"role":"assistant","content":null,"tool_calls":[
      {"id":"call_1","type":"function","function":{"name":"get_weather",
       "arguments":{"city":"Paris","unit":"C"}}}]})"));
  EXPECT_EQ(r->messages[1]["tool_calls"][0]["function"]["arguments"].begin().key(), "city")
      << "argument order is kept for the template's tojson";
  EXPECT_EQ(r->messages[2], json::parse(R"({"role":"tool","content":"20","tool_call_id":"call_1"})"));
  EXPECT_EQ(r->tool_names, std::vector<std::string>{"get_weather"});
  EXPECT_TRUE(r->parse_tool_calls());
  EXPECT_EQ(r->tools[0]["function"]["name"], "get_weather");
}

TEST(OpenAiChatRequest, ToolChoiceNoneDisablesToolCallParsing) {
  ApiResult<ChatRequest> r = parse_chat_request(chat_body(json::parse(R"({"tool_choice":"none",
      "tools":[{"type":"function","function":{"name":"f"}}]})")));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->parse_tool_calls());
}

TEST(OpenAiChatRequest, ResponseFormatTextIsAccepted) {
  EXPECT_TRUE(parse_chat_request(chat_body({{"response_format", {{"type", "text"}}}})).ok());
}

TEST(OpenAiChatRequest, BadJsonIs400WithoutParam) {
  for (std::string body : {"{\"model\":", "", "[1,2]", "\"text\"", "{'single': 1}"}) {
    ApiResult<ChatRequest> r = parse_chat_request(body);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.error().status, 400);
    EXPECT_EQ(r.error().type, "invalid_request_error");
    EXPECT_FALSE(r.error().param.has_value());
  }
}

TEST(OpenAiChatRequest, MissingRequiredFields) {
  expect_400(parse_chat_request(chat_body({{"model", nullptr}})), "model");
  expect_400(parse_chat_request(chat_body({{"messages", nullptr}})), "messages");
  ApiResult<ChatRequest> r = parse_chat_request(chat_body({{"messages", nullptr}}));
  EXPECT_EQ(r.error().code, "missing_required_parameter");
  expect_400(parse_chat_request(chat_body({{"messages", json::array()}})), "messages");
  expect_400(parse_chat_request(chat_body({{"messages", json::parse(R"([{"content":"x"}])")}})),
             "messages[0].role");
  expect_400(parse_chat_request(chat_body({{"messages", json::parse(R"([{"role":"user"}])")}})),
             "messages[0].content");
}

TEST(OpenAiChatRequest, BadMessages) {
  expect_400(parse_chat_request(chat_body({{"messages", "hello"}})), "messages");
  expect_400(parse_chat_request(chat_body({{"messages", json::parse(R"([{"role":"robot","content":"x"}])")}})),
             "messages[0].role");
  expect_400(parse_chat_request(chat_body({{"messages", json::parse(R"([{"role":"user","content":5}])")}})),
             "messages[0].content");
  expect_400(parse_chat_request(chat_body({{"messages", json::parse(
                 R"([{"role":"user","content":"a"},{"role":"assistant","content":null}])")}})),
             "messages[1].content");
  expect_400(parse_chat_request(chat_body({{"messages", json::parse(
                 R"([{"role":"user","content":[{"type":"text"}]}])")}})),
             "messages[0].content[0].text");
  expect_400(parse_chat_request(chat_body({{"messages", json::parse(
                 R"([{"role":"assistant","tool_calls":[{"id":"c","type":"function",
                     "function":{"name":"f","arguments":"{not json"}}]}])")}})),
             "messages[0].tool_calls[0].function.arguments");
}

TEST(OpenAiChatRequest, NonTextContentPartSays400AndWhy) {
  ApiResult<ChatRequest> r = parse_chat_request(chat_body({{"messages", json::parse(R"([
      {"role":"user","content":[{"type":"text","text":"look"},
                                {"type":"image_url","image_url":{"url":"http://x/y.png"}}]}])")}}));
  expect_400(r, "messages[0].content[1].type");
  EXPECT_NE(r.error().message.find("image_url"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("text"), std::string::npos) << r.error().message;
}

TEST(OpenAiChatRequest, RangesAndTypes) {
  struct Case {
    json extra;
    std::string param;
  };
  const Case cases[] = {
      {{{"temperature", 2.5}}, "temperature"},
      {{{"temperature", -0.1}}, "temperature"},
      {{{"temperature", "hot"}}, "temperature"},
      {{{"top_p", 1.5}}, "top_p"},
      {{{"presence_penalty", -2.1}}, "presence_penalty"},
      {{{"frequency_penalty", 3}}, "frequency_penalty"},
      {{{"n", 0}}, "n"},
      {{{"n", 1.5}}, "n"},
      {{{"max_tokens", 0}}, "max_tokens"},
      {{{"max_completion_tokens", -5}}, "max_completion_tokens"},
      {{{"max_tokens", "10"}}, "max_tokens"},
      {{{"seed", "abc"}}, "seed"},
      {{{"stop", json::array({"a", "b", "c", "d", "e"})}}, "stop"},
      {{{"stop", 5}}, "stop"},
      {{{"stop", json::array({"a", 1})}}, "stop[1]"},
      {{{"logit_bias", {{"abc", 1}}}}, "logit_bias"},
      {{{"logit_bias", {{"-3", 1}}}}, "logit_bias"},
      {{{"logit_bias", {{"12", 101}}}}, "logit_bias.12"},
      {{{"logit_bias", {{"12", -100.5}}}}, "logit_bias.12"},
      {{{"logit_bias", {{"12", "x"}}}}, "logit_bias.12"},
      {{{"logit_bias", json::array()}}, "logit_bias"},
      {{{"logprobs", 1}}, "logprobs"},
      {{{"logprobs", true}, {"top_logprobs", 21}}, "top_logprobs"},
      {{{"top_logprobs", 2}}, "top_logprobs"},
      {{{"stream", "yes"}}, "stream"},
      {{{"stream_options", {{"include_usage", true}}}}, "stream_options"},
      {{{"stream", true}, {"stream_options", {{"include_usage", 1}}}}, "stream_options.include_usage"},
      {{{"top_k", -2}}, "top_k"},
      {{{"min_p", 1.5}}, "min_p"},
      {{{"repetition_penalty", 0}}, "repetition_penalty"},
      {{{"repetition_penalty", 2.5}}, "repetition_penalty"},
      {{{"min_tokens", -1}}, "min_tokens"},
      {{{"max_tokens", 3}, {"min_tokens", 4}}, "min_tokens"},
      {{{"ignore_eos", "no"}}, "ignore_eos"},
      {{{"stop_token_ids", json::array({1, -1})}}, "stop_token_ids[1]"},
      {{{"skip_special_tokens", 0}}, "skip_special_tokens"},
      {{{"chat_template_kwargs", "x"}}, "chat_template_kwargs"},
      {{{"user", 5}}, "user"},
      {{{"model", 5}}, "model"},
      {{{"tools", {{"type", "function"}}}}, "tools"},
      {{{"tools", json::parse(R"([{"type":"function","function":{}}])")}}, "tools[0].function.name"},
      {{{"tools", json::parse(R"([{"type":"retrieval"}])")}}, "tools[0].function"},
      {{{"tool_choice", "sometimes"}}, "tool_choice"},
      {{{"response_format", {{"type", "yaml"}}}}, "response_format.type"},
      {{{"response_format", "json"}}, "response_format"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.extra.dump());
    expect_400(parse_chat_request(chat_body(c.extra)), c.param);
  }
}

TEST(OpenAiChatRequest, RangeErrorsUseOpenAiWording) {
  ApiResult<ChatRequest> r = parse_chat_request(chat_body({{"temperature", 3}}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message,
            "Invalid 'temperature': decimal above maximum value. Expected a value <= 2, but got 3 "
            "instead.");
  EXPECT_EQ(r.error().code, "decimal_above_max_value");
  r = parse_chat_request(chat_body({{"max_tokens", "10"}}));
  EXPECT_EQ(r.error().message,
            "Invalid type for 'max_tokens': expected an integer, but got a string instead.");
  EXPECT_EQ(r.error().code, "invalid_type");
}

TEST(OpenAiChatRequest, ResponseFormatIsReadIntoAStructuredOutput) {
  ApiResult<ChatRequest> r = parse_chat_request(chat_body({{"response_format", {{"type", "json_object"}}}}));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->structured.kind, StructuredOutput::Kind::JsonObject);
  r = parse_chat_request(chat_body(json::parse(R"({"response_format":{"type":"json_schema",
      "json_schema":{"name":"p","strict":true,"schema":{"type":"object","properties":{"a":{"type":"integer"}}}}}})")));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->structured.kind, StructuredOutput::Kind::JsonSchema);
  EXPECT_TRUE(r->structured.strict);
  EXPECT_EQ(r->structured.name, "p");
  EXPECT_EQ(json::parse(r->structured.text), json::parse(R"({"type":"object","properties":{"a":{"type":"integer"}}})"));
  EXPECT_EQ(r->structured.param, "response_format.json_schema.schema");
  // Shape errors name the field.
  expect_400(parse_chat_request(chat_body({{"response_format", {{"type", "json_schema"}}}})),
             "response_format.json_schema");
  expect_400(parse_chat_request(chat_body({{"response_format", {{"type", "json_schema"}, {"json_schema", {{"schema", 1}}}}}})),
             "response_format.json_schema.name");
  expect_400(parse_chat_request(chat_body(
                 {{"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", 1}}}}}})),
             "response_format.json_schema.schema");
}

TEST(OpenAiChatRequest, VllmAndLlamaServerConstraintFields) {
  struct Case { json body; StructuredOutput::Kind kind; std::string text; };
  const std::vector<Case> cases = {
      {json::parse(R"({"structured_outputs":{"regex":"[0-9]+"}})"), StructuredOutput::Kind::Regex, "[0-9]+"},
      {json::parse(R"({"structured_outputs":{"json":{"type":"integer"}}})"), StructuredOutput::Kind::JsonSchema, R"({"type":"integer"})"},
      {json::parse(R"({"structured_outputs":{"json":"{\"type\": \"integer\"}"}})"), StructuredOutput::Kind::JsonSchema, R"({"type":"integer"})"},
      {json::parse(R"({"structured_outputs":{"grammar":"root ::= \"a\""}})"), StructuredOutput::Kind::Grammar, R"(root ::= "a")"},
      {json::parse(R"({"structured_outputs":{"json_object":true}})"), StructuredOutput::Kind::JsonObject, ""},
      {json::parse(R"({"guided_regex":"a|b"})"), StructuredOutput::Kind::Regex, "a|b"},
      {json::parse(R"({"guided_json":{"type":"string"}})"), StructuredOutput::Kind::JsonSchema, R"({"type":"string"})"},
      {json::parse(R"({"guided_grammar":"root ::= [a-z]+"})"), StructuredOutput::Kind::Grammar, "root ::= [a-z]+"},
      {json::parse(R"({"json_schema":{"type":"boolean"}})"), StructuredOutput::Kind::JsonSchema, R"({"type":"boolean"})"},
      {json::parse(R"({"grammar":"root ::= \"x\""})"), StructuredOutput::Kind::Grammar, R"(root ::= "x")"},
  };
  for (const Case& c : cases) {
    ApiResult<ChatRequest> r = parse_chat_request(chat_body(c.body));
    ASSERT_TRUE(r.ok()) << c.body.dump() << ": " << r.error().message;
    EXPECT_EQ(r->structured.kind, c.kind) << c.body.dump();
    EXPECT_EQ(r->structured.text, c.text) << c.body.dump();
  }
  ApiResult<ChatRequest> r = parse_chat_request(chat_body(json::parse(R"({"guided_choice":["yes","no"]})")));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->structured.choices, (std::vector<std::string>{"yes", "no"}));
  // Two constraints at once: a 400 naming the second.
  expect_400(parse_chat_request(chat_body(json::parse(R"({"response_format":{"type":"json_object"},"guided_regex":"a"})"))),
             "guided_regex");
  expect_400(parse_chat_request(chat_body(json::parse(R"({"guided_choice":[]})"))), "guided_choice");
  expect_400(parse_chat_request(chat_body(json::parse(R"({"guided_choice":["a",""]})"))), "guided_choice[1]");
  expect_400(parse_chat_request(chat_body(json::parse(R"({"structured_outputs":{"regex":7}})"))), "structured_outputs.regex");
  ApiResult<CompletionRequest> c = parse_completion_request(completion_body(json::parse(R"({"guided_regex":"[ab]"})")));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->structured.kind, StructuredOutput::Kind::Regex);
}

TEST(OpenAiChatRequest, ForcedToolChoices) {
  const json tools = json::parse(R"([{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"g"}}])");
  ApiResult<ChatRequest> r = parse_chat_request(chat_body({{"tools", tools}, {"tool_choice", "required"},
                                                           {"parallel_tool_calls", false}}));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->tool_choice, ToolChoice::Required);
  EXPECT_FALSE(r->parallel_tool_calls);
  EXPECT_TRUE(r->forced_tool_calls());
  r = parse_chat_request(chat_body({{"tools", tools}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "g"}}}}}}));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->tool_choice, ToolChoice::Function);
  EXPECT_EQ(r->tool_choice_function, "g");
  // "required" without tools; a name that is not a tool; a named choice without tools.
  expect_400(parse_chat_request(chat_body({{"tool_choice", "required"}})), "tool_choice");
  r = parse_chat_request(chat_body({{"tools", tools}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "h"}}}}}}));
  expect_400(r, "tool_choice.function.name");
  EXPECT_NE(r.error().message.find("'h'"), std::string::npos);
  expect_400(parse_chat_request(chat_body({{"tool_choice", {{"type", "function"}, {"function", {{"name", "f"}}}}}})),
             "tool_choice.function.name");
  expect_400(parse_chat_request(chat_body({{"tools", tools}, {"tool_choice", {{"type", "x"}, {"function", {{"name", "f"}}}}}})),
             "tool_choice.type");
}

TEST(OpenAiCompletionRequest, PromptForms) {
  ApiResult<CompletionRequest> r = parse_completion_request(completion_body());
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->prompts.size(), 1u);
  EXPECT_EQ(r->prompts[0].text, "Once upon a time");
  EXPECT_EQ(r->sampling.max_tokens, 16) << "OpenAI's default for completions";

  r = parse_completion_request(completion_body({{"prompt", json::array({"a", "b"})}}));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->prompts.size(), 2u);
  EXPECT_EQ(r->prompts[1].text, "b");

  r = parse_completion_request(completion_body({{"prompt", json::array({1, 403, 407})}}));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->prompts.size(), 1u);
  EXPECT_FALSE(r->prompts[0].text.has_value());
  EXPECT_EQ(r->prompts[0].tokens, (std::vector<int32_t>{1, 403, 407}));

  r = parse_completion_request(
      completion_body({{"prompt", json::parse("[[1, 2], [3]]")},
                       {"logprobs", 5}, {"max_tokens", 4}}));
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->prompts.size(), 2u);
  EXPECT_EQ(r->prompts[1].tokens, std::vector<int32_t>{3});
  EXPECT_EQ(r->logprobs, 5);
  EXPECT_EQ(r->sampling.max_tokens, 4);

  r = parse_completion_request(completion_body({{"echo", true}, {"suffix", ""}}));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->echo);
}

TEST(OpenAiCompletionRequest, Errors) {
  expect_400(parse_completion_request(R"({"model":"m"})"), "prompt");
  expect_400(parse_completion_request(R"({"prompt":"x"})"), "model");
  expect_400(parse_completion_request(completion_body({{"prompt", json::array()}})), "prompt");
  expect_400(parse_completion_request(completion_body({{"prompt", 5}})), "prompt");
  expect_400(parse_completion_request(completion_body({{"prompt", json::parse("[1, -2]")}})),
             "prompt[1]");
  expect_400(parse_completion_request(completion_body({{"prompt", json::parse("[[1], []]")}})),
             "prompt[1]");
  expect_400(parse_completion_request(completion_body({{"prompt", json::parse(R"(["a", 3])")}})),
             "prompt[1]");
  expect_400(parse_completion_request(completion_body({{"logprobs", 6}})), "logprobs");
  expect_400(parse_completion_request(completion_body({{"logprobs", true}})), "logprobs");
  expect_400(parse_completion_request(completion_body({{"suffix", "the end"}})), "suffix");
  expect_400(parse_completion_request(completion_body({{"echo", true}, {"logprobs", 2}})), "echo");
  expect_400(parse_completion_request(completion_body({{"best_of", 3}})), "best_of");
  expect_400(parse_completion_request(completion_body({{"temperature", 9}})), "temperature");
  expect_400(parse_completion_request(
                 completion_body({{"prompt", json::array({"a", "b", "c"})}, {"n", 50}})),
             "n");
  ApiResult<CompletionRequest> r = parse_completion_request(completion_body({{"suffix", "x"}}));
  EXPECT_NE(r.error().message.find("not supported"), std::string::npos);
}

TEST(TokenizeRequest, TextAndChatForms) {
  ApiResult<TokenizeRequest> r = parse_tokenize_request(R"({"prompt":"hello"})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->prompt, "hello");
  EXPECT_TRUE(r->add_special_tokens);
  EXPECT_FALSE(r->model.has_value());

  r = parse_tokenize_request(R"({"content":"hi","add_special":false,"with_pieces":true,"model":"m"})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->prompt, "hi");
  EXPECT_FALSE(r->add_special_tokens);
  EXPECT_TRUE(r->return_token_strs);
  EXPECT_EQ(r->model, "m");

  r = parse_tokenize_request(R"({"messages":[{"role":"user","content":"x"}]})");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->prompt.has_value());
  EXPECT_EQ(r->messages.size(), 1u);
  EXPECT_FALSE(r->add_special_tokens) << "vLLM's default for the chat form";
  EXPECT_TRUE(r->add_generation_prompt);

  ApiResult<TokenizeRequest> bad = parse_tokenize_request(R"({"text":"x"})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().param, "prompt");
  bad = parse_tokenize_request(R"({"prompt":7})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().param, "prompt");
}

TEST(TokenizeRequest, Detokenize) {
  ApiResult<DetokenizeRequest> r = parse_detokenize_request(R"({"tokens":[1,2,3]})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->tokens, (std::vector<int32_t>{1, 2, 3}));
  ApiResult<DetokenizeRequest> bad = parse_detokenize_request(R"({"tokens":[1,"a"]})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().param, "tokens[1]");
  bad = parse_detokenize_request(R"({})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().param, "tokens");
}

TEST(TokenizeRequest, ResponseShapes) {
  std::vector<std::string> strs = {"He", "llo\xE2"};
  EXPECT_EQ(render_tokenize_response({5, 6}, 2048, &strs),
            json::parse(R"({"count":2,"max_model_len":2048,"tokens":[5,6],
                            "token_strs":["He","llo\ufffd"]})"));
  EXPECT_EQ(render_detokenize_response("hi"), json::parse(R"({"prompt":"hi","content":"hi"})"));
}

}  // namespace
}  // namespace spillway::api
