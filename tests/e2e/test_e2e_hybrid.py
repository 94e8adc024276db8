"""A hybrid model (qwen35: Gated DeltaNet + gated attention, recurrent-state slots) served end
to end: 8 concurrent greedy streams give each stream's solo text (and llama.cpp's golden
text), and a second chat turn resumes from a recurrent-state snapshot (cached_tokens > 0)."""
import json
import os
import threading

from spillway_e2e import ServerTestCase, main

TESTDATA = os.environ.get("SPILLWAY_TESTDATA", "")
MODEL = os.path.join(TESTDATA, "models", "qwen35-tiny-peaked-f16.gguf")
GOLDEN = os.path.join(TESTDATA, "golden-wave2", "qwen35-tiny-peaked-f16.jsonl")


class Hybrid(ServerTestCase):

    @classmethod
    def setUpClass(cls):
        from spillway_e2e import Server
        cls.server = Server("--max-running", "8", model=MODEL).wait_ready()
        status, _, body = cls.server.request("GET", "/v1/models")
        cls.model = json.loads(body)["data"][0]["id"]
        with open(GOLDEN) as f:
            cls.golden = [json.loads(line) for line in f if line.strip()]

    def complete(self, prompt, max_tokens=32):
        status, _, body = self.server.post_json("/v1/completions", {
            "model": self.model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0})
        self.assertEqual(status, 200, body)
        return body

    def test_eight_concurrent_streams_equal_solo_and_golden(self):
        prompts = [g["prompt"] for g in self.golden] + [self.golden[i]["prompt"] for i in (4, 4, 1)]
        solo = [self.complete(p)["choices"][0]["text"] for p in prompts]
        self.assertEqual(solo[0], self.golden[0]["text"])  # no near-tie in this record
        together = [None] * len(prompts)

        def run(i):
            together[i] = self.complete(prompts[i])["choices"][0]["text"]
        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(prompts))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(together, solo)
        self.assertGreaterEqual(self.server.metric("spillway_recurrent_state_slots", state="free"), 0)

    def test_second_chat_turn_resumes_from_a_state_snapshot(self):
        long_prompt = self.golden[4]["prompt"]
        messages = [{"role": "user", "content": long_prompt}]
        status, _, first = self.server.post_json("/v1/chat/completions", {
            "model": self.model, "messages": messages, "max_tokens": 8, "temperature": 0})
        self.assertEqual(status, 200, first)
        messages += [{"role": "assistant", "content": first["choices"][0]["message"]["content"]},
                     {"role": "user", "content": "And then?"}]
        status, _, second = self.server.post_json("/v1/chat/completions", {
            "model": self.model, "messages": messages, "max_tokens": 8, "temperature": 0})
        self.assertEqual(status, 200, second)
        cached = second["usage"]["prompt_tokens_details"]["cached_tokens"]
        self.assertGreater(cached, 0)
        self.assertLess(cached, second["usage"]["prompt_tokens"])
        self.assertGreater(self.server.metric("spillway_recurrent_state_snapshots"), 0)
        self.assertGreater(self.server.metric("spillway_recurrent_state_snapshot_bytes"), 0)
        self.assertGreater(self.server.metric("spillway_recurrent_state_snapshot_copies_total", op="restore"), 0)
        self.assertGreater(self.server.metric("spillway_recurrent_state_snapshot_copy_seconds_total", op="save"), 0)


if __name__ == "__main__":
    main()
