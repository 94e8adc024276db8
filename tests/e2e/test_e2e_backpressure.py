"""Output back-pressure (issue #20): a streaming client that stops reading has its
sequences paused (not preempted: KV kept) once --max-unsent-stream-bytes of output waits
beyond the socket buffers, instead of decoding on and buffering everything until the write
timeout. Other clients are served meanwhile; reading again resumes the stream to its end;
closing frees everything (gauges back to 0).

A raw socket with a small receive buffer is the client that stops reading; the server-side
counter of generated tokens (spillway_generation_tokens_total) is what must stop growing."""
import json
import socket
import time
import unittest

from spillway_e2e import Server, ServerTestCase, chat_body, main

N_CHOICES = 16
MAX_TOKENS = 400
TOTAL = N_CHOICES * MAX_TOKENS
# Chat chunks with 20 top logprobs are ~2 KB each: ~13 MB of output in all, far more than
# the socket buffers (a few MB at most) and the 32 KiB bound.
BODY = chat_body("Once upon a time", stream=True, n=N_CHOICES, max_tokens=MAX_TOKENS, ignore_eos=True,
                 temperature=1.0, seed=7, logprobs=True, top_logprobs=20,
                 stream_options={"include_usage": True})


def open_stalled_stream(server):
    """Sends the streaming request on a socket with a small receive buffer and reads only the
    response head; the caller then stops reading."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(120)
    s.connect((server.host, server.port))
    payload = json.dumps(BODY).encode()
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
              b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(payload) + payload)
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(1)
        assert chunk, "closed before the response head"
        head += chunk
    assert head.startswith(b"HTTP/1.1 200"), head
    return s


def read_to_end(s):
    data = []
    while True:
        chunk = s.recv(1 << 20)
        if not chunk:
            return b"".join(data)
        data.append(chunk)


def dechunk(raw):
    out, pos = [], 0
    while True:
        end = raw.index(b"\r\n", pos)
        size = int(raw[pos:end], 16)
        if size == 0:
            return b"".join(out)
        out.append(raw[end + 2:end + 2 + size])
        pos = end + 2 + size + 2


def sse_events(body):
    events = []
    for line in body.decode().split("\n"):
        if line.startswith("data: "):
            data = line[len("data: "):]
            events.append(data if data == "[DONE]" else json.loads(data))
    return events


class OutputBackpressure(ServerTestCase):
    SERVER_ARGS = ("--max-unsent-stream-bytes", "32K")

    def generated(self):
        return self.server.metric("spillway_generation_tokens_total")

    def wait_plateau(self, timeout=90.0):
        """The generated-token counter once it stopped growing for 1.5 s (or the deadline)."""
        deadline = time.time() + timeout
        last = self.generated()
        while time.time() < deadline:
            time.sleep(1.5)
            now = self.generated()
            if now == last and now > 0:
                return now
            last = now
        return last

    def test_stalled_reader_pauses_others_are_served_and_reading_resumes(self):
        start = self.generated()
        s = open_stalled_stream(self.server)
        try:
            # Generation stops growing once the output waits (decoded to the end before the fix).
            plateau = self.wait_plateau() - start
            # Paused, not finished: the request still holds its sequences and KV.
            self.assertGreater(plateau, 0)
            self.assertLess(plateau, TOTAL, "the stalled stream was decoded to its end while its client did not read")
            self.assertEqual(self.server.metric("spillway_requests_running"), 1)
            self.assertEqual(self.server.metric("spillway_output_paused_requests"), 1)
            self.assertGreater(self.server.metric("spillway_kv_cache_blocks", state="used"), 0)
            time.sleep(1.0)
            self.assertEqual(self.generated() - start, plateau, "still decoding while paused")

            # Another client is served meanwhile.
            status, _, events, _ = self.server.stream("/v1/chat/completions",
                                                      chat_body("Hello", stream=True, max_tokens=8, ignore_eos=True))
            self.assertEqual(status, 200)
            self.assertEqual(events[-1], "[DONE]")
            self.assertEqual(self.generated() - start, plateau + 8)

            # Reading again resumes the stream to its end.
            raw = read_to_end(s)
        finally:
            s.close()
        events = sse_events(dechunk(raw))
        self.assertEqual(events[-1], "[DONE]")
        usage = events[-2]["usage"]
        self.assertEqual(usage["completion_tokens"], TOTAL)
        self.assertEqual(self.generated() - start, TOTAL + 8)
        self.server.wait_metric("spillway_requests_running", lambda v: v == 0, timeout=30)
        self.assertEqual(self.server.metric("spillway_output_paused_requests"), 0)
        self.assertGreaterEqual(self.server.metric("spillway_output_pauses_total"), 1)

    def test_closing_a_stalled_stream_frees_everything(self):
        start = self.generated()
        s = open_stalled_stream(self.server)
        try:
            # Generation stops growing once the output waits (decoded to the end before the fix).
            plateau = self.wait_plateau() - start
            self.assertLess(plateau, TOTAL)
            self.assertEqual(self.server.metric("spillway_output_paused_requests"), 1)
        finally:
            s.close()
        self.server.wait_metric("spillway_requests_running", lambda v: v == 0, timeout=30)
        self.server.wait_metric("spillway_kv_cache_blocks", lambda v: v == 0, timeout=30, state="used")
        self.server.wait_metric("spillway_output_paused_requests", lambda v: v == 0, timeout=30)
        time.sleep(1.0)
        self.assertLess(self.generated() - start, TOTAL)  # cancelled, not decoded on


if __name__ == "__main__":
    main()
