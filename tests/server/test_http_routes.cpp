// The HTTP layer, routes, streaming and cancellation against a scripted engine
// (fake_backend.h): status codes and bodies of API.md, SSE framing, keep-alive, heartbeats,
// body limits, auth, lifecycle, and a client that hangs up cancelling its request.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>

#include <nlohmann/json.hpp>

#include "fake_backend.h"
#include "http_test_client.h"
#include "server/http/http_server.h"
#include "server/observability/metrics.h"
#include "server/router.h"
#include "server/server_context.h"

namespace spillway::server::testing {
namespace {

using json = nlohmann::json;

// SSE `data:` payloads of a de-chunked stream body.
std::vector<std::string> sse_data(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) break;
    const std::string event = body.substr(pos, end - pos);
    if (event.rfind("data: ", 0) == 0) out.push_back(event.substr(6));
    pos = end + 2;
  }
  return out;
}

template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return pred();
}

class HttpRoutes : public ::testing::Test {
 protected:
  void start() {
    metrics_ = std::make_unique<ServerMetrics>("fake-model");
    backend_ = std::make_unique<FakeBackend>();
    ASSERT_TRUE(backend_->has_chat_prompt());
    ctx_.reset(new ServerContext{options_, "fake-model", 1700000000, *metrics_, *backend_});
    ctx_->lifecycle = Lifecycle::Ready;
    router_ = std::make_unique<Router>(*ctx_);
    HttpServerConfig config;
    config.port = 0;
    config.max_body_bytes = options_.max_body_bytes;
    config.threads = 2;
    server_ = std::make_unique<HttpServer>(
        config, [this](std::shared_ptr<HttpExchange> ex) { router_->handle(ex); },
        [this](const api::ApiError& e, const std::string& path) { return router_->transport_error(e, path); });
    Result<uint16_t> port = server_->listen();
    ASSERT_TRUE(port.ok()) << port.error().message;
    port_ = *port;
    server_->start();
  }

  void TearDown() override {
    if (server_) server_->stop();
    backend_.reset();
    server_.reset();
    router_.reset();
    ctx_.reset();
    metrics_.reset();
  }

  static std::string chat(int max_tokens, bool stream = false, json extra = json::object()) {
    json body = {{"model", "fake-model"},
                 {"messages", {{{"role", "user"}, {"content", "hi"}}}},
                 {"max_tokens", max_tokens},
                 {"stream", stream}};
    body.update(extra);
    return body.dump();
  }

  ServeOptions options_;
  std::unique_ptr<ServerMetrics> metrics_;
  std::unique_ptr<FakeBackend> backend_;
  std::unique_ptr<ServerContext> ctx_;
  std::unique_ptr<Router> router_;
  std::unique_ptr<HttpServer> server_;
  uint16_t port_ = 0;
};

TEST_F(HttpRoutes, ProbesMetricsAndKeepAlive) {
  start();
  HttpTestClient c(port_);
  ClientResponse r = c.request("GET", "/live");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body), json::parse(R"({"status":"ok"})"));
  r = c.request("GET", "/health");  // the same connection
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body)["status"], "ok");
  ctx_->lifecycle = Lifecycle::Loading;
  r = c.request("GET", "/health");
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.headers["retry-after"], "5");
  EXPECT_EQ(json::parse(r.body)["error"]["type"], "server_error");
  r = c.request("POST", "/v1/chat/completions", chat(3));
  EXPECT_EQ(r.status, 503) << "loading";
  r = c.request("GET", "/metrics");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["content-type"], "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(r.body.find("spillway_requests_running 0"), std::string::npos);
  EXPECT_NE(r.body.find("spillway_http_requests_total{endpoint=\"/health\",status=\"503\"} 1"),
            std::string::npos);
}

TEST_F(HttpRoutes, UnknownPathsModelsAndMethods) {
  start();
  HttpTestClient c(port_);
  ClientResponse r = c.request("GET", "/v1/nothing");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(json::parse(r.body)["error"]["type"], "invalid_request_error");
  r = c.request("GET", "/v1/completions");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.headers["allow"], "POST");
  r = c.request("GET", "/v1/models");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body)["data"][0]["id"], "fake-model");
  r = c.request("GET", "/v1/models/fake-model");
  EXPECT_EQ(r.status, 200);
  r = c.request("GET", "/v1/models/org%2Fother");
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(json::parse(r.body)["error"]["message"].get<std::string>().find("org/other"), std::string::npos);
  r = c.request("POST", "/v1/chat/completions",
                json({{"model", "other"}, {"messages", {{{"role", "user"}, {"content", "x"}}}}}).dump());
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(json::parse(r.body)["error"]["code"], "model_not_found");
}

TEST_F(HttpRoutes, ChatWholeResponse) {
  start();
  HttpTestClient c(port_);
  ClientResponse r = c.request("POST", "/v1/chat/completions", chat(5));
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "hello");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["completion_tokens"], 5);
  EXPECT_GT(j["usage"]["prompt_tokens"].get<int>(), 2);
}

TEST_F(HttpRoutes, ChatStreamFraming) {
  start();
  HttpTestClient c(port_);
  ClientResponse r =
      c.request("POST", "/v1/chat/completions", chat(5, true, {{"stream_options", {{"include_usage", true}}}}));
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["content-type"], "text/event-stream");
  EXPECT_EQ(r.headers["transfer-encoding"], "chunked");
  EXPECT_EQ(r.body.find("event:"), std::string::npos);
  std::vector<std::string> events = sse_data(r.body);
  ASSERT_EQ(events.size(), 1u + 5u + 1u + 1u) << r.body;  // role, 5 tokens, usage, [DONE]
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text;
  const json first = json::parse(events[0]);
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  for (size_t i = 0; i + 2 < events.size(); ++i) {
    json e = json::parse(events[i]);
    EXPECT_EQ(e["id"], first["id"]);
    EXPECT_EQ(e["created"], first["created"]);
    EXPECT_TRUE(e["usage"].is_null());
    text += e["choices"][0]["delta"].value("content", "");
    EXPECT_EQ(e["choices"][0]["finish_reason"].is_null(), i + 3 < events.size());
  }
  EXPECT_EQ(text, "hello");
  json usage = json::parse(events[events.size() - 2]);
  EXPECT_EQ(usage["choices"], json::array());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 5);
  // The connection stays usable after the stream.
  r = c.request("GET", "/live");
  EXPECT_EQ(r.status, 200);
}

TEST_F(HttpRoutes, QuietStreamsGetKeepaliveComments) {
  options_.sse_keepalive_seconds = 0.05;
  start();
  backend_->step_delay = std::chrono::milliseconds(300);
  HttpTestClient c(port_);
  ClientResponse r = c.request("POST", "/v1/completions",
                               json({{"model", "fake-model"}, {"prompt", "x"}, {"max_tokens", 2}, {"stream", true}}).dump());
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(r.body.find(": keepalive\n\n"), std::string::npos) << r.body;
  EXPECT_EQ(sse_data(r.body).back(), "[DONE]");
}

TEST_F(HttpRoutes, ClientLeavingMidStreamCancels) {
  start();
  HttpTestClient c(port_);
  c.send_request("POST", "/v1/chat/completions", chat(3000, true));
  ClientResponse head = c.read_head();
  ASSERT_EQ(head.status, 200);
  std::string chunk;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(c.read_chunk(chunk));
  ASSERT_EQ(backend_->submitted().size(), 1u);
  c.close();
  EXPECT_TRUE(eventually([&] { return backend_->cancelled().size() == 1; }));
  EXPECT_EQ(backend_->cancelled()[0], backend_->submitted()[0]);
  EXPECT_TRUE(eventually([&] { return backend_->running() == 0; }));
  EXPECT_TRUE(eventually([&] {
    return metrics_->render(std::nullopt).find("status=\"499\"} 1") != std::string::npos;
  }));
}

TEST_F(HttpRoutes, ClientLeavingDuringWholeResponseCancels) {
  start();
  HttpTestClient c(port_);
  c.send_request("POST", "/v1/completions",
                 json({{"model", "fake-model"}, {"prompt", "x"}, {"max_tokens", 3000}}).dump());
  ASSERT_TRUE(eventually([&] { return backend_->running() == 1; }));
  c.close();
  EXPECT_TRUE(eventually([&] { return backend_->cancelled().size() == 1; }));
  EXPECT_TRUE(eventually([&] { return backend_->running() == 0; }));
}

TEST_F(HttpRoutes, QueueFullIs429WithRetryAfter) {
  start();
  backend_->refuse_queue_full = true;
  HttpTestClient c(port_);
  ClientResponse r = c.request("POST", "/v1/chat/completions", chat(3));
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(r.headers["retry-after"], "1");
  EXPECT_EQ(json::parse(r.body)["error"]["type"], "server_error");
}

TEST_F(HttpRoutes, EngineFailureIs500OrAnErrorEvent) {
  start();
  backend_->fail_requests = true;
  HttpTestClient c(port_);
  ClientResponse r = c.request("POST", "/v1/chat/completions", chat(3));
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(r.headers["x-should-retry"], "false");
  EXPECT_EQ(json::parse(r.body)["error"]["type"], "server_error");
  r = c.request("POST", "/v1/chat/completions", chat(3, true));
  EXPECT_EQ(r.status, 200);
  std::vector<std::string> events = sse_data(r.body);
  ASSERT_FALSE(events.empty());
  EXPECT_NE(events.back(), "[DONE]");
  EXPECT_TRUE(json::parse(events.back()).contains("error"));
}

TEST_F(HttpRoutes, DrainingRefusesNewWorkButServesMetrics) {
  start();
  ctx_->lifecycle = Lifecycle::Draining;
  HttpTestClient c(port_);
  ClientResponse r = c.request("POST", "/v1/chat/completions", chat(3));
  EXPECT_EQ(r.status, 503);
  EXPECT_FALSE(r.headers["retry-after"].empty());
  EXPECT_EQ(c.request("GET", "/health").status, 503);
  EXPECT_EQ(c.request("GET", "/metrics").status, 200);
  EXPECT_EQ(c.request("GET", "/live").status, 200);
}

TEST_F(HttpRoutes, ApiKey) {
  options_.api_key = "k3y";
  start();
  HttpTestClient c(port_);
  ClientResponse r = c.request("GET", "/v1/models");
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(json::parse(r.body)["error"]["code"], "invalid_api_key");
  EXPECT_EQ(c.request("GET", "/v1/models", "", "Authorization: Bearer nope\r\n").status, 401);
  EXPECT_EQ(c.request("POST", "/tokenize", R"({"prompt":"a"})").status, 401);
  EXPECT_EQ(c.request("GET", "/v1/models", "", "Authorization: Bearer k3y\r\n").status, 200);
  EXPECT_EQ(c.request("GET", "/health").status, 200);
  EXPECT_EQ(c.request("GET", "/metrics").status, 200);
}

TEST_F(HttpRoutes, BodyLimitIs413) {
  options_.max_body_bytes = 1000;
  start();
  {
    HttpTestClient c(port_);
    ClientResponse r = c.request("POST", "/v1/chat/completions", std::string(2000, 'x'));
    EXPECT_EQ(r.status, 413);
    EXPECT_EQ(json::parse(r.body)["error"]["type"], "invalid_request_error");
  }
  {
    HttpTestClient c(port_);  // refused from the header alone
    c.send_raw("POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Length: 1000000000\r\n\r\n");
    EXPECT_EQ(c.read_response().status, 413);
  }
  HttpTestClient c(port_);
  EXPECT_EQ(c.request("GET", "/live").status, 200);
}

TEST_F(HttpRoutes, ToolCallsWholeAndStreamed) {
  start();
  const std::string call = R"(<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>)";
  backend_->script = call;
  const json tools = json::parse(R"([{"type":"function","function":{"name":"get_weather",
      "parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}])");
  HttpTestClient c(port_);
  ClientResponse r = c.request("POST", "/v1/chat/completions",
                               chat(static_cast<int>(call.size()), false, {{"tools", tools}}));
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  const json& message = j["choices"][0]["message"];
  EXPECT_TRUE(message["content"].is_null());
  ASSERT_EQ(message["tool_calls"].size(), 1u);
  EXPECT_EQ(message["tool_calls"][0]["type"], "function");
  EXPECT_EQ(message["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(message["tool_calls"][0]["function"]["arguments"].get<std::string>()),
            json::parse(R"({"city":"Oslo"})"));
  EXPECT_EQ(message["tool_calls"][0]["id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");

  r = c.request("POST", "/v1/chat/completions", chat(static_cast<int>(call.size()), true, {{"tools", tools}}));
  ASSERT_EQ(r.status, 200);
  std::vector<std::string> events = sse_data(r.body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(r.body.find("<tool_call>"), std::string::npos) << "the call is not streamed as content";
  json last = json::parse(events[events.size() - 2]);
  EXPECT_EQ(last["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(last["choices"][0]["delta"]["tool_calls"][0]["index"], 0);
  EXPECT_EQ(last["choices"][0]["delta"]["tool_calls"][0]["function"]["name"], "get_weather");
}

TEST_F(HttpRoutes, CompletionsEchoLogprobsAndTokenize) {
  start();
  HttpTestClient c(port_);
  ClientResponse r = c.request(
      "POST", "/v1/completions",
      json({{"model", "fake-model"}, {"prompt", "ab"}, {"max_tokens", 3}, {"echo", true}}).dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["choices"][0]["text"], "abhel");
  r = c.request("POST", "/v1/completions",
                json({{"model", "fake-model"}, {"prompt", "ab"}, {"max_tokens", 3}, {"logprobs", 1}}).dump());
  ASSERT_EQ(r.status, 200) << r.body;
  json lp = json::parse(r.body)["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], json::parse(R"(["h","e","l"])"));
  EXPECT_EQ(lp["text_offset"], json::parse("[0,1,2]"));
  EXPECT_EQ(lp["token_logprobs"], json::parse("[-0.5,-0.5,-0.5]"));
  r = c.request("POST", "/tokenize", R"({"prompt":"ab"})");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body)["tokens"], json::parse("[1, 68, 69]"));
  r = c.request("POST", "/detokenize", R"({"tokens":[500]})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(json::parse(r.body)["error"]["param"], "tokens[0]");
}

}  // namespace
}  // namespace spillway::server::testing
