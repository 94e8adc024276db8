"""Serving with layers streamed from disk (--resident-layers 1): the greedy continuation is
still llama.cpp's golden one, the weight stream shows in /metrics (bytes read from disk,
resident/streamed layer gauges, the memory gauges), and a fully resident server reads
nothing from disk."""
import json
import os

from spillway_e2e import Server, ServerTestCase, completion_body, main

GOLDEN_FILE = os.path.join(os.environ.get("SPILLWAY_TESTDATA", "../shared/testdata"), "golden",
                           "stories260K.jsonl")


def golden_case():
    with open(GOLDEN_FILE) as f:
        for line in f:
            case = json.loads(line)
            if case["prompt"] == "Once upon a time":
                return case
    raise AssertionError("no 'Once upon a time' case in " + GOLDEN_FILE)


class StreamedLayers(ServerTestCase):
    SERVER_ARGS = ("--resident-layers", "1", "--prefetch-depth", "1")

    def test_greedy_tokens_are_the_golden_ones_and_the_stream_is_measured(self):
        case = golden_case()
        n = len(case["tokens"])
        status, _, body = self.server.post_json("/v1/completions", completion_body(
            case["prompt"], max_tokens=n, temperature=0, logprobs=1))
        self.assertEqual(status, 200, body)
        self.assertEqual(body["choices"][0]["text"], case["text"])

        # The metrics are published between engine steps: wait for the last one.
        self.server.wait_metric("spillway_weight_bytes_read_total", lambda v: v > 0, source="disk")
        m = self.server.metrics()
        layers = m[("spillway_resident_layers", frozenset())] + m[("spillway_streamed_layers", frozenset())]
        self.assertEqual(m[("spillway_resident_layers", frozenset())], 1)
        self.assertGreater(layers, 1)
        self.assertGreater(m[("spillway_resident_weight_bytes", frozenset())], 0)
        self.assertGreater(m[("spillway_memory_available_bytes", frozenset())], 0)
        self.assertIn(("spillway_memory_pressure_ratio", frozenset()), m)
        self.assertIn(("spillway_residency_shed_total", frozenset()), m)
        self.assertIn(("spillway_io_stall_seconds_total", frozenset()), m)

    def test_the_plan_is_logged(self):
        messages = [r.get("message", "") for r in self.server.logs]
        self.assertTrue(any("resident" in message for message in messages), messages[:20])


class AllResident(ServerTestCase):

    def test_nothing_is_read_from_disk(self):
        status, _, body = self.server.post_json("/v1/completions", completion_body(
            "Once upon a time", max_tokens=8, temperature=0))
        self.assertEqual(status, 200, body)
        self.server.wait_metric("spillway_resident_layers", lambda v: v > 0)
        m = self.server.metrics()
        self.assertEqual(m[("spillway_streamed_layers", frozenset())], 0)
        self.assertEqual(m.get(("spillway_weight_bytes_read_total", frozenset({"source": "disk"}.items())), 0), 0)


if __name__ == "__main__":
    main()
