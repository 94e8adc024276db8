"""Lifecycle of API.md: /live answers at once; /health 503 until loaded, then 200; SIGTERM
during a stream: /health 503, new requests 503 with Retry-After, /metrics keeps serving,
the stream finishes, the process exits 0."""
import json
import threading
import time
import unittest

from spillway_e2e import Server, chat_body, completion_body, main, read_sse


class Lifecycle(unittest.TestCase):

    def test_live_at_once_and_health_when_loaded(self):
        server = Server()
        try:
            status, _, body = server.request("GET", "/live")
            self.assertEqual(status, 200)
            status, headers, body = server.request("GET", "/health")
            if status != 200:  # still loading
                self.assertEqual(status, 503)
                self.assertIn("retry-after", headers)
                self.assertEqual(json.loads(body)["error"]["type"], "server_error")
            server.wait_ready()
            status, _, body = server.request("GET", "/health")
            self.assertEqual((status, json.loads(body)), (200, {"status": "ok"}))
        finally:
            server.close()
        self.assertEqual(server.proc.returncode, 0)

    def test_sigterm_drains_a_stream_and_exits_zero(self):
        server = Server("--ctx-size", "4096", "--drain-timeout", "120").wait_ready()
        result = {}
        started = threading.Event()

        def stream():
            conn = server.connection()
            body = completion_body("Once upon a time", max_tokens=400, temperature=0.7, ignore_eos=True,
                                   stream=True, seed=7)
            conn.request("POST", "/v1/completions", body=json.dumps(body).encode(),
                         headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            result["status"] = resp.status
            first = resp.readline()
            result["first"] = first
            started.set()
            events, _ = read_sse(resp)
            result["events"] = events
            conn.close()

        t = threading.Thread(target=stream)
        t.start()
        self.assertTrue(started.wait(60))
        server.terminate()
        # Draining: /health 503, new work 503 with Retry-After, /metrics open.
        deadline = time.time() + 30
        while time.time() < deadline:
            status, headers, body = server.request("GET", "/health")
            if status == 503:
                break
            time.sleep(0.02)
        self.assertEqual(status, 503)
        self.assertIn("retry-after", headers)
        status, headers, body = server.request("POST", "/v1/chat/completions", body=chat_body("x", max_tokens=2))
        self.assertEqual(status, 503, body)
        self.assertGreaterEqual(int(headers["retry-after"]), 1)
        self.assertEqual(json.loads(body)["error"]["type"], "server_error")
        status, _, _ = server.request("GET", "/metrics")
        self.assertEqual(status, 200)

        t.join(120)
        self.assertFalse(t.is_alive())
        self.assertEqual(result["status"], 200)
        events = result["events"]
        self.assertEqual(events[-1], "[DONE]", "the stream finished")
        self.assertEqual(events[-2]["choices"][0]["finish_reason"], "length")
        text_chunks = 1 + len(events) - 1  # the first line was read before
        self.assertGreater(text_chunks, 1)
        self.assertEqual(server.wait_exit(), 0)
        self.assertTrue([r for r in server.logs if r.get("message") == "draining"])

    def test_drain_timeout_cancels_what_is_left(self):
        server = Server("--ctx-size", "16384", "--drain-timeout", "0.2").wait_ready()
        conn = server.connection()
        conn.request("POST", "/v1/completions",
                     body=json.dumps(completion_body("Hi", max_tokens=16000, ignore_eos=True, stream=True)).encode(),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        self.assertEqual(resp.status, 200)
        resp.readline()
        server.terminate()
        events, _ = read_sse(resp)
        conn.close()
        self.assertTrue(events)
        self.assertNotEqual(events[-1], "[DONE]")
        self.assertIn("error", events[-1], "a stream cut by the drain timeout ends with an error event")
        self.assertEqual(server.wait_exit(), 0)


if __name__ == "__main__":
    main()
