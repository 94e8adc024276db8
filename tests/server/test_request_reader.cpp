// The request-reading rules shared by the session and the HTTP fuzz target
// (server/http/request_reader.h): limits, Transfer-Encoding, Host, malformed input.
#include <gtest/gtest.h>

#include <string>

#include "server/http/request_reader.h"

namespace spillway::server {
namespace {

using Kind = RequestReadResult::Kind;

RequestReadResult read(const std::string& wire, RequestReadLimits limits = {}) {
  return read_request_bytes(wire, limits, HostPolicy::for_listener("127.0.0.1", {}));
}

TEST(RequestReader, ContentLengthRequest) {
  const auto r = read("POST /v1/completions?x=1 HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer k\r\n"
                      "Content-Length: 5\r\n\r\nhello");
  ASSERT_EQ(r.kind, Kind::Request) << r.error.message;
  EXPECT_EQ(r.request.method, "POST");
  EXPECT_EQ(r.request.target, "/v1/completions?x=1");
  EXPECT_EQ(r.request.path, "/v1/completions");
  EXPECT_EQ(r.request.authorization, "Bearer k");
  EXPECT_EQ(r.request.body, "hello");
}

TEST(RequestReader, ChunkedBodyIsDecoded) {
  const auto r = read("POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n"
                      "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n");
  ASSERT_EQ(r.kind, Kind::Request) << r.error.message;
  EXPECT_EQ(r.request.body, "abcde");
}

TEST(RequestReader, TransferEncodingOtherThanOneFinalChunkedIsRefused) {
  const auto not_last = read("POST / HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked, gzip\r\n\r\n");
  ASSERT_EQ(not_last.kind, Kind::Error);
  EXPECT_EQ(not_last.error.status, 400);
  const auto twice = read("POST / HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n"
                          "Transfer-Encoding: chunked\r\n\r\n");
  ASSERT_EQ(twice.kind, Kind::Error);
  EXPECT_EQ(twice.error.status, 400);
  const auto gzip = read("POST / HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip, chunked\r\n\r\n");
  ASSERT_EQ(gzip.kind, Kind::Error);
  EXPECT_EQ(gzip.error.status, 501);
  EXPECT_NE(gzip.error.message.find("gzip"), std::string::npos) << gzip.error.message;
}

TEST(RequestReader, LimitsGive413And431) {
  RequestReadLimits limits;
  limits.max_body_bytes = 4;
  const auto body = read("POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nhello", limits);
  ASSERT_EQ(body.kind, Kind::Error);
  EXPECT_EQ(body.error.status, 413);
  limits = {};
  limits.max_header_bytes = 64;
  const auto head = read("GET / HTTP/1.1\r\nHost: localhost\r\nX-Long: " + std::string(100, 'a') + "\r\n\r\n", limits);
  ASSERT_EQ(head.kind, Kind::Error);
  EXPECT_EQ(head.error.status, 431);
}

TEST(RequestReader, HostOutsideThePolicyIs403) {
  const auto r = read("GET /v1/models HTTP/1.1\r\nHost: evil.example\r\n\r\n");
  ASSERT_EQ(r.kind, Kind::Error);
  EXPECT_EQ(r.error.status, 403);
  EXPECT_EQ(r.error.code, "host_not_allowed");
}

TEST(RequestReader, MalformedAndIncompleteInput) {
  const auto garbage = read(std::string("\x01\x02 / HTTP/1.1\r\n\r\n", 17));
  ASSERT_EQ(garbage.kind, Kind::Error);
  EXPECT_EQ(garbage.error.status, 400);
  EXPECT_EQ(read("GET / HTTP/1.1\r\nHost: loc").kind, Kind::Incomplete);
  EXPECT_EQ(read("POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10\r\n\r\nabc").kind, Kind::Incomplete);
  EXPECT_EQ(read("").kind, Kind::Incomplete);
}

}  // namespace
}  // namespace spillway::server
