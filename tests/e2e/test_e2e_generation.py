"""Generation through the HTTP API on the golden model: llama.cpp's greedy continuation,
streamed == whole, chunk shapes, 8 concurrent greedy requests == each alone, n / seed,
stop strings, length, logprobs formats, /v1/models, /tokenize, /detokenize."""
import threading

from spillway_e2e import ServerTestCase, chat_body, completion_body, main

GOLDEN = "there was a little girl named Lily. She loved to play outside in the park"


class Generation(ServerTestCase):
    SERVER_ARGS = ("--max-running", "8")

    def complete(self, prompt, **fields):
        status, _, body = self.server.post_json("/v1/completions", completion_body(prompt, **fields))
        self.assertEqual(status, 200, body)
        return body

    def test_greedy_completion_is_llama_cpp_golden(self):
        body = self.complete("Once upon a time", max_tokens=32, temperature=0)
        self.assertEqual(body["object"], "text_completion")
        self.assertIn(GOLDEN, body["choices"][0]["text"])
        self.assertEqual(body["usage"]["prompt_tokens"], 5)  # BOS + 4 ids, as llama.cpp
        self.assertEqual(body["usage"]["completion_tokens"], 32)
        self.assertEqual(body["usage"]["total_tokens"], 37)
        self.assertEqual(body["choices"][0]["finish_reason"], "length")

    def test_chat_whole_response_shape(self):
        status, headers, body = self.server.post_json(
            "/v1/chat/completions", chat_body("Tell me a story.", max_completion_tokens=16, temperature=0))
        self.assertEqual(status, 200, body)
        self.assertTrue(headers["content-type"].startswith("application/json"))
        self.assertTrue(body["id"].startswith("chatcmpl-"))
        self.assertEqual(body["object"], "chat.completion")
        self.assertIsInstance(body["created"], int)
        self.assertEqual(body["model"], "stories260K")
        choice = body["choices"][0]
        self.assertEqual(choice["index"], 0)
        self.assertEqual(choice["message"]["role"], "assistant")
        self.assertIsInstance(choice["message"]["content"], str)
        self.assertIsNone(choice["message"]["refusal"])
        self.assertNotIn("tool_calls", choice["message"])
        self.assertIsNone(choice["logprobs"])
        self.assertIn(choice["finish_reason"], ("stop", "length"))
        usage = body["usage"]
        self.assertEqual(usage["total_tokens"], usage["prompt_tokens"] + usage["completion_tokens"])
        self.assertIn("cached_tokens", usage["prompt_tokens_details"])

    def check_chunks(self, events, object_name, include_usage):
        self.assertEqual(events[-1], "[DONE]")
        chunks = events[:-1]
        self.assertTrue(chunks)
        ids = {c["id"] for c in chunks}
        created = {c["created"] for c in chunks}
        self.assertEqual(len(ids), 1, "one id throughout")
        self.assertEqual(len(created), 1, "one created throughout")
        for c in chunks:
            self.assertEqual(c["object"], object_name)
        body_chunks = chunks[:-1] if include_usage else chunks
        if include_usage:
            self.assertEqual(chunks[-1]["choices"], [])
            self.assertIsNotNone(chunks[-1]["usage"])
            for c in body_chunks:
                self.assertIn("usage", c)
                self.assertIsNone(c["usage"])
        else:
            for c in chunks:
                self.assertNotIn("usage", c)
        finishes = [c["choices"][0]["finish_reason"] for c in body_chunks]
        self.assertTrue(all(f is None for f in finishes[:-1]), finishes)
        self.assertIsNotNone(finishes[-1], "the last content chunk carries finish_reason")
        return body_chunks

    def test_chat_streamed_and_whole_carry_the_same_text(self):
        fields = dict(max_tokens=40, temperature=0)
        status, _, whole = self.server.post_json("/v1/chat/completions", chat_body("Hi there!", **fields))
        self.assertEqual(status, 200, whole)
        status, headers, events, lines = self.server.stream(
            "/v1/chat/completions",
            chat_body("Hi there!", stream=True, stream_options={"include_usage": True}, **fields))
        self.assertEqual(status, 200)
        self.assertTrue(headers["content-type"].startswith("text/event-stream"))
        self.assertFalse([l for l in lines if l.startswith("event:")], "never event: lines")
        body_chunks = self.check_chunks(events, "chat.completion.chunk", include_usage=True)
        self.assertEqual(body_chunks[0]["choices"][0]["delta"].get("role"), "assistant")
        for c in body_chunks[1:]:
            self.assertNotIn("role", c["choices"][0]["delta"])
        text = "".join(c["choices"][0]["delta"].get("content") or "" for c in body_chunks)
        self.assertEqual(text, whole["choices"][0]["message"]["content"])
        self.assertEqual(body_chunks[-1]["choices"][0]["finish_reason"], whole["choices"][0]["finish_reason"])
        self.assertEqual(events[-2]["usage"]["completion_tokens"], whole["usage"]["completion_tokens"])
        self.assertEqual(events[-2]["usage"]["prompt_tokens"], whole["usage"]["prompt_tokens"])

    def test_completion_streamed_and_whole_carry_the_same_text(self):
        fields = dict(max_tokens=24, temperature=0)
        whole = self.complete("Once upon a time", **fields)
        status, _, events, _ = self.server.stream(
            "/v1/completions", completion_body("Once upon a time", stream=True, **fields))
        self.assertEqual(status, 200)
        body_chunks = self.check_chunks(events, "text_completion", include_usage=False)
        self.assertEqual("".join(c["choices"][0]["text"] for c in body_chunks), whole["choices"][0]["text"])

    def test_eight_concurrent_greedy_requests_match_each_alone(self):
        prompts = ["Once upon a time", "The cat", "Tom and Sue went", "One day, a little bird",
                   "Lily had a red ball", "The sun was hot", "Ben wanted to", "There was a big dog"]
        fields = dict(max_tokens=48, temperature=0, logprobs=0)
        alone = [self.complete(p, **fields)["choices"][0] for p in prompts]
        results = [None] * len(prompts)

        def run(i):
            results[i] = self.complete(prompts[i], **fields)["choices"][0]

        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(prompts))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for i, p in enumerate(prompts):
            self.assertEqual(results[i]["logprobs"]["tokens"], alone[i]["logprobs"]["tokens"], p)
            self.assertEqual(results[i]["text"], alone[i]["text"], p)

    def test_n_choices_and_seed(self):
        fields = dict(max_tokens=16, temperature=1.0, seed=1234, n=3)
        first = self.complete("Once upon a time", **fields)
        second = self.complete("Once upon a time", **fields)
        self.assertEqual([c["index"] for c in first["choices"]], [0, 1, 2])
        self.assertEqual([c["text"] for c in first["choices"]], [c["text"] for c in second["choices"]],
                         "the same seed gives the same choices")
        self.assertEqual(first["usage"]["completion_tokens"], 48)

    def test_multiple_prompts_and_token_id_prompts(self):
        body = self.complete([[1, 403, 407, 261, 378], "Once upon a time"], max_tokens=8, temperature=0)
        texts = [c["text"] for c in sorted(body["choices"], key=lambda c: c["index"])]
        self.assertEqual(len(texts), 2)
        self.assertEqual(texts[0], texts[1], "ids and text of the same prompt give the same output")
        self.assertEqual(body["usage"]["prompt_tokens"], 10)

    def test_stop_string_is_not_included(self):
        full = self.complete("Once upon a time", max_tokens=32, temperature=0)["choices"][0]["text"]
        self.assertIn(" named", full)
        cut = self.complete("Once upon a time", max_tokens=32, temperature=0, stop=[" named", "zzz"])
        self.assertEqual(cut["choices"][0]["text"], full[:full.index(" named")])
        self.assertEqual(cut["choices"][0]["finish_reason"], "stop")

    def test_echo(self):
        body = self.complete("Once upon a time", max_tokens=8, temperature=0, echo=True)
        plain = self.complete("Once upon a time", max_tokens=8, temperature=0)
        self.assertEqual(body["choices"][0]["text"], "Once upon a time" + plain["choices"][0]["text"])

    def test_chat_logprobs(self):
        status, _, body = self.server.post_json("/v1/chat/completions", chat_body(
            "Hello", max_tokens=8, temperature=0, logprobs=True, top_logprobs=3))
        self.assertEqual(status, 200, body)
        content = body["choices"][0]["logprobs"]["content"]
        self.assertEqual(len(content), body["usage"]["completion_tokens"])
        for entry in content:
            self.assertEqual(set(entry), {"token", "logprob", "bytes", "top_logprobs"})
            self.assertLessEqual(entry["logprob"], 0.0)
            self.assertEqual(bytes(entry["bytes"]).decode("utf-8", "replace"), entry["token"])
            self.assertEqual(len(entry["top_logprobs"]), 3)
            # Greedy: the chosen token is the most likely one.
            self.assertAlmostEqual(entry["top_logprobs"][0]["logprob"], entry["logprob"], places=4)

    def test_completion_logprobs(self):
        body = self.complete("Once upon a time", max_tokens=8, temperature=0, logprobs=2)
        choice = body["choices"][0]
        lp = choice["logprobs"]
        n = len(lp["tokens"])
        self.assertEqual(n, 8)
        self.assertEqual(len(lp["token_logprobs"]), n)
        self.assertEqual(len(lp["top_logprobs"]), n)
        self.assertEqual(len(lp["text_offset"]), n)
        self.assertEqual("".join(lp["tokens"]), choice["text"])
        for i in range(n - 1):
            self.assertEqual(lp["text_offset"][i + 1] - lp["text_offset"][i], len(lp["tokens"][i]))
        for i, top in enumerate(lp["top_logprobs"]):
            self.assertIn(lp["tokens"][i], top, "the sampled token is among top_logprobs")
            self.assertLessEqual(len(top), 3)

    def test_tools_are_accepted(self):
        tools = [{"type": "function", "function": {
            "name": "get_weather", "description": "The weather in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                           "required": ["city"]}}}]
        messages = [{"role": "user", "content": "Weather in Oslo?"},
                    {"role": "assistant", "content": None, "tool_calls": [
                        {"id": "call_1", "type": "function",
                         "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
                    {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]
        status, _, body = self.server.post_json("/v1/chat/completions", {
            "model": "stories260K", "messages": messages, "tools": tools, "max_tokens": 8,
            "temperature": 0})
        self.assertEqual(status, 200, body)
        choice = body["choices"][0]
        # This story model writes no tool calls: its text comes back as content.
        self.assertIn(choice["finish_reason"], ("stop", "length"))
        self.assertIsInstance(choice["message"]["content"], str)

    def test_models(self):
        status, _, body = self.server.get_json("/v1/models")
        self.assertEqual(status, 200)
        self.assertEqual(body["object"], "list")
        self.assertEqual([m["id"] for m in body["data"]], ["stories260K"])
        self.assertEqual(body["data"][0]["object"], "model")
        self.assertIn("owned_by", body["data"][0])
        self.assertIsInstance(body["data"][0]["created"], int)
        status, _, one = self.server.get_json("/v1/models/stories260K")
        self.assertEqual(status, 200)
        self.assertEqual(one["id"], "stories260K")
        status, _, missing = self.server.get_json("/v1/models/org/other-model")
        self.assertEqual(status, 404)
        self.assertEqual(missing["error"]["code"], "model_not_found")

    def test_tokenize_and_detokenize(self):
        status, _, body = self.server.post_json("/tokenize", {"prompt": "Once upon a time"})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["tokens"], [1, 403, 407, 261, 378])
        self.assertEqual(body["count"], 5)
        self.assertGreater(body["max_model_len"], 0)
        status, _, body = self.server.post_json("/tokenize", {"prompt": "Once upon a time",
                                                              "add_special_tokens": False})
        self.assertEqual(body["tokens"], [403, 407, 261, 378])
        status, _, body = self.server.post_json("/detokenize", {"tokens": [403, 407, 261, 378]})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["prompt"], "Once upon a time")
        status, _, body = self.server.post_json(
            "/tokenize", {"messages": [{"role": "user", "content": "Hi"}]})
        self.assertEqual(status, 200, body)
        self.assertGreater(body["count"], 1)


if __name__ == "__main__":
    main()
