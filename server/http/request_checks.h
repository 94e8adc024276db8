// The Beast-typed pieces of request reading that the session and read_request_bytes share
// (request_reader.h). server/http only.
#pragma once

#include <optional>
#include <string_view>

#include <boost/beast/http.hpp>

#include "server/http/request_reader.h"

namespace spillway::server {

using BeastRequest = boost::beast::http::request<boost::beast::http::string_body>;
using BeastRequestParser = boost::beast::http::request_parser<boost::beast::http::string_body>;

// A fresh parser under the limits.
void configure_request_parser(BeastRequestParser& parser, const RequestReadLimits& limits);

// RFC 9112 §6.1/§6.3: chunked must be the final coding of a request and appear once; we
// decode no other coding (400, or 501 for a known-but-unimplemented chain).
std::optional<api::ApiError> check_transfer_encoding(const BeastRequest& req);

// What a read error means for the client: the response to send before closing (413 body too
// large, 431 headers too large, 400 malformed), or nullopt to close silently (the client left,
// timed out, or sent something that is not HTTP).
std::optional<api::ApiError> read_error_response(boost::beast::error_code ec, const RequestReadLimits& limits);

// 403 for a Host the policy refuses.
api::ApiError host_not_allowed(std::string_view host);

// The handler's view of a parsed request.
HttpRequest to_http_request(BeastRequest&& req);

}  // namespace spillway::server
