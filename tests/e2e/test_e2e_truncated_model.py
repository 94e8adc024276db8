"""The model file truncated under a running server (issue #20): errors, not a crash.

Resident weights: `serve` always plans residency (--memory-budget defaults to auto), so every
resident unit (the non-layer set, each resident layer) is copied into anonymous memory at
start, the 1-D tensors into float copies, the tokenizer into its own tables; nothing reads
the file mapping after start, so a truncation cannot raise SIGBUS there (only `spillway bench
--no-streaming` computes from the mapping). Checked: the file truncated to 0 bytes, the
server keeps serving the same greedy tokens, new prompts included.

Streamed weights (--memory-budget 1G --resident-layers 0: every layer is read with pread each
step): the read comes back short, the request gets a 500 / an SSE error event naming the
file, the process stays up (/live answers) with nothing left running or holding KV blocks,
and once the file is complete again the server serves the same greedy tokens as before."""
import os
import shutil
import tempfile
import unittest

from spillway_e2e import MODEL, Server, chat_body, completion_body, main

GREEDY = dict(max_tokens=24, temperature=0, ignore_eos=True)


class TruncatedModel(unittest.TestCase):
    SERVER_ARGS = ()

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.model = os.path.join(self.tmp.name, os.path.basename(MODEL))  # same model id
        shutil.copyfile(MODEL, self.model)
        with open(self.model, "rb") as f:
            self.original = f.read()
        self.server = Server(*self.SERVER_ARGS, model=self.model).wait_ready()

    def tearDown(self):
        self.server.close()
        code = self.server.proc.returncode
        self.tmp.cleanup()
        self.assertEqual(code, 0, "spillway exited with %s; log tail: %s" % (code, self.server.logs[-20:]))

    def greedy(self):
        return self.server.post_json("/v1/completions", completion_body("Once upon a time", **GREEDY))

    def check_fails(self, reason):
        status, _, body = self.greedy()
        self.assertEqual(status, 500, body)
        self.assertIn(os.path.basename(self.model), body["error"]["message"])
        self.assertIn(reason, body["error"]["message"])
        status, _, events, lines = self.server.stream("/v1/chat/completions",
                                                     chat_body("Hello", stream=True, **GREEDY))
        self.assertEqual(status, 200)
        self.assertNotIn("[DONE]", events)
        errors = [e for e in events if isinstance(e, dict) and "error" in e]
        self.assertEqual(len(errors), 1, lines)
        self.assertIn(reason, errors[0]["error"]["message"])
        self.assertIsNone(self.server.proc.poll(), "the server died")
        self.assertEqual(self.server.request("GET", "/live")[0], 200)
        self.server.wait_metric("spillway_requests_running", lambda v: v == 0, timeout=30)
        self.server.wait_metric("spillway_kv_cache_blocks", lambda v: v == 0, timeout=30, state="used")


class TruncatedResidentModel(TruncatedModel):
    def test_truncated_file_does_not_touch_resident_weights(self):
        status, _, before = self.greedy()
        self.assertEqual(status, 200, before)
        os.truncate(self.model, 0)
        status, _, after = self.greedy()
        self.assertEqual(status, 200, after)
        self.assertEqual(after["choices"][0]["text"], before["choices"][0]["text"])
        status, _, events, _ = self.server.stream("/v1/chat/completions", chat_body(
            "A girl named Lily saw a big red ball in the garden", stream=True, **GREEDY))
        self.assertEqual(status, 200)
        self.assertEqual(events[-1], "[DONE]")
        self.assertEqual(self.server.metric("spillway_streamed_layers"), 0)


class TruncatedStreamedModel(TruncatedModel):
    SERVER_ARGS = ("--memory-budget", "1G", "--resident-layers", "0", "--read-mode", "buffered")

    def test_truncated_streamed_file_is_an_error_and_recovers(self):
        status, _, before = self.greedy()
        self.assertEqual(status, 200, before)
        os.truncate(self.model, len(self.original) // 2)
        self.check_fails("shorter than when it was opened")
        with open(self.model, "r+b") as f:
            f.write(self.original)
        status, _, after = self.greedy()
        self.assertEqual(status, 200, after)
        self.assertEqual(after["choices"][0]["text"], before["choices"][0]["text"])



if __name__ == "__main__":
    main()
