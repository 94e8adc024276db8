"""Faults in streamed weight reads (issue #20): every decoder layer of the golden model is
streamed (--memory-budget with --resident-layers 0), and the debug fault injection of
engine/platform/read_fault_injection.h (SPILLWAY_DEBUG_READ_FAULTS names a control file)
makes the reads fail with EIO, or end short as if the file were truncated, then work again.

Checked: while reads fail, a non-streamed request gets a 500 OpenAI error body naming the
model file and the fault, a streamed one an SSE error event (no [DONE]); the process stays
up, /live and /metrics answer, nothing stays running or holds KV blocks; once reads work
again the server serves the same greedy tokens as before the faults (the failed steps left
nothing wrong behind, e.g. in the prefix cache). The same for the MoE expert cache's reads
(every layer resident, experts streamed)."""
import json
import os
import tempfile
import time
import unittest

from spillway_e2e import MODEL, Server, chat_body, completion_body, main

GREEDY = dict(max_tokens=24, temperature=0, ignore_eos=True)


class ReadFaults(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.control = os.path.join(cls.tmp.name, "read-faults")
        cls.server = Server("--memory-budget", "1G", "--resident-layers", "0", "--read-mode", "buffered",
                            env={"SPILLWAY_DEBUG_READ_FAULTS": cls.control}).wait_ready()

    @classmethod
    def tearDownClass(cls):
        cls.server.close()
        code = cls.server.proc.returncode
        cls.tmp.cleanup()
        if code != 0:
            raise AssertionError("spillway exited with %s; log tail: %s" % (code, cls.server.logs[-20:]))

    def set_fault(self, word):
        if word is None:
            if os.path.exists(self.control):
                os.unlink(self.control)
        else:
            with open(self.control, "w") as f:
                f.write(word)

    def tearDown(self):
        self.set_fault(None)

    def greedy_text(self, prompt):
        status, _, body = self.server.post_json("/v1/completions", completion_body(prompt, **GREEDY))
        self.assertEqual(status, 200, body)
        self.assertEqual(body["usage"]["completion_tokens"], GREEDY["max_tokens"])
        return body["choices"][0]["text"]

    def check_idle(self):
        """Nothing running or waiting, no KV block held by a sequence."""
        # The engine publishes its gauges after the step that finished the request, which can
        # come after the response: wait for them rather than read them once.
        self.server.wait_metric("spillway_requests_running", lambda v: v == 0, timeout=30)
        self.server.wait_metric("spillway_requests_waiting", lambda v: v == 0, timeout=30)
        self.server.wait_metric("spillway_kv_cache_blocks", lambda v: v == 0, timeout=30, state="used")

    def check_fault(self, word, reason):
        self.set_fault(word)
        status, _, body = self.server.post_json("/v1/completions", completion_body("Once upon a time", **GREEDY))
        self.assertEqual(status, 500, body)
        message = body["error"]["message"]
        self.assertIn(os.path.basename(MODEL), message)
        self.assertIn(reason, message)
        self.assertIn("injected fault", message)
        self.assertEqual(body["error"]["type"], "server_error", body)

        status, _, events, lines = self.server.stream("/v1/chat/completions",
                                                     chat_body("Tell me a story", stream=True, **GREEDY))
        self.assertEqual(status, 200)
        self.assertNotIn("[DONE]", events)
        errors = [e for e in events if isinstance(e, dict) and "error" in e]
        self.assertEqual(len(errors), 1, lines)
        self.assertIn(reason, errors[0]["error"]["message"])

        self.assertIsNone(self.server.proc.poll(), "the server exited")
        self.assertEqual(self.server.request("GET", "/live")[0], 200)
        self.check_idle()

    def test_eio_then_short_reads_fail_requests_and_the_server_recovers(self):
        before = self.greedy_text("Once upon a time")
        other = self.greedy_text("The little dog")
        self.check_fault("eio", "Input/output error")
        self.set_fault(None)
        self.assertEqual(self.greedy_text("Once upon a time"), before)
        self.check_fault("short", "shorter than when it was opened")
        self.set_fault(None)
        self.assertEqual(self.greedy_text("Once upon a time"), before)
        self.assertEqual(self.greedy_text("The little dog"), other)
        # Concurrent streams after the faults all complete.
        status, _, events, _ = self.server.stream("/v1/completions", completion_body(
            "Once upon a time", stream=True, n=4, max_tokens=16, temperature=1.0, seed=3))
        self.assertEqual(status, 200)
        self.assertEqual(events[-1], "[DONE]")
        self.check_idle()
        failed = self.server.metric("spillway_requests_finished_total", finish_reason="error")
        self.assertGreaterEqual(failed, 4)


class ExpertReadFaults(unittest.TestCase):
    """The MoE expert cache reads through the same DirectReader: every layer resident, routed
    experts in a cache of 31% of them (misses every step), EIO on their reads."""
    MOE = os.path.join(os.environ.get("SPILLWAY_TESTDATA", ""), "models", "qwen35moe-tiny-peaked-q8_0.gguf")

    def test_failed_expert_reads_fail_the_request_and_the_cache_recovers(self):
        with tempfile.TemporaryDirectory() as tmp:
            control = os.path.join(tmp, "read-faults")
            server = Server("--memory-budget", "1G", "--resident-layers", "all", "--expert-cache", "300K",
                            "--read-mode", "buffered", model=self.MOE,
                            env={"SPILLWAY_DEBUG_READ_FAULTS": control}).wait_ready()
            try:
                body = {"model": "qwen35moe-tiny-peaked-q8_0", "prompt": "Once upon a time", **GREEDY}
                status, _, before = server.post_json("/v1/completions", body)
                self.assertEqual(status, 200, before)
                self.assertEqual(server.metric("spillway_streamed_layers"), 0)
                with open(control, "w") as f:
                    f.write("eio")
                status, _, failed = server.post_json("/v1/completions", body)
                self.assertEqual(status, 500, failed)
                self.assertIn("Input/output error (injected fault)", failed["error"]["message"])
                os.unlink(control)
                status, _, after = server.post_json("/v1/completions", body)
                self.assertEqual(status, 200, after)
                self.assertEqual(after["choices"][0]["text"], before["choices"][0]["text"])
                server.wait_metric("spillway_kv_cache_blocks", lambda v: v == 0, timeout=30, state="used")
            finally:
                server.close()
            self.assertEqual(server.proc.returncode, 0, server.logs[-20:])


if __name__ == "__main__":
    main()
