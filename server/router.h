// Routes of API.md: authentication, lifecycle (loading / draining), dispatch to the
// endpoint handlers, and the one try/catch that turns anything unexpected into a 500.
//
// Thread contract: handle() runs on the exchange's strand (an HTTP thread).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "api/api_error.h"
#include "server/http/http_exchange.h"
#include "server/server_context.h"

namespace spillway::server {

class Router {
 public:
  explicit Router(ServerContext& ctx) : ctx_(ctx) {}

  void handle(const std::shared_ptr<HttpExchange>& exchange);

  // For errors the HTTP layer finds itself (413, 431, malformed, too many connections).
  HttpResponse transport_error(const api::ApiError& error, const std::string& path);

 private:
  void route(const std::shared_ptr<HttpExchange>& exchange);
  void respond(HttpExchange& exchange, HttpResponse response, const std::string& error = "");
  void respond_error(HttpExchange& exchange, const api::ApiError& error);
  bool authorized(const HttpRequest& request) const;

  void health(HttpExchange& exchange);
  void metrics(HttpExchange& exchange);
  void models(HttpExchange& exchange, const std::string& id);
  void chat_completions(const std::shared_ptr<HttpExchange>& exchange);
  void completions(const std::shared_ptr<HttpExchange>& exchange);
  void tokenize(HttpExchange& exchange);
  void detokenize(HttpExchange& exchange);

  // nullopt when the model is served; else the 404 / 503 to send.
  std::optional<api::ApiError> check_model(const std::optional<std::string>& model) const;
  std::optional<api::ApiError> check_ready() const;

  ServerContext& ctx_;
};

}  // namespace spillway::server
