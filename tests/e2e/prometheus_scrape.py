"""A real Prometheus (Debian's `prometheus`) scrapes a real `spillway serve`, both on free
loopback ports:
  - `promtool check metrics` passes on /metrics with the vllm: aliases left out (their ':'
    breaks Prometheus' naming lint on purpose, API.md "Metrics");
  - Prometheus' HTTP API returns spillway_* series (and the vllm: aliases) for the target;
  - deploy/prometheus (scrape config, alert rules) passes `promtool check`;
  - every query of the Grafana dashboard (deploy/grafana/dashboards/spillway.json) and of the
    alert rules parses in Prometheus, and every metric they name is exported by /metrics or
    documented in README.md (the residency metrics of "Models bigger than memory").
Run by ctest as e2e.prometheus_scrape; stdlib only.

Environment (set by tests/CMakeLists.txt):
  SPILLWAY_BIN         the spillway executable
  SPILLWAY_TEST_MODEL  the model to serve (the golden stories260K.gguf)
  SPILLWAY_SOURCE_DIR  the repository root
"""
import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request

BIN = os.environ.get("SPILLWAY_BIN", "spillway")
MODEL = os.environ.get("SPILLWAY_TEST_MODEL", "")
SOURCE_DIR = os.environ.get("SPILLWAY_SOURCE_DIR",
                            os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
START_TIMEOUT = 180.0
METRIC_NAME = re.compile(r"\b(spillway_[a-z0-9_]+|vllm:[a-z0-9_:]+)")


def tool(name):
    path = shutil.which(name) or ("/usr/bin/" + name if os.path.exists("/usr/bin/" + name) else None)
    if not path:
        raise RuntimeError("%s is not installed (scripts/install-deps.sh installs Debian's prometheus)" % name)
    return path


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url, timeout=30):
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.status, resp.read().decode()


def http_post_json(url, body, timeout=300):
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return resp.status, json.loads(resp.read())


class Process:
    """A child process whose stderr lines are collected; stopped with SIGTERM."""

    def __init__(self, args, log_path):
        self.log = open(log_path, "w")
        self.lines = queue.Queue()
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.PIPE, text=True,
                                     env=clean_env())
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stderr:
            self.log.write(line)
            self.log.flush()
            self.lines.put(line)
        self.lines.put(None)

    def stop(self, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.reader.join(timeout=10)
        self.log.close()
        return self.proc.returncode


def clean_env():
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPILLWAY_") or k == "SPILLWAY_ISA"}
    return env


class PrometheusScrapesSpillway(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix="spillway-prometheus-%d-" % os.getpid())
        cls.spillway = None
        cls.prometheus = None
        try:
            cls._start_spillway()
            cls._start_prometheus()
        except BaseException:
            cls._cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        code = cls._cleanup()
        if code not in (0, None):
            raise AssertionError("spillway exited with %s after SIGTERM" % code)

    @classmethod
    def _cleanup(cls):
        code = None
        if cls.prometheus:
            cls.prometheus.stop()
        if cls.spillway:
            code = cls.spillway.stop()
        shutil.rmtree(cls.work, ignore_errors=True)
        return code

    @classmethod
    def _start_spillway(cls):
        cls.spillway = Process([BIN, "serve", "--model", MODEL, "--host", "127.0.0.1", "--port", "0",
                                "--log-format", "json"], os.path.join(cls.work, "spillway.log"))
        deadline = time.time() + START_TIMEOUT
        port = None
        while port is None and time.time() < deadline:
            try:
                line = cls.spillway.lines.get(timeout=1)
            except queue.Empty:
                continue
            if line is None:
                raise RuntimeError("spillway exited before listening")
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if record.get("message") == "listening":
                port = int(record["port"])
        if port is None:
            raise RuntimeError("spillway did not log its port")
        cls.spillway_url = "http://127.0.0.1:%d" % port
        while time.time() < deadline:
            try:
                if http_get(cls.spillway_url + "/health")[0] == 200:
                    break
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.05)
        else:
            raise RuntimeError("spillway did not become healthy")
        # Traffic, so that counters and histograms have samples.
        for prompt in ("Once upon a time", "The cat"):
            status, body = http_post_json(cls.spillway_url + "/v1/completions",
                                          {"model": "stories260K", "prompt": prompt, "max_tokens": 8})
            assert status == 200, body

    @classmethod
    def _start_prometheus(cls):
        rules = os.path.join(SOURCE_DIR, "deploy", "prometheus", "alerts.yml")
        config = os.path.join(cls.work, "prometheus.yml")
        with open(config, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    "rule_files:\n  - %s\n"
                    "scrape_configs:\n  - job_name: spillway\n    static_configs:\n"
                    "      - targets: ['%s']\n" % (json.dumps(rules), cls.spillway_url[len("http://"):]))
        cls.config = config
        for attempt in range(5):  # the free port can be taken between probe and bind
            port = free_port()
            cls.prometheus = Process([tool("prometheus"), "--config.file=" + config,
                                      "--storage.tsdb.path=" + os.path.join(cls.work, "data-%d" % attempt),
                                      "--web.listen-address=127.0.0.1:%d" % port,
                                      "--storage.tsdb.retention.time=1h"],
                                     os.path.join(cls.work, "prometheus-%d.log" % attempt))
            cls.prometheus_url = "http://127.0.0.1:%d" % port
            deadline = time.time() + 60
            while time.time() < deadline and cls.prometheus.proc.poll() is None:
                try:
                    if http_get(cls.prometheus_url + "/-/ready", timeout=5)[0] == 200:
                        return
                except (urllib.error.URLError, OSError):
                    pass
                time.sleep(0.1)
            cls.prometheus.stop()
        with open(os.path.join(cls.work, "prometheus-4.log")) as f:
            raise RuntimeError("prometheus did not start:\n" + f.read()[-3000:])

    def query(self, expr):
        url = self.prometheus_url + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        try:
            _, text = http_get(url)
        except urllib.error.HTTPError as e:
            return json.loads(e.read().decode())
        return json.loads(text)

    def wait_query(self, expr, timeout=60):
        deadline = time.time() + timeout
        result = None
        while time.time() < deadline:
            result = self.query(expr)
            if result["status"] == "success" and result["data"]["result"]:
                return result["data"]["result"]
            time.sleep(0.5)
        self.fail("no result for %s: %s" % (expr, result))

    def exposition(self):
        status, text = http_get(self.spillway_url + "/metrics")
        self.assertEqual(status, 200)
        return text

    def exported_names(self):
        names = set()
        for line in self.exposition().splitlines():
            if line.startswith("# TYPE "):
                names.add(line.split()[2])
        return names

    # --- the exposition ---------------------------------------------------------------

    def test_promtool_check_metrics_passes_without_vllm_aliases(self):
        text = self.exposition()
        self.assertIn("vllm:num_requests_waiting", text)
        kept = "".join(line + "\n" for line in text.splitlines() if "vllm:" not in line)
        self.assertIn("spillway_time_to_first_token_seconds_bucket", kept)
        check = subprocess.run([tool("promtool"), "check", "metrics"], input=kept, text=True,
                               capture_output=True, timeout=60)
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr)
        self.assertEqual(check.stdout.strip() + check.stderr.strip(), "", "lint findings")

    def test_promtool_rejects_the_vllm_names_only_for_their_colon(self):
        # The aliases are the one deliberate exception to the lint; nothing else is flagged.
        check = subprocess.run([tool("promtool"), "check", "metrics"], input=self.exposition(),
                               text=True, capture_output=True, timeout=60)
        findings = [l for l in (check.stdout + check.stderr).splitlines() if l.strip()]
        self.assertTrue(findings)
        for finding in findings:
            self.assertIn("vllm:", finding)

    # --- Prometheus' view -------------------------------------------------------------

    def test_target_is_up(self):
        result = self.wait_query('up{job="spillway"} == 1')
        self.assertEqual(len(result), 1)

    def test_http_api_returns_spillway_series(self):
        self.wait_query('spillway_ready{job="spillway"} == 1')
        names = {r["metric"]["__name__"] for r in self.wait_query('{__name__=~"spillway_.+", job="spillway"}')}
        for expected in ("spillway_ready", "spillway_requests_running", "spillway_requests_waiting",
                         "spillway_kv_cache_usage_ratio", "spillway_http_requests_total",
                         "spillway_generation_tokens_total", "spillway_time_to_first_token_seconds_bucket",
                         "spillway_inter_token_latency_seconds_bucket", "spillway_e2e_request_latency_seconds_count"):
            self.assertIn(expected, names)
        generated = self.wait_query('spillway_generation_tokens_total{job="spillway"} >= 16')
        self.assertGreaterEqual(float(generated[0]["value"][1]), 16)
        completions = self.wait_query(
            'spillway_http_requests_total{job="spillway", endpoint="/v1/completions", status="200"} >= 2')
        self.assertEqual(len(completions), 1)

    def test_vllm_aliases_are_ingested(self):
        for name in ("vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc",
                     "vllm:cache_config_info"):
            result = self.wait_query('{__name__="%s", job="spillway"}' % name)
            self.assertEqual(len(result), 1, name)
        info = self.wait_query('vllm:cache_config_info{job="spillway"}')[0]["metric"]
        self.assertGreater(int(info["block_size"]), 0)
        self.assertGreater(int(info["num_gpu_blocks"]), 0)

    # --- deploy/ ----------------------------------------------------------------------

    def test_deploy_prometheus_config_and_rules_pass_promtool(self):
        rules = os.path.join(SOURCE_DIR, "deploy", "prometheus", "alerts.yml")
        check = subprocess.run([tool("promtool"), "check", "rules", rules], capture_output=True, text=True)
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr)
        # The compose config names its rule file by its path inside the container.
        with open(os.path.join(SOURCE_DIR, "deploy", "prometheus", "prometheus.yml")) as f:
            config = f.read().replace("/etc/prometheus/alerts.yml", rules)
        local = os.path.join(self.work, "compose-prometheus.yml")
        with open(local, "w") as f:
            f.write(config)
        check = subprocess.run([tool("promtool"), "check", "config", local], capture_output=True, text=True)
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr)

    def test_alert_rules_are_loaded_and_evaluate(self):
        deadline = time.time() + 60
        while time.time() < deadline:
            _, text = http_get(self.prometheus_url + "/api/v1/rules")
            groups = json.loads(text)["data"]["groups"]
            rules = [r for g in groups for r in g["rules"]]
            if rules and all(r.get("health") == "ok" for r in rules):
                break
            time.sleep(0.5)
        self.assertTrue(rules)
        for rule in rules:
            self.assertEqual(rule.get("health"), "ok", rule)

    def dashboard_queries(self):
        with open(os.path.join(SOURCE_DIR, "deploy", "grafana", "dashboards", "spillway.json")) as f:
            dashboard = json.load(f)
        queries = []
        for panel in dashboard["panels"]:
            for target in panel.get("targets", []):
                queries.append((panel["title"], target["expr"]))
        return queries

    def documented_names(self):
        with open(os.path.join(SOURCE_DIR, "README.md")) as f:
            readme = f.read()
        return set(re.findall(r"spillway_[a-z0-9_]+", readme))

    def test_dashboard_queries_parse_and_name_known_metrics(self):
        queries = self.dashboard_queries()
        self.assertGreaterEqual(len(queries), 12)
        known = self.exported_names() | self.documented_names()
        for title, expr in queries:
            promql = (expr.replace("$__rate_interval", "1m").replace("$instance", ".*"))
            result = self.query(promql)
            self.assertEqual(result["status"], "success", "%s: %s -> %s" % (title, promql, result))
            for name in METRIC_NAME.findall(expr):
                base = re.sub(r"_(bucket|sum|count)$", "", name)
                self.assertTrue(name in known or base in known,
                                "%s: %s is neither exported nor documented in README.md" % (title, name))

    def test_dashboard_serving_panels_have_data(self):
        for title, expr in self.dashboard_queries():
            if any(name in expr for name in ("spillway_requests_waiting", "spillway_kv_cache_usage_ratio",
                                              "spillway_generation_tokens_total")):
                self.wait_query(expr.replace("$__rate_interval", "1m").replace("$instance", ".*"))

    def test_alert_rules_name_known_metrics(self):
        known = self.exported_names() | self.documented_names() | {"up"}
        with open(os.path.join(SOURCE_DIR, "deploy", "prometheus", "alerts.yml")) as f:
            exprs = re.findall(r"^\s*expr:\s*(.+)$", f.read(), re.M)
        self.assertTrue(exprs)
        for expr in exprs:
            for name in METRIC_NAME.findall(expr):
                self.assertIn(name, known, expr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
