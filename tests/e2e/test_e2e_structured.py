"""Structured output through the HTTP API on the golden model (stories260K, which never writes
JSON by itself): response_format json_object / json_schema, vLLM's structured_outputs and
guided_*, llama-server's json_schema / grammar, forced tool calls (tool_choice "required" and
named), streamed == whole; and every bad constraint is a 400 invalid_request_error whose param
names the field (and, for JSON Schema, the keyword's JSON pointer) while the server keeps
serving. Outputs are checked with python3-jsonschema / re, never against earlier output."""
import json
import re

import jsonschema

from spillway_e2e import ServerTestCase, chat_body, completion_body, main

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "pet": {"enum": ["cat", "dog", "bird"]},
    },
    "required": ["name", "age", "pet"],
    "additionalProperties": False,
}

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "strict": True,
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "maxLength": 12},
        "unit": {"enum": ["c", "f"]}},
        "required": ["city", "unit"], "additionalProperties": False}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "parameters": {"type": "object", "properties": {
        "zone": {"enum": ["utc", "local"]}}, "required": ["zone"], "additionalProperties": False}}}


class Structured(ServerTestCase):
    SERVER_ARGS = ("--max-running", "8")

    def post(self, path, body):
        return self.server.post_json(path, body)

    def chat(self, **fields):
        fields.setdefault("temperature", 0)
        fields.setdefault("max_tokens", 120)
        status, _, body = self.post("/v1/chat/completions", chat_body("Tell me about a person.", **fields))
        self.assertEqual(status, 200, body)
        return body

    def stream_chat(self, **fields):
        fields.setdefault("temperature", 0)
        fields.setdefault("max_tokens", 120)
        status, _, events, _ = self.server.stream("/v1/chat/completions",
                                                  chat_body("Tell me about a person.", stream=True, **fields))
        self.assertEqual(status, 200, events)
        content, finish, calls = "", None, {}
        for chunk in events:
            if chunk == "[DONE]":
                break
            for c in chunk["choices"]:
                delta = c.get("delta", {})
                content += delta.get("content") or ""
                for tc in delta.get("tool_calls") or []:
                    slot = calls.setdefault(tc["index"], {"name": "", "arguments": ""})
                    fn = tc.get("function", {})
                    slot["name"] += fn.get("name") or ""
                    slot["arguments"] += fn.get("arguments") or ""
                finish = c.get("finish_reason") or finish
        return content, finish, [calls[i] for i in sorted(calls)]

    def test_json_schema_output_validates_and_streams_the_same(self):
        rf = {"type": "json_schema", "json_schema": {"name": "person", "strict": True, "schema": PERSON}}
        body = self.chat(response_format=rf)
        choice = body["choices"][0]
        self.assertEqual(choice["finish_reason"], "stop", choice)
        jsonschema.validate(json.loads(choice["message"]["content"]), PERSON)
        content, finish, _ = self.stream_chat(response_format=rf)
        self.assertEqual(content, choice["message"]["content"])
        self.assertEqual(finish, "stop")
        # Unconstrained, the same request is not JSON.
        plain = self.chat(max_tokens=40)["choices"][0]["message"]["content"]
        with self.assertRaises(ValueError):
            json.loads(plain)

    def test_json_object_is_an_object(self):
        body = self.chat(response_format={"type": "json_object"}, max_tokens=200)
        choice = body["choices"][0]
        if choice["finish_reason"] == "stop":
            self.assertIsInstance(json.loads(choice["message"]["content"]), dict)
        else:  # cut by max_tokens: still the start of an object
            self.assertEqual(choice["finish_reason"], "length")
            self.assertTrue(choice["message"]["content"].lstrip().startswith("{"))

    def test_vllm_and_llama_server_fields(self):
        for fields, check in [
            ({"guided_choice": ["yes", "no"]}, lambda t: self.assertIn(t, ("yes", "no"))),
            ({"structured_outputs": {"choice": ["red", "green"]}}, lambda t: self.assertIn(t, ("red", "green"))),
            ({"guided_regex": "[0-9]{3}-[a-z]{2,5}"}, lambda t: self.assertRegex(t, r"^[0-9]{3}-[a-z]{2,5}$")),
            ({"structured_outputs": {"regex": "(cat|dog)s?"}}, lambda t: self.assertRegex(t, r"^(cat|dog)s?$")),
            ({"guided_json": PERSON}, lambda t: jsonschema.validate(json.loads(t), PERSON)),
            ({"structured_outputs": {"json": json.dumps(PERSON)}}, lambda t: jsonschema.validate(json.loads(t), PERSON)),
            ({"json_schema": PERSON}, lambda t: jsonschema.validate(json.loads(t), PERSON)),
            ({"grammar": 'root ::= "A" [0-9] [0-9]? "!"'}, lambda t: self.assertRegex(t, r"^A[0-9][0-9]?!$")),
            ({"guided_grammar": 'root ::= ("ab" | "cd")+ "."'}, lambda t: self.assertRegex(t, r"^(ab|cd)+\.$")),
        ]:
            with self.subTest(fields=fields):
                for path, body in [("/v1/completions", completion_body("Once upon a time", temperature=0, max_tokens=60, **fields)),
                                   ("/v1/chat/completions", chat_body("Hi", temperature=0, max_tokens=60, **fields))]:
                    status, _, out = self.post(path, body)
                    self.assertEqual(status, 200, out)
                    choice = out["choices"][0]
                    text = choice["text"] if "text" in choice else choice["message"]["content"]
                    self.assertEqual(choice["finish_reason"], "stop", (path, text))
                    check(text)

    def test_tool_choice_required_returns_tool_calls(self):
        for stream in (False, True):
            with self.subTest(stream=stream):
                fields = dict(tools=[WEATHER, TIME], tool_choice="required", parallel_tool_calls=False)
                if stream:
                    content, finish, calls = self.stream_chat(**fields)
                else:
                    choice = self.chat(**fields)["choices"][0]
                    finish, calls = choice["finish_reason"], [c["function"] for c in choice["message"]["tool_calls"]]
                    self.assertIsNone(choice["message"]["content"])
                    self.assertTrue(all(c["id"].startswith("call_") for c in choice["message"]["tool_calls"]))
                self.assertEqual(finish, "tool_calls")
                self.assertEqual(len(calls), 1)
                tool = {"get_weather": WEATHER, "get_time": TIME}[calls[0]["name"]]
                jsonschema.validate(json.loads(calls[0]["arguments"]), tool["function"]["parameters"])

    def test_named_tool_choice_returns_exactly_that_call_with_stop(self):
        named = {"type": "function", "function": {"name": "get_time"}}
        for stream in (False, True):
            with self.subTest(stream=stream):
                if stream:
                    _, finish, calls = self.stream_chat(tools=[WEATHER, TIME], tool_choice=named)
                else:
                    choice = self.chat(tools=[WEATHER, TIME], tool_choice=named)["choices"][0]
                    finish, calls = choice["finish_reason"], [c["function"] for c in choice["message"]["tool_calls"]]
                self.assertEqual(finish, "stop")
                self.assertEqual([c["name"] for c in calls], ["get_time"])
                jsonschema.validate(json.loads(calls[0]["arguments"]), TIME["function"]["parameters"])

    def test_max_tokens_cut_is_length(self):
        rf = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}}
        choice = self.chat(response_format=rf, max_tokens=4)["choices"][0]
        self.assertEqual(choice["finish_reason"], "length")

    def test_bad_constraints_are_400s_and_the_server_keeps_serving(self):
        tool_bad = {"type": "function", "function": {"name": "f", "parameters": {
            "type": "object", "properties": {"x": {"type": "number", "multipleOf": 3}}}}}
        cases = [
            (chat_body("x", response_format={"type": "json_schema", "json_schema": {
                "name": "p", "schema": {"type": "object", "properties": {"a": {"not": {"type": "null"}}}}}}),
             "response_format.json_schema.schema#/properties/a/not", "not"),
            (chat_body("x", structured_outputs={"json": {"if": {"type": "string"}}}), "structured_outputs.json#/if", "if"),
            (chat_body("x", guided_json={"type": "object", "patternProperties": {"^a": {}}}),
             "guided_json#/patternProperties", "patternProperties"),
            (chat_body("x", json_schema={"$ref": "http://example.com/s.json"}), "json_schema#/$ref", "$ref"),
            (chat_body("x", guided_regex="(ab"), "guided_regex", None),
            (chat_body("x", grammar="root ::= missing"), "grammar", "missing"),
            (chat_body("x", structured_outputs={"grammar": "root ::= ("}), "structured_outputs.grammar", None),
            (chat_body("x", tool_choice="required"), "tool_choice", "tools"),
            (chat_body("x", tools=[WEATHER], tool_choice={"type": "function", "function": {"name": "nope"}}),
             "tool_choice.function.name", "nope"),
            (chat_body("x", tools=[tool_bad], tool_choice="required"),
             "tools[0].function.parameters#/properties/x/multipleOf", "multipleOf"),
            (chat_body("x", response_format={"type": "json_object"}, guided_regex="a"), "guided_regex", None),
            # Over the compile caps (a DFA of 2^22 states): an error, not a hang. Which cap
            # trips first, states or seconds, depends on the build's speed.
            (chat_body("x", guided_regex="(a|b)*a(a|b){22}"), "guided_regex", ("too large", "longer than its cap")),
        ]
        for body, param, word in cases:
            with self.subTest(param=param):
                status, _, out = self.post("/v1/chat/completions", body)
                self.assertEqual(status, 400, out)
                self.assertEqual(out["error"]["type"], "invalid_request_error")
                self.assertEqual(out["error"]["param"], param, out)
                if isinstance(word, tuple):
                    self.assertTrue(any(w in out["error"]["message"] for w in word), out)
                elif word:
                    self.assertIn(word, out["error"]["message"])
        # Still serving, constrained and not.
        self.assertEqual(self.chat(guided_choice=["ok"])["choices"][0]["message"]["content"], "ok")
        self.assertEqual(self.chat(max_tokens=4)["choices"][0]["finish_reason"], "length")

    def test_metrics(self):
        before = self.server.metric("spillway_grammar_constrained_requests_total") or 0
        hits_before = self.server.metric("spillway_grammar_compile_cache_requests_total", result="hit") or 0
        for _ in range(2):
            self.chat(guided_choice=["alpha", "beta"])
        self.assertEqual(self.server.metric("spillway_grammar_constrained_requests_total"), before + 2)
        self.assertGreaterEqual(self.server.metric("spillway_grammar_compile_cache_requests_total", result="hit"),
                                hits_before + 1)
        self.assertGreater(self.server.metric("spillway_grammar_mask_seconds_count"), 0)
        self.assertGreater(self.server.metric("spillway_grammar_compile_seconds_count"), 0)
        self.assertGreater(self.server.metric("spillway_grammar_forced_tokens_total"), 0)


if __name__ == "__main__":
    main()
