#include "server/http/request_reader.h"

#include <algorithm>
#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/string.hpp>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "server/http/request_checks.h"

namespace spillway::server {

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;

api::ApiError bad_http(std::string message) {
  api::ApiError e;
  e.status = 400;
  e.message = std::move(message);
  e.code = "bad_request";
  return e;
}

}  // namespace

void configure_request_parser(BeastRequestParser& parser, const RequestReadLimits& limits) {
  parser.body_limit(limits.max_body_bytes);
  parser.header_limit(static_cast<std::uint32_t>(std::min<size_t>(limits.max_header_bytes, UINT32_MAX)));
}

std::optional<api::ApiError> check_transfer_encoding(const BeastRequest& req) {
  auto field = req.find(http::field::transfer_encoding);
  if (field == req.end()) return std::nullopt;
  std::vector<std::string> codings;
  for (auto fields = req.equal_range(http::field::transfer_encoding); fields.first != fields.second;
       ++fields.first) {
    const std::string_view value(fields.first->value().data(), fields.first->value().size());
    size_t begin = 0;
    while (begin <= value.size()) {
      size_t end = value.find(',', begin);
      if (end == std::string_view::npos) end = value.size();
      std::string_view coding = value.substr(begin, end - begin);
      while (!coding.empty() && (coding.front() == ' ' || coding.front() == '\t')) coding.remove_prefix(1);
      while (!coding.empty() && (coding.back() == ' ' || coding.back() == '\t')) coding.remove_suffix(1);
      if (!coding.empty()) codings.emplace_back(coding);
      begin = end + 1;
    }
  }
  const auto is_chunked = [](const std::string& c) { return beast::iequals(c, "chunked"); };
  const auto chunked_count = std::count_if(codings.begin(), codings.end(), is_chunked);
  if (codings.empty() || !is_chunked(codings.back()) || chunked_count != 1) {
    return bad_http(fmt::format("Unsupported Transfer-Encoding '{}': a request's transfer codings must "
                                "end with a single 'chunked'.",
                                std::string(field->value())));
  }
  if (codings.size() > 1) {
    api::ApiError e = bad_http(fmt::format("Transfer-Encoding '{}' is not implemented: only 'chunked' is "
                                           "accepted.",
                                           std::string(field->value())));
    e.status = 501;
    e.code = "not_implemented";
    return e;
  }
  return std::nullopt;
}

std::optional<api::ApiError> read_error_response(beast::error_code ec, const RequestReadLimits& limits) {
  if (ec == http::error::body_limit) return api::payload_too_large(limits.max_body_bytes);
  if (ec == http::error::header_limit) {
    api::ApiError e = bad_http(
        fmt::format("The request headers are larger than the limit of {} bytes.", limits.max_header_bytes));
    e.status = 431;
    return e;
  }
  if (ec == http::error::end_of_stream || ec == net::error::eof || ec == beast::error::timeout ||
      ec == net::error::connection_reset || ec == net::error::operation_aborted ||
      ec == http::error::partial_message) {
    return std::nullopt;
  }
  if (ec.category() == http::make_error_code(http::error::bad_target).category()) {
    return bad_http("Malformed HTTP request: " + ec.message());
  }
  return std::nullopt;
}

api::ApiError host_not_allowed(std::string_view host) {
  api::ApiError e;
  e.status = 403;
  e.message = fmt::format(
      "The Host '{}' is not served here (DNS rebinding protection). Start the server with --allowed-hosts {} "
      "to allow it.",
      host, host);
  e.code = "host_not_allowed";
  return e;
}

HttpRequest to_http_request(BeastRequest&& req) {
  HttpRequest request;
  request.method = std::string(req.method_string());
  request.target = std::string(req.target());
  request.path = request.target.substr(0, request.target.find('?'));
  request.authorization = std::string(req[http::field::authorization]);
  request.body = std::move(req.body());
  return request;
}

RequestReadResult read_request_bytes(std::string_view wire, const RequestReadLimits& limits,
                                     const HostPolicy& hosts) {
  RequestReadResult result;
  BeastRequestParser parser;
  configure_request_parser(parser, limits);
  bool head_checked = false;
  while (!parser.is_done()) {
    beast::error_code ec;
    const size_t used = parser.put(net::const_buffer(wire.data(), wire.size()), ec);
    wire.remove_prefix(used);
    if (ec == http::error::need_more) {
      if (wire.empty() || used == 0) return result;  // Incomplete
      continue;
    }
    if (ec) {
      if (std::optional<api::ApiError> e = read_error_response(ec, limits)) {
        result.kind = RequestReadResult::Kind::Error;
        result.error = std::move(*e);
      } else {
        result.kind = RequestReadResult::Kind::Close;
      }
      return result;
    }
    if (parser.is_header_done() && !head_checked) {
      head_checked = true;
      if (std::optional<api::ApiError> e = check_transfer_encoding(parser.get())) {
        result.kind = RequestReadResult::Kind::Error;
        result.error = std::move(*e);
        return result;
      }
    }
    if (used == 0 && !parser.is_done()) return result;  // Incomplete: nothing more to give it
  }
  BeastRequest req = parser.release();
  const std::string host(req[http::field::host]);
  if (!hosts.allows(host)) {
    result.kind = RequestReadResult::Kind::Error;
    result.error = host_not_allowed(host);
    return result;
  }
  result.kind = RequestReadResult::Kind::Request;
  result.request = to_http_request(std::move(req));
  return result;
}

}  // namespace spillway::server
