"""Helpers for the end-to-end tests: start a real `spillway serve` on an ephemeral port,
talk HTTP to it (http.client), read SSE streams, parse /metrics with prometheus_client.

Environment (set by tests/CMakeLists.txt):
  SPILLWAY_BIN         the spillway executable
  SPILLWAY_TEST_MODEL  the golden model (stories260K.gguf)
"""
import http.client
import json
import os
import queue
import signal
import socket
import subprocess
import threading
import time
import unittest

from prometheus_client.parser import text_string_to_metric_families

BIN = os.environ.get("SPILLWAY_BIN", "spillway")
MODEL = os.environ.get("SPILLWAY_TEST_MODEL", "")
START_TIMEOUT = 120.0
REQUEST_TIMEOUT = 300.0


class Server:
    """A `spillway serve` child process; JSON logs are collected from its stderr."""

    def __init__(self, *extra_args, model=None, env=None, preexec_fn=None):
        self.args = [BIN, "serve", "--model", model or MODEL, "--port", "0",
                     "--log-format", "json", *extra_args]
        child_env = dict(os.environ)
        for key in list(child_env):
            if key.startswith("SPILLWAY_") and key not in ("SPILLWAY_ISA",):
                del child_env[key]  # flags come from args only, unless a test sets env
        child_env.update(env or {})
        self.proc = subprocess.Popen(self.args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     env=child_env, text=True, preexec_fn=preexec_fn)
        self.logs = []
        self._lines = queue.Queue()
        self._reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._reader.start()
        self.port = self._wait_for_port()
        self.host = "127.0.0.1"

    def _read_stderr(self):
        for line in self.proc.stderr:
            line = line.rstrip("\n")
            try:
                record = json.loads(line)
            except ValueError:
                record = {"message": line, "raw": True}
            self.logs.append(record)
            self._lines.put(record)
        self._lines.put(None)

    def _wait_for_port(self):
        deadline = time.time() + START_TIMEOUT
        while time.time() < deadline:
            try:
                record = self._lines.get(timeout=1.0)
            except queue.Empty:
                continue
            if record is None:
                raise RuntimeError("spillway exited before listening: %s" % self.logs)
            if record.get("message") == "listening":
                return int(record["port"])
        raise RuntimeError("spillway did not log its port: %s" % self.logs)

    def wait_ready(self, timeout=START_TIMEOUT):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("spillway exited: %s" % self.logs)
            try:
                status, _, _ = self.request("GET", "/health")
                if status == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("spillway did not become healthy: %s" % self.logs)

    def connection(self, timeout=REQUEST_TIMEOUT):
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None, raw_body=None):
        """One request on a fresh connection: (status, headers dict lower-cased, body bytes)."""
        conn = self.connection()
        try:
            hdrs = dict(headers or {})
            data = raw_body
            if body is not None:
                data = json.dumps(body).encode()
                hdrs.setdefault("Content-Type", "application/json")
            conn.request(method, path, body=data, headers=hdrs)
            resp = conn.getresponse()
            payload = resp.read()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, payload
        finally:
            conn.close()

    def post_json(self, path, body, headers=None):
        status, hdrs, payload = self.request("POST", path, body=body, headers=headers)
        return status, hdrs, json.loads(payload) if payload else None

    def get_json(self, path, headers=None):
        status, hdrs, payload = self.request("GET", path, headers=headers)
        return status, hdrs, json.loads(payload) if payload else None

    def stream(self, path, body, headers=None):
        """POST with stream: true; returns (status, headers, events) where events are the
        parsed `data:` payloads (dicts, or the string "[DONE]") and raw_lines every line."""
        conn = self.connection()
        try:
            hdrs = {"Content-Type": "application/json", **(headers or {})}
            conn.request("POST", path, body=json.dumps(body).encode(), headers=hdrs)
            resp = conn.getresponse()
            resp_headers = {k.lower(): v for k, v in resp.getheaders()}
            if resp.status != 200:
                return resp.status, resp_headers, json.loads(resp.read()), []
            events, lines = read_sse(resp)
            return resp.status, resp_headers, events, lines
        finally:
            conn.close()

    def metrics_text(self):
        status, hdrs, payload = self.request("GET", "/metrics")
        assert status == 200, status
        return payload.decode(), hdrs

    def metrics(self):
        """{(name, frozenset(labels.items())): value} for every sample."""
        text, _ = self.metrics_text()
        samples = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                samples[(s.name, frozenset(s.labels.items()))] = s.value
        return samples

    def metric(self, name, **labels):
        return self.metrics().get((name, frozenset(labels.items())), 0.0)

    def wait_metric(self, name, predicate, timeout=60.0, **labels):
        deadline = time.time() + timeout
        value = None
        while time.time() < deadline:
            value = self.metric(name, **labels)
            if predicate(value):
                return value
            time.sleep(0.05)
        raise AssertionError("%s%s never satisfied the condition (last %r)" % (name, labels, value))

    def terminate(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def wait_exit(self, timeout=120.0):
        code = self.proc.wait(timeout=timeout)
        self._reader.join(timeout=10)
        self.proc.stderr.close()
        return code

    def close(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(timeout=10)
        self.proc.stderr.close()


def read_sse(resp):
    """Reads an SSE body to its end: (events, lines)."""
    events, lines = [], []
    while True:
        raw = resp.readline()
        if not raw:
            break
        line = raw.decode("utf-8").rstrip("\n")
        lines.append(line)
        if line.startswith("data: "):
            data = line[len("data: "):]
            events.append(data if data == "[DONE]" else json.loads(data))
    return events, lines


def chat_body(content, **fields):
    body = {"model": "stories260K", "messages": [{"role": "user", "content": content}]}
    body.update(fields)
    return body


def completion_body(prompt, **fields):
    body = {"model": "stories260K", "prompt": prompt}
    body.update(fields)
    return body


class ServerTestCase(unittest.TestCase):
    """One server per test class; SERVER_ARGS adds flags."""
    SERVER_ARGS = ()

    @classmethod
    def setUpClass(cls):
        cls.server = Server(*cls.SERVER_ARGS).wait_ready()

    @classmethod
    def tearDownClass(cls):
        cls.server.close()
        code = cls.server.proc.returncode
        if code != 0:
            raise AssertionError("spillway exited with %s; log tail: %s" % (code, cls.server.logs[-20:]))


def main():
    unittest.main(verbosity=2)
