"""Every bad input of API.md's error table gets its status and OpenAI error body, and the
server keeps serving: 400 (bad JSON, bad fields, unsupported fields, prompt longer than the
context), 404 (unknown model or path), 405, 413 (body over --max-body-bytes), 429 (queue
full, with Retry-After)."""
import json
import threading

from spillway_e2e import Server, ServerTestCase, chat_body, completion_body, main, read_sse


class Errors(ServerTestCase):
    SERVER_ARGS = ("--max-body-bytes", "65536", "--ctx-size", "256")

    def check_error(self, status, headers, body, want_status, param=None, code=None,
                    type_="invalid_request_error"):
        self.assertEqual(status, want_status, body)
        self.assertEqual(set(body), {"error"})
        self.assertEqual(set(body["error"]), {"message", "type", "param", "code"})
        self.assertEqual(body["error"]["type"], type_)
        self.assertTrue(body["error"]["message"])
        if param is not None:
            self.assertEqual(body["error"]["param"], param)
        if code is not None:
            self.assertEqual(body["error"]["code"], code)
        self.assertTrue(headers["content-type"].startswith("application/json"))

    def post(self, path, body):
        return self.server.post_json(path, body)

    def test_bad_json(self):
        for raw in (b"{not json", b"", b"[1, 2]"):
            status, headers, payload = self.server.request(
                "POST", "/v1/chat/completions", raw_body=raw, headers={"Content-Type": "application/json"})
            self.check_error(status, headers, json.loads(payload), 400)
            self.assertIsNone(json.loads(payload)["error"]["param"])

    def test_bad_fields(self):
        cases = [
            ("/v1/chat/completions", chat_body("x", temperature=5), "temperature"),
            ("/v1/chat/completions", chat_body("x", top_logprobs=21, logprobs=True), "top_logprobs"),
            ("/v1/chat/completions", chat_body("x", n=0), "n"),
            ("/v1/chat/completions", chat_body("x", stop=["a", "b", "c", "d", "e"]), "stop"),
            ("/v1/chat/completions", chat_body("x", logit_bias={"5": 200}), "logit_bias.5"),
            ("/v1/chat/completions", chat_body("x", logit_bias={"99999": 1}), "logit_bias.99999"),
            ("/v1/chat/completions", chat_body("x", max_tokens="many"), "max_tokens"),
            ("/v1/chat/completions", {"model": "stories260K"}, "messages"),
            ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}]}, "model"),
            ("/v1/chat/completions", {"model": "stories260K", "messages": [
                {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x"}}]}]},
             "messages[0].content[0].type"),
            ("/v1/chat/completions", chat_body("x", response_format={"type": "yaml"}), "response_format.type"),
            ("/v1/chat/completions", chat_body("x", response_format={"type": "json_schema"}),
             "response_format.json_schema"),
            ("/v1/chat/completions", chat_body("x", stream_options={"include_usage": True}), "stream_options"),
            ("/v1/completions", completion_body("x", logprobs=6), "logprobs"),
            ("/v1/completions", completion_body("x", suffix="the end"), "suffix"),
            ("/v1/completions", completion_body([1, 99999]), "prompt[1]"),
            ("/v1/completions", completion_body([]), "prompt"),
            ("/tokenize", {"text": "x"}, "prompt"),
            ("/detokenize", {"tokens": ["a"]}, "tokens[0]"),
        ]
        for path, body, param in cases:
            with self.subTest(path=path, param=param):
                status, headers, payload = self.post(path, body)
                self.check_error(status, headers, payload, 400, param=param)

    def test_unsupported_fields_say_not_supported(self):
        status, headers, body = self.post("/v1/chat/completions", chat_body("x", response_format={
            "type": "json_schema", "json_schema": {"name": "x", "schema": {"not": {"type": "null"}}}}))
        self.check_error(status, headers, body, 400, param="response_format.json_schema.schema#/not")
        self.assertIn("not", body["error"]["message"])

    def test_prompt_longer_than_the_context(self):
        status, headers, body = self.post("/v1/completions", completion_body([403] * 300, max_tokens=4))
        self.check_error(status, headers, body, 400, param="prompt", code="context_length_exceeded")
        status, headers, body = self.post("/v1/chat/completions", chat_body("word " * 400))
        self.check_error(status, headers, body, 400, param="messages", code="context_length_exceeded")
        status, headers, body = self.post("/v1/completions", completion_body("Once", max_tokens=300))
        self.check_error(status, headers, body, 400, code="context_length_exceeded")

    def test_unknown_model_and_path(self):
        status, headers, body = self.post("/v1/chat/completions", dict(chat_body("x"), model="gpt-4o"))
        self.check_error(status, headers, body, 404, param="model", code="model_not_found")
        status, headers, body = self.post("/v1/completions", completion_body("x", model="org/none"))
        self.check_error(status, headers, body, 404, code="model_not_found")
        status, headers, body = self.server.get_json("/v1/nothing/here")
        self.check_error(status, headers, body, 404)
        status, headers, body = self.server.get_json("/nothing")
        self.check_error(status, headers, body, 404)

    def test_wrong_method(self):
        status, headers, body = self.server.get_json("/v1/chat/completions")
        self.check_error(status, headers, body, 405)
        self.assertEqual(headers["allow"], "POST")

    def test_body_over_the_limit(self):
        big = chat_body("x" * 70000)
        status, headers, payload = self.server.request("POST", "/v1/chat/completions", body=big)
        self.check_error(status, headers, json.loads(payload), 413)
        status, _, _ = self.server.request("GET", "/health")
        self.assertEqual(status, 200, "the server keeps serving")

    def test_keeps_serving_after_errors(self):
        for _ in range(3):
            self.post("/v1/chat/completions", chat_body("x", temperature=-1))
        conn = self.server.connection()
        try:
            # keep-alive: a 400 and then a good request on one connection
            conn.request("POST", "/v1/completions", body=b"{bad", headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            resp.read()
            self.assertEqual(resp.status, 400)
            conn.request("POST", "/v1/completions", body=json.dumps(completion_body("Hi", max_tokens=3)).encode(),
                         headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            body = json.loads(resp.read())
            self.assertEqual(resp.status, 200, body)
            self.assertEqual(body["usage"]["completion_tokens"], 3)
        finally:
            conn.close()
        errors = [r for r in self.server.logs if r.get("message") == "request" and r.get("status", 0) >= 500]
        self.assertEqual(errors, [], "a validation error is never a 5xx")


class QueueFull(ServerTestCase):
    SERVER_ARGS = ("--max-running", "1", "--max-waiting", "1", "--ctx-size", "16384")

    def test_queue_full_is_429_with_retry_after(self):
        long = dict(max_tokens=16000, temperature=0.8, ignore_eos=True, stream=True)
        conns = []
        try:
            for i in range(2):  # one running, then one waiting
                conn = self.server.connection()
                conn.request("POST", "/v1/completions", body=json.dumps(completion_body("Hi", **long)).encode(),
                             headers={"Content-Type": "application/json"})
                resp = conn.getresponse()
                self.assertEqual(resp.status, 200)
                conns.append(conn)
                if i == 0:
                    self.server.wait_metric("spillway_requests_running", lambda v: v == 1)
            self.server.wait_metric("spillway_requests_waiting", lambda v: v == 1)
            status, headers, payload = self.server.request(
                "POST", "/v1/completions", body=completion_body("Hi", max_tokens=2))
            body = json.loads(payload)
            self.assertEqual(status, 429, body)
            self.assertEqual(body["error"]["type"], "server_error")
            self.assertGreaterEqual(int(headers["retry-after"]), 1)
        finally:
            for conn in conns:
                conn.close()
        self.server.wait_metric("spillway_requests_running", lambda v: v == 0)
        status, _, body = self.server.post_json("/v1/completions", completion_body("Hi", max_tokens=2))
        self.assertEqual(status, 200, body)


if __name__ == "__main__":
    main()
