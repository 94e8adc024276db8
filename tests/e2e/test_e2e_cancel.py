"""A client that goes away cancels its request: mid-stream (closing the socket after a few
chunks) and while a non-streaming request runs. The request finishes as cancelled, and
running requests and KV usage go back to 0."""
import json
import socket
import time

from spillway_e2e import ServerTestCase, chat_body, completion_body, main

LONG = dict(max_tokens=16000, temperature=0.8, ignore_eos=True)


def raw_post(server, path, body):
    """Sends a request on a raw socket (so the test controls when it closes)."""
    data = json.dumps(body).encode()
    sock = socket.create_connection((server.host, server.port), timeout=60)
    sock.sendall(b"POST %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n" % (path.encode(), len(data)) + data)
    return sock


class Cancellation(ServerTestCase):
    SERVER_ARGS = ("--ctx-size", "16384")

    def wait_idle(self):
        self.server.wait_metric("spillway_requests_running", lambda v: v == 0)
        self.server.wait_metric("spillway_requests_waiting", lambda v: v == 0)
        self.server.wait_metric("spillway_kv_cache_usage_ratio", lambda v: v == 0)
        self.server.wait_metric("vllm:num_requests_running", lambda v: v == 0, model_name="stories260K")
        self.server.wait_metric("vllm:kv_cache_usage_perc", lambda v: v == 0, model_name="stories260K")

    def cancelled(self):
        return self.server.metric("spillway_requests_finished_total", finish_reason="cancelled")

    def test_disconnect_mid_stream_cancels(self):
        self.wait_idle()
        before = self.cancelled()
        sock = raw_post(self.server, "/v1/chat/completions", chat_body("Tell me a long story.", stream=True, **LONG))
        received = b""
        while received.count(b"data: ") < 4:  # the role chunk and a few content chunks
            chunk = sock.recv(65536)
            self.assertTrue(chunk, "the stream ended early")
            received += chunk
        self.assertIn(b"200 OK", received.split(b"\r\n")[0])
        self.assertEqual(self.server.metric("spillway_requests_running"), 1)
        self.assertGreater(self.server.metric("spillway_kv_cache_usage_ratio"), 0)
        sock.close()
        self.server.wait_metric("spillway_requests_finished_total", lambda v: v == before + 1,
                                finish_reason="cancelled")
        self.wait_idle()
        gone = [r for r in self.server.logs if r.get("message") == "request" and r.get("status") == 499]
        self.assertTrue(gone, "the request is logged with status 499")
        self.assertLess(gone[-1]["completion_tokens"], LONG["max_tokens"])

    def test_disconnect_during_non_streaming_request_cancels(self):
        self.wait_idle()
        before = self.cancelled()
        sock = raw_post(self.server, "/v1/completions", completion_body("Once upon a time", **LONG))
        self.server.wait_metric("spillway_requests_running", lambda v: v == 1)
        sock.close()
        self.server.wait_metric("spillway_requests_finished_total", lambda v: v == before + 1,
                                finish_reason="cancelled")
        self.wait_idle()

    def test_server_still_serves_after_disconnects(self):
        status, _, body = self.server.post_json("/v1/completions", completion_body("The cat", max_tokens=4))
        self.assertEqual(status, 200, body)
        self.assertEqual(body["usage"]["completion_tokens"], 4)


if __name__ == "__main__":
    main()
