"""bench/load.py, the serving load generator, run as a subprocess against a real server:
its counts agree with what it asked for and with the server's own /metrics, its latency
figures are positive and ordered, and failures (nothing listening, a server that never
answers, a wrong API key) are counted as errors with a message, exit 1, and do not hang."""
import http.server
import importlib.util
import json
import os
import socket
import subprocess
import sys
import threading
import unittest

from spillway_e2e import Server, ServerTestCase, main

LOAD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "load.py")
RUN_TIMEOUT = 300


def run_load(base_url, *args, timeout=RUN_TIMEOUT):
    """Runs bench/load.py --json: (exit status, report dict, stderr)."""
    proc = subprocess.run([sys.executable, LOAD, "--base-url", base_url, "--json", *args],
                          capture_output=True, text=True, timeout=timeout)
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        raise AssertionError("load.py printed no JSON (exit %d): %s %s"
                             % (proc.returncode, proc.stdout, proc.stderr)) from None
    return proc.returncode, report, proc.stderr


LOAD_ARGS = ("--concurrency", "3", "--requests", "6", "--max-tokens", "8", "--ignore-eos",
             "--prompt-tokens", "20")


class LoadAgainstSpillway(ServerTestCase):
    SERVER_ARGS = ("--max-running", "4")

    def base_url(self):
        return "http://127.0.0.1:%d" % self.server.port

    def check_report(self, report):
        self.assertEqual(report["requests"], 6)
        self.assertEqual(report["ok"], 6, report["first_error"])
        self.assertEqual(report["errors"], 0)
        self.assertIsNone(report["first_error"])
        self.assertEqual(report["generated_tokens"], 6 * 8)  # ignore_eos: exactly max_tokens each
        for name in ("ttft", "itl", "e2e"):
            p50, p99 = report[name + "_p50_s"], report[name + "_p99_s"]
            self.assertGreater(p50, 0, name)
            self.assertLessEqual(p50, p99, name)
        self.assertLessEqual(report["ttft_p50_s"], report["e2e_p50_s"])
        self.assertLessEqual(report["ttft_p99_s"], report["e2e_p99_s"])
        self.assertLessEqual(report["e2e_p99_s"], report["wall_seconds"])
        self.assertGreater(report["generated_tokens_per_second"], 0)
        self.assertAlmostEqual(report["generated_tokens_per_second"] * report["wall_seconds"], 48, places=6)
        self.assertAlmostEqual(report["requests_per_second"] * report["wall_seconds"], 6, places=6)
        self.assertEqual(report["concurrency"], 3)
        self.assertEqual(report["max_tokens"], 8)
        self.assertTrue(report["ignore_eos"])

    def check_against_metrics(self, endpoint, tokens_before, requests_before, key):
        """The server generated exactly the tokens the report counts, for 6 requests with 200."""
        self.server.wait_metric("spillway_http_requests_total", lambda v: v >= requests_before + 6,
                                endpoint=endpoint, status="200")
        self.server.wait_metric("spillway_generation_tokens_total", lambda v: v >= tokens_before + 48)
        self.assertEqual(self.server.metric("spillway_generation_tokens_total") - tokens_before, 48, key)
        self.assertEqual(self.server.metric("spillway_http_requests_total", endpoint=endpoint, status="200")
                         - requests_before, 6, key)

    def run_endpoint(self, endpoint, *extra):
        path = "/v1/chat/completions" if endpoint == "chat" else "/v1/completions"
        tokens_before = self.server.metric("spillway_generation_tokens_total")
        requests_before = self.server.metric("spillway_http_requests_total", endpoint=path, status="200")
        code, report, stderr = run_load(self.base_url() + "/v1/", "--endpoint", endpoint, *LOAD_ARGS, *extra)
        self.assertEqual(code, 0, (report, stderr))
        self.check_report(report)
        self.assertEqual(report["endpoint"], endpoint)
        self.check_against_metrics(path, tokens_before, requests_before, endpoint)
        return report

    def test_chat_load_counts_match_the_server(self):
        report = self.run_endpoint("chat")
        self.assertEqual(report["model"], "stories260K", "the first id of /v1/models")

    def test_completions_load_counts_match_the_server(self):
        self.run_endpoint("completions", "--model", "stories260K")

    def test_an_unknown_model_is_counted_as_errors(self):
        code, report, _ = run_load(self.base_url(), "--model", "no-such-model", "--requests", "2")
        self.assertEqual(code, 1)
        self.assertEqual((report["ok"], report["errors"]), (0, 2))
        self.assertIn("HTTP 404", report["first_error"])
        self.assertIn("no-such-model", report["first_error"])


class FakeServer(http.server.BaseHTTPRequestHandler):
    """A scripted OpenAI-style server that records every request as (path, headers, body).
    The "model" field picks the stream: "usage" (two text chunks, a role-only chunk and a
    usage chunk saying 7 tokens), "no-usage" (three text chunks, no usage chunk),
    "truncated" (one chunk, no [DONE]), "error-event" (an OpenAI error object as an event)."""
    protocol_version = "HTTP/1.0"  # the body ends when the connection closes
    requests = []

    def event(self, obj):
        self.wfile.write(b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n")
        self.wfile.flush()

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        FakeServer.requests.append((self.path, dict(self.headers), body))
        model = body["model"]
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()

        def text(t):
            key = "delta" if "chat" in self.path else "text"
            value = {"content": t} if key == "delta" else t
            return {"choices": [{"index": 0, key: value, "finish_reason": None}], "usage": None}

        if model == "usage":
            self.event({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
            self.event(text("Once"))
            self.wfile.write(b": keepalive\n\n")
            self.event(text(" upon"))
            self.event({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 7}})
            self.event(b"[DONE]")
        elif model == "no-usage":
            for t in ("a", "b", "c"):
                self.event(text(t))
            self.event(b"[DONE]")
        elif model == "truncated":
            self.event(text("Hi"))
        elif model == "error-event":
            self.event(text("Hi"))
            self.event({"error": {"message": "the engine broke", "type": "server_error"}})

    def log_message(self, *args):
        pass


class LoadAgainstFakeServer(unittest.TestCase):
    """What load.py sends, and how it counts streams that Spillway does not produce."""

    @classmethod
    def setUpClass(cls):
        cls.fake = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeServer)
        threading.Thread(target=cls.fake.serve_forever, daemon=True).start()
        cls.url = "http://127.0.0.1:%d/prefix/v1" % cls.fake.server_address[1]

    @classmethod
    def tearDownClass(cls):
        cls.fake.shutdown()
        cls.fake.server_close()

    def setUp(self):
        FakeServer.requests.clear()

    def test_the_request_body_and_headers(self):
        code, report, stderr = run_load(self.url, "--model", "usage", "--requests", "3", "--concurrency", "2",
                                        "--max-tokens", "9", "--ignore-eos", "--prompt-tokens", "12",
                                        "--seed", "5", "--api-key", "k1")
        self.assertEqual(code, 0, (report, stderr))
        self.assertEqual(len(FakeServer.requests), 3)
        prompts = []
        for path, headers, body in FakeServer.requests:
            self.assertEqual(path, "/prefix/v1/chat/completions")
            self.assertEqual(headers["Authorization"], "Bearer k1")
            self.assertEqual(body["model"], "usage")
            self.assertIs(body["stream"], True)
            self.assertEqual(body["stream_options"], {"include_usage": True})
            self.assertIs(body["ignore_eos"], True)
            self.assertEqual(body["max_tokens"], 9)
            (message,) = body["messages"]
            self.assertEqual(message["role"], "user")
            prompts.append(message["content"])
        numbers = sorted(int(p.split(":")[0].split()[-1]) for p in prompts)
        self.assertEqual(numbers, [0, 1, 2], prompts)
        for p in prompts:
            self.assertTrue(p.startswith("Request "), p)
            self.assertEqual(len(p.split()), 2 + 12, p)  # "Request N:" then 12 words
        self.assertEqual(len({p.split(":", 1)[1] for p in prompts}), 1, "same words after the number")
        self.assertEqual(report["generated_tokens"], 3 * 7, "from the usage chunk")
        self.assertEqual(report["ok"], 3)

    def test_without_usage_text_chunks_are_counted(self):
        code, report, stderr = run_load(self.url, "--model", "no-usage", "--endpoint", "completions",
                                        "--requests", "2")
        self.assertEqual(code, 0, (report, stderr))
        self.assertEqual(FakeServer.requests[0][0], "/prefix/v1/completions")
        self.assertIn("prompt", FakeServer.requests[0][2])
        self.assertNotIn("ignore_eos", FakeServer.requests[0][2])
        self.assertEqual(report["generated_tokens"], 2 * 3)

    def test_broken_streams_are_errors(self):
        for model, message in (("truncated", "before data: [DONE]"), ("error-event", "the engine broke")):
            with self.subTest(model=model):
                code, report, _ = run_load(self.url, "--model", model, "--requests", "2", "--timeout", "10",
                                           timeout=60)
                self.assertEqual(code, 1)
                self.assertEqual((report["ok"], report["errors"], report["generated_tokens"]), (0, 2, 0))
                self.assertIn(message, report["first_error"])


class LoadWithoutAServer(unittest.TestCase):
    """Nothing serves: a closed port, and a socket that accepts but never answers."""

    def test_nothing_listening_fails_every_request_quickly(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]  # closed again when the block ends: nothing listens there
        for extra in (("--model", "m"), ()):  # with a model, and with the /v1/models lookup
            with self.subTest(extra=extra):
                code, report, _ = run_load("http://127.0.0.1:%d" % port, "--requests", "4", "--concurrency", "2",
                                           "--timeout", "2", *extra, timeout=60)
                self.assertEqual(code, 1)
                self.assertEqual((report["ok"], report["errors"], report["requests"]), (0, 4, 4))
                self.assertIn("Connection refused", report["first_error"])
                self.assertEqual(report["generated_tokens"], 0)
                self.assertIsNone(report["ttft_p50_s"])

    def test_a_server_that_never_answers_times_out(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen(16)  # connections complete in the backlog; nothing is ever read or sent
            code, report, _ = run_load("http://127.0.0.1:%d" % s.getsockname()[1], "--model", "m",
                                       "--requests", "3", "--concurrency", "3", "--timeout", "1", timeout=60)
        self.assertEqual(code, 1)
        self.assertEqual((report["ok"], report["errors"]), (0, 3))
        self.assertIn("timeout", report["first_error"])


class Percentiles(unittest.TestCase):
    def test_nearest_rank(self):
        spec = importlib.util.spec_from_file_location("load", LOAD)
        load = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(load)
        ten = [7, 1, 10, 3, 5, 2, 9, 4, 8, 6]
        self.assertEqual(load.percentile(ten, 50), 5)  # rank ceil(5.0) = 5
        self.assertEqual(load.percentile(ten, 99), 10)  # rank ceil(9.9) = 10
        self.assertEqual(load.percentile(ten, 10), 1)
        self.assertEqual(load.percentile([0.5, 0.25, 0.75], 50), 0.5)  # rank ceil(1.5) = 2
        self.assertEqual(load.percentile([4.0], 99), 4.0)
        self.assertIsNone(load.percentile([], 50))


class LoadWithApiKey(ServerTestCase):
    SERVER_ARGS = ("--api-key", "secret")

    def test_a_wrong_key_counts_401s_with_the_message(self):
        before = self.server.metric("spillway_http_requests_total", endpoint="/v1/chat/completions", status="401")
        code, report, _ = run_load("http://127.0.0.1:%d" % self.server.port, "--api-key", "wrong",
                                   "--model", "stories260K", "--requests", "3", "--concurrency", "2")
        self.assertEqual(code, 1)
        self.assertEqual((report["ok"], report["errors"]), (0, 3))
        self.assertIn("HTTP 401", report["first_error"])
        self.assertIn("API key", report["first_error"])
        self.server.wait_metric("spillway_http_requests_total", lambda v: v >= before + 3,
                                endpoint="/v1/chat/completions", status="401")

    def test_the_right_key_succeeds(self):
        code, report, stderr = run_load("http://127.0.0.1:%d" % self.server.port, "--api-key", "secret",
                                        "--requests", "2", "--max-tokens", "4", "--ignore-eos")
        self.assertEqual(code, 0, (report, stderr))
        self.assertEqual((report["ok"], report["generated_tokens"]), (2, 8))


if __name__ == "__main__":
    main()
