"""Protocol and resource defects found by black-box probing (issue #20), each on the wire:
- Transfer-Encoding whose final coding is not chunked: 400 and close (no smuggled request);
  a coding besides chunked: 501 and close;
- a body over --max-body-bytes sent whole by a client that reads only afterwards (Python's
  http.client) still gets the 413, not a reset;
- a NUL byte inside the JSON body is a 400, not the end of the body;
- out of file descriptors: new clients get an answer (503) instead of hanging, and the
  acceptor does not spin;
- at --max-connections the probes (/live, /health, /metrics) still answer;
- a Host that is not a local name on a loopback listener is 403 (DNS rebinding);
- SIGPIPE (stderr a pipe whose reader left) does not kill the server; SIGHUP drains."""
import http.client
import json
import os
import resource
import signal
import socket
import subprocess
import time
import unittest

from spillway_e2e import BIN, MODEL, Server, ServerTestCase, chat_body, main


def raw_exchange(server, data, read_timeout=10.0):
    """Sends raw bytes on a fresh connection; returns everything read until the server
    closes (or the timeout), and whether the server closed."""
    s = socket.create_connection((server.host, server.port), timeout=read_timeout)
    try:
        s.sendall(data)
        chunks, closed = [], False
        deadline = time.time() + read_timeout
        while time.time() < deadline:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            if not chunk:
                closed = True
                break
            chunks.append(chunk)
        return b"".join(chunks), closed
    finally:
        s.close()


def statuses(raw):
    return [int(line.split(b" ")[1]) for line in raw.split(b"\r\n") if line.startswith(b"HTTP/1.1 ")]


class Protocol(ServerTestCase):
    SERVER_ARGS = ("--max-body-bytes", "65536")

    def test_transfer_encoding_not_ending_in_chunked_is_400_and_close(self):
        smuggled = b"GET /v1/models HTTP/1.1\r\nHost: localhost\r\n\r\n"
        for coding in (b"gzip", b"identity", b"chunked, gzip", b"chunked, chunked"):
            with self.subTest(coding=coding):
                body = smuggled  # answered as a second request if the POST is taken as bodiless
                request = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                           b"Transfer-Encoding: " + coding + b"\r\n\r\n" + body)
                raw, closed = raw_exchange(self.server, request)
                self.assertEqual(statuses(raw), [400], raw)
                self.assertTrue(closed, "the connection must close after a 400 for Transfer-Encoding")

    def test_other_codings_are_501(self):
        request = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
                   b"0\r\n\r\n")
        raw, closed = raw_exchange(self.server, request)
        self.assertEqual(statuses(raw), [501], raw)
        self.assertTrue(closed)
        self.assertIn(b'"error"', raw)

    def test_chunked_still_works(self):
        body = json.dumps(chat_body("Hi", max_tokens=2)).encode()
        request = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                   b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" +
                   b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n")
        raw, _ = raw_exchange(self.server, request, read_timeout=120)
        self.assertEqual(statuses(raw), [200], raw)

    def test_oversized_body_sent_whole_still_sees_413(self):
        conn = http.client.HTTPConnection(self.server.host, self.server.port, timeout=60)
        try:
            # 4 MiB against a 64 KiB limit: http.client sends all of it before reading.
            conn.request("POST", "/v1/chat/completions", body=b"x" * (4 << 20),
                         headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            self.assertEqual(resp.status, 413)
            self.assertIn("error", json.loads(resp.read()))
        finally:
            conn.close()

    def test_nul_byte_in_body_is_400(self):
        body = json.dumps(chat_body("Hi", max_tokens=2)).encode() + b"\x00garbage"
        status, _, payload = self.server.request("POST", "/v1/chat/completions", raw_body=body,
                                                 headers={"Content-Type": "application/json"})
        self.assertEqual(status, 400, payload)
        self.assertIn("NUL", json.loads(payload)["error"]["message"])


    def test_dns_rebinding_host_is_403(self):
        status, _, payload = self.server.request("GET", "/v1/models", headers={"Host": "evil.example:8080"})
        self.assertEqual(status, 403, payload)
        self.assertEqual(json.loads(payload)["error"]["code"], "host_not_allowed")
        status, _, _ = self.server.request("GET", "/v1/models", headers={"Host": "localhost:8080"})
        self.assertEqual(status, 200)


class ConnectionLimits(unittest.TestCase):
    def test_probes_answer_at_the_connection_limit(self):
        server = Server("--max-connections", "4").wait_ready()
        held = []
        try:
            for _ in range(4):
                held.append(socket.create_connection((server.host, server.port), timeout=10))
            time.sleep(0.3)
            for path in ("/live", "/health", "/metrics"):
                status, _, _ = server.request("GET", path)
                self.assertEqual(status, 200, path)
            status, _, payload = server.request("GET", "/v1/models")
            self.assertEqual(status, 503, payload)
        finally:
            for s in held:
                s.close()
            server.close()
        self.assertEqual(server.proc.returncode, 0)

    def test_out_of_descriptors_answers_instead_of_hanging(self):
        def low_fd_limit():
            resource.setrlimit(resource.RLIMIT_NOFILE, (96, 96))
        server = Server("--max-connections", "1024", preexec_fn=low_fd_limit).wait_ready()
        held = []
        try:
            self.assertTrue([r for r in server.logs if "open-file limit" in r.get("message", "")],
                            "the server must say it lowered --max-connections")
            for _ in range(150):
                try:
                    held.append(socket.create_connection((server.host, server.port), timeout=5))
                except OSError:
                    break
            time.sleep(0.5)
            # A new client gets a status (the probe reserve or a shed 503), never silence.
            s = socket.create_connection((server.host, server.port), timeout=10)
            s.sendall(b"GET /live HTTP/1.1\r\nHost: localhost\r\n\r\n")
            raw = s.recv(4096)
            s.close()
            self.assertTrue(statuses(raw) and statuses(raw)[0] in (200, 503), raw)
            # The acceptor waits instead of spinning: little CPU over a second.
            with open("/proc/%d/stat" % server.proc.pid) as f:
                before = sum(int(x) for x in f.read().split()[13:15])
            time.sleep(1.0)
            with open("/proc/%d/stat" % server.proc.pid) as f:
                after = sum(int(x) for x in f.read().split()[13:15])
            ticks = os.sysconf("SC_CLK_TCK")
            self.assertLess((after - before) / ticks, 0.5, "the accept loop spins")
        finally:
            for s in held:
                s.close()
            server.close()
        self.assertEqual(server.proc.returncode, 0)


class Signals(unittest.TestCase):
    def test_sigpipe_on_stderr_does_not_kill(self):
        # stderr is a pipe whose reader is gone: every log line is a write into a closed pipe.
        read_end, write_end = os.pipe()
        proc = subprocess.Popen([BIN, "serve", "--model", MODEL, "--port", "0", "--log-format", "json"],
                                stdout=subprocess.DEVNULL, stderr=write_end)
        os.close(write_end)
        try:
            # Read the first line (the port) and then leave.
            port = None
            buf = b""
            deadline = time.time() + 60
            while port is None and time.time() < deadline:
                buf += os.read(read_end, 4096)
                for line in buf.split(b"\n"):
                    try:
                        record = json.loads(line)
                    except ValueError:
                        continue
                    if record.get("message") == "listening":
                        port = int(record["port"])
            os.close(read_end)
            read_end = None
            self.assertIsNotNone(port)
            deadline = time.time() + 60
            ok = 0
            while time.time() < deadline and ok < 5:
                try:
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                    conn.request("POST", "/v1/chat/completions", body=json.dumps(chat_body("Hi", max_tokens=2)),
                                 headers={"Content-Type": "application/json"})
                    resp = conn.getresponse()
                    resp.read()
                    conn.close()
                    if resp.status == 200:
                        ok += 1
                except OSError:
                    pass
                self.assertIsNone(proc.poll(), "spillway died of a write to a closed stderr")
                time.sleep(0.1)
            self.assertEqual(ok, 5)
            proc.send_signal(signal.SIGHUP)
            self.assertEqual(proc.wait(timeout=60), 0, "SIGHUP drains and exits 0")
        finally:
            if read_end is not None:
                os.close(read_end)
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    def test_sighup_and_usr1_drain(self):
        for sig in (signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
            with self.subTest(sig=sig):
                server = Server().wait_ready()
                server.terminate(sig)
                self.assertEqual(server.wait_exit(), 0)
                self.assertTrue([r for r in server.logs if r.get("message") == "draining"])


if __name__ == "__main__":
    main()
