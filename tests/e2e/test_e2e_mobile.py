"""MoBiLE big-little decoding through `spillway serve` on the trained qwen3moe eval model:
with MoBiLE off by default, a request's "moe" object turns it on for that request only;
fallback_confidence 1 gives the full-k text and 0 the little-k text, and the little-k text
is what `spillway run --moe-little-experts 2 --moe-fallback-confidence 0` (the single-sequence
path, not the server) prints up to the end-of-generation token; the spillway_moe_little/fallback_tokens_total counters move by
exactly the decode tokens; a server started with --moe-little-experts auto
--moe-fallback-confidence 0 gives the little text without any field; invalid "moe" fields are
400s naming the field, and a dense model refuses the field."""
import json
import os
import subprocess
import time

from spillway_e2e import BIN, MODEL, Server, ServerTestCase, main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MOE = os.path.join(ROOT, "models", "eval", "qwen3moe", "qwen3moe-tasks-f16.gguf")
MODEL_ID = "qwen3moe-tasks-f16"
# Items of the model's tasks (tools/train/tasks.py): addition, sorting, key-value recall.
PROMPTS = ["6657+9707=", "sort:9988652911=", "kv:p2,y0,t6,c6,q9,x9,z0,o7?c="]
MAX_TOKENS = 12


def completion(prompt, **fields):
    body = {"model": MODEL_ID, "prompt": prompt, "max_tokens": MAX_TOKENS, "temperature": 0,
            "ignore_eos": True}
    body.update(fields)
    return body


def run_cli(prompt, *flags):
    out = subprocess.run([BIN, "run", "--model", MOE, "--prompt", prompt, "--max-tokens", str(MAX_TOKENS),
                          "--temperature", "0", "--json", "--memory-budget", "4G", *flags],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


class ServedMobile(ServerTestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server(model=MOE).wait_ready()

    def texts(self, server, **fields):
        out = []
        for p in PROMPTS:
            status, _, body = server.post_json("/v1/completions", completion(p, **fields))
            self.assertEqual(status, 200, body)
            self.assertEqual(body["usage"]["completion_tokens"], MAX_TOKENS)
            out.append(body["choices"][0]["text"])
        return out

    def counters(self, server):
        return (server.metric("spillway_moe_little_tokens_total"),
                server.metric("spillway_moe_fallback_tokens_total"))

    def expect_counters(self, server, want):
        # The engine publishes its counters after the step that finished the last response.
        deadline = time.time() + 10
        while self.counters(server) != want and time.time() < deadline:
            time.sleep(0.05)
        self.assertEqual(self.counters(server), want)

    def test_request_field_gamma_one_is_full_and_zero_is_little(self):
        decode = len(PROMPTS) * (MAX_TOKENS - 1)  # the first token comes from the prefill
        little0, fallback0 = self.counters(self.server)
        full = self.texts(self.server)
        self.expect_counters(self.server, (little0, fallback0))  # off by default
        self.assertEqual(self.texts(self.server, moe={"fallback_confidence": 1.0}), full)
        self.expect_counters(self.server, (little0, fallback0 + decode))
        little = self.texts(self.server, moe={"little_experts": 2, "fallback_confidence": 0})
        self.expect_counters(self.server, (little0 + decode, fallback0 + decode))
        self.assertNotEqual(little, full)  # (past the end-of-generation token at least)
        self.assertEqual(self.texts(self.server, moe={"little_experts": "auto", "fallback_confidence": 0}), little)
        self.assertEqual(self.texts(self.server, moe={"little_experts": "off", "fallback_confidence": 0}), full)
        # The single-sequence path of `spillway run` (which stops at the end-of-generation
        # token) gives the same texts up to there, and counts its decode steps.
        for prompt, want_little, want_full in zip(PROMPTS, little, full):
            r = run_cli(prompt, "--moe-little-experts", "2", "--moe-fallback-confidence", "0")
            self.assertTrue(r["text"] and want_little.startswith(r["text"]), (r["text"], want_little))
            self.assertEqual(r["mobile"]["moe_fallback_tokens_total"], 0)
            self.assertGreaterEqual(r["mobile"]["moe_little_tokens_total"], len(r["tokens"]) - 1)
            r = run_cli(prompt, "--moe-little-experts", "auto", "--moe-fallback-confidence", "1")
            self.assertTrue(r["text"] and want_full.startswith(r["text"]), (r["text"], want_full))
            self.assertEqual(r["mobile"]["moe_little_tokens_total"], 0)
            self.assertGreaterEqual(r["mobile"]["moe_fallback_tokens_total"], len(r["tokens"]) - 1)
        # A server with MoBiLE on by default.
        on = Server("--moe-little-experts", "auto", "--moe-fallback-confidence", "0", model=MOE).wait_ready()
        try:
            before = (1, 0)  # the warm-up generation (2 tokens) ran MoBiLE too
            self.expect_counters(on, before)
            self.assertEqual(self.texts(on), little)
            self.expect_counters(on, (before[0] + decode, before[1]))
            self.assertEqual(self.texts(on, moe={"fallback_confidence": 1}), full)
        finally:
            on.close()

    def test_invalid_fields_are_400s_naming_the_field(self):
        cases = [
            ({"little_experts": 5}, "moe.little_experts"),     # the model's top-k is 4
            ({"little_experts": 0}, "moe.little_experts"),
            ({"little_experts": "many"}, "moe.little_experts"),
            ({"fallback_confidence": 1.5}, "moe.fallback_confidence"),
            ({"fallback_confidence": "high"}, "moe.fallback_confidence"),
            ({"gamma": 0.5}, "moe.gamma"),
        ]
        for moe, param in cases:
            status, _, body = self.server.post_json("/v1/completions", completion(PROMPTS[0], moe=moe))
            self.assertEqual(status, 400, (moe, body))
            self.assertEqual(body["error"]["param"], param, body)
        status, _, body = self.server.post_json("/v1/completions", completion(PROMPTS[0], moe=0.5))
        self.assertEqual(status, 400, body)
        self.assertEqual(body["error"]["param"], "moe", body)

    def test_a_dense_model_refuses_the_field(self):
        dense = Server(model=MODEL).wait_ready()
        try:
            status, _, body = dense.post_json("/v1/completions", {
                "model": "stories260K", "prompt": "Once upon a time", "max_tokens": 4, "moe": {"little_experts": 1}})
            self.assertEqual(status, 400, body)
            self.assertEqual(body["error"]["param"], "moe", body)
            self.assertIn("no MoE layers", body["error"]["message"])
        finally:
            dense.close()


if __name__ == "__main__":
    main()
