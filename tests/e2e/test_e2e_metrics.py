"""/metrics: Prometheus text format 0.0.4 that parses, the serving metrics and the vllm:
aliases are there and move with the traffic, and `promtool check metrics` passes on the
exposition without the vllm: aliases (their ':' breaks its naming lint on purpose)."""
import shutil
import subprocess

from prometheus_client.parser import text_string_to_metric_families

from spillway_e2e import ServerTestCase, chat_body, completion_body, main


class Metrics(ServerTestCase):

    def test_exposition_parses_and_has_the_serving_metrics(self):
        status, _, body = self.server.post_json("/v1/completions", completion_body("Once upon a time", max_tokens=12,
                                                                                   temperature=0))
        self.assertEqual(status, 200, body)
        text, headers = self.server.metrics_text()
        self.assertTrue(headers["content-type"].startswith("text/plain; version=0.0.4"))
        families = {f.name: f for f in text_string_to_metric_families(text)}
        expected = {
            "spillway_http_requests": "counter",
            "spillway_requests_running": "gauge",
            "spillway_requests_waiting": "gauge",
            "spillway_prompt_tokens": "counter",
            "spillway_generation_tokens": "counter",
            "spillway_requests_finished": "counter",
            "spillway_time_to_first_token_seconds": "histogram",
            "spillway_inter_token_latency_seconds": "histogram",
            "spillway_e2e_request_latency_seconds": "histogram",
            "spillway_request_queue_time_seconds": "histogram",
            "spillway_kv_cache_usage_ratio": "gauge",
            "spillway_kv_cache_blocks": "gauge",
            "spillway_prefix_cache_queried_tokens": "counter",
            "spillway_prefix_cache_hit_tokens": "counter",
            "spillway_preemptions": "counter",
            "spillway_step_batch_tokens": "histogram",
            "spillway_step_plans": "gauge",
            "spillway_diffusion_tokens_per_forward": "histogram",
            "spillway_diffusion_steps_per_block": "histogram",
            "spillway_diffusion_forced_commits": "counter",
            "spillway_diffusion_repair_changes": "counter",
            "spillway_diffusion_eos_tail_dropped_positions": "counter",
            "spillway_diffusion_repeat_guard_trips": "counter",
            "spillway_diffusion_canvases_running": "gauge",
            "vllm:num_requests_waiting": "gauge",
            "vllm:num_requests_running": "gauge",
            "vllm:kv_cache_usage_perc": "gauge",
            "vllm:cache_config_info": "gauge",
        }
        for name, kind in expected.items():
            with self.subTest(name=name):
                self.assertIn(name, families)
                self.assertEqual(families[name].type, kind)
        for family in families.values():
            for sample in family.samples:
                self.assertNotIn("id", sample.labels, "no unbounded labels")
        info = families["vllm:cache_config_info"].samples[0]
        self.assertEqual(info.labels["block_size"], "16")
        self.assertGreater(int(info.labels["num_gpu_blocks"]), 0)
        self.assertEqual(info.value, 1.0)

        m = self.server.metrics()
        self.assertGreaterEqual(m[("spillway_generation_tokens_total", frozenset())], 12)
        self.assertGreaterEqual(m[("spillway_prompt_tokens_total", frozenset())], 5)
        self.assertGreaterEqual(m[("spillway_http_requests_total",
                                   frozenset({"endpoint": "/v1/completions", "status": "200"}.items()))], 1)
        self.assertGreaterEqual(m[("spillway_time_to_first_token_seconds_count", frozenset())], 1)
        self.assertGreaterEqual(m[("spillway_e2e_request_latency_seconds_count", frozenset())], 1)
        self.assertGreaterEqual(m[("spillway_inter_token_latency_seconds_count", frozenset())], 1)
        self.assertGreaterEqual(m[("spillway_step_batch_tokens_count", frozenset())], 1)
        usage = m[("vllm:kv_cache_usage_perc", frozenset({"model_name": "stories260K"}.items()))]
        self.assertGreaterEqual(usage, 0.0)
        self.assertLessEqual(usage, 1.0)

    def test_errors_are_counted_by_status(self):
        labels = frozenset({"endpoint": "/v1/chat/completions", "status": "400"}.items())
        before = self.server.metrics().get(("spillway_http_requests_total", labels), 0)
        self.server.post_json("/v1/chat/completions", chat_body("x", temperature=9))
        after = self.server.metrics().get(("spillway_http_requests_total", labels), 0)
        self.assertEqual(after, before + 1)

    def test_promtool_check_metrics(self):
        promtool = shutil.which("promtool")
        if not promtool:
            self.skipTest("promtool (Debian package prometheus) is not installed")
        self.server.post_json("/v1/completions", completion_body("Hi", max_tokens=2))
        text, _ = self.server.metrics_text()
        without_aliases = "".join(line + "\n" for line in text.splitlines() if "vllm:" not in line)
        proc = subprocess.run([promtool, "check", "metrics"], input=without_aliases, text=True,
                              capture_output=True, timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)


if __name__ == "__main__":
    main()
