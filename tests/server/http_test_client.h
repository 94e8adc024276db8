// A minimal blocking HTTP/1.1 client over POSIX sockets for the server tests (the tests
// must see the bytes: chunked framing, SSE lines, keep-alive, a client that hangs up).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>

namespace spillway::server::testing {

struct ClientResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;                            // de-chunked
};

class HttpTestClient {
 public:
  explicit HttpTestClient(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      throw std::runtime_error("connect failed");
    }
    timeval tv{30, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~HttpTestClient() { close(); }

  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  void send_raw(const std::string& data) {
    size_t sent = 0;
    while (sent < data.size()) {
      const ssize_t n = ::send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;  // the server may close early (413)
      sent += static_cast<size_t>(n);
    }
  }

  void send_request(const std::string& method, const std::string& path, const std::string& body = "",
                    const std::string& extra_headers = "") {
    std::string req = method + " " + path + " HTTP/1.1\r\nHost: test\r\n" + extra_headers;
    if (!body.empty() || method == "POST") {
      req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
    }
    req += "\r\n" + body;
    send_raw(req);
  }

  // Reads one whole response (Content-Length or chunked).
  ClientResponse read_response() {
    ClientResponse r = read_head();
    auto te = r.headers.find("transfer-encoding");
    if (te != r.headers.end() && te->second == "chunked") {
      while (true) {
        std::string chunk;
        if (!read_chunk(chunk)) break;
        if (chunk.empty()) break;
        r.body += chunk;
      }
    } else if (auto cl = r.headers.find("content-length"); cl != r.headers.end()) {
      r.body = read_exact(std::stoul(cl->second));
    }
    return r;
  }

  ClientResponse request(const std::string& method, const std::string& path,
                         const std::string& body = "", const std::string& extra_headers = "") {
    send_request(method, path, body, extra_headers);
    return read_response();
  }

  // For streams: the status line and headers only.
  ClientResponse read_head() {
    ClientResponse r;
    const std::string head = read_until("\r\n\r\n");
    size_t pos = head.find("\r\n");
    const std::string status_line = head.substr(0, pos);
    if (status_line.size() >= 12) r.status = std::stoi(status_line.substr(9, 3));
    while (pos != std::string::npos && pos + 2 < head.size()) {
      const size_t end = head.find("\r\n", pos + 2);
      const std::string line = head.substr(pos + 2, end - pos - 2);
      const size_t colon = line.find(':');
      if (colon != std::string::npos) {
        std::string name = line.substr(0, colon);
        for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        std::string value = line.substr(colon + 1);
        while (!value.empty() && value.front() == ' ') value.erase(0, 1);
        r.headers[name] = value;
      }
      pos = end;
    }
    return r;
  }

  // One chunk of a chunked body; false at EOF. The last chunk is empty.
  bool read_chunk(std::string& out) {
    const std::string size_line = read_until("\r\n");
    if (size_line.empty()) return false;
    const size_t size = std::stoul(size_line, nullptr, 16);
    out = read_exact(size);
    read_exact(2);
    return true;
  }

  // True when the server closed the connection (read returns 0).
  bool closed_by_server() {
    if (!buffer_.empty()) return false;
    char c;
    return ::recv(fd_, &c, 1, 0) == 0;
  }

 private:
  bool fill() {
    char buf[65536];
    const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) return false;
    buffer_.append(buf, static_cast<size_t>(n));
    return true;
  }
  std::string read_until(const std::string& delimiter) {
    size_t pos;
    while ((pos = buffer_.find(delimiter)) == std::string::npos) {
      if (!fill()) return {};
    }
    std::string out = buffer_.substr(0, pos);
    buffer_.erase(0, pos + delimiter.size());
    return out;
  }
  std::string read_exact(size_t n) {
    while (buffer_.size() < n) {
      if (!fill()) break;
    }
    std::string out = buffer_.substr(0, std::min(n, buffer_.size()));
    buffer_.erase(0, out.size());
    return out;
  }

  int fd_ = -1;
  std::string buffer_;
};

}  // namespace spillway::server::testing
