// Starts a real `spillway serve` on a free loopback port (--port 0, read back from its
// `listening` log line) and stops it with SIGTERM, which must end in exit code 0 (the drain).
//
// Environment (set by tests/CMakeLists.txt):
//   SPILLWAY_BIN         the spillway executable
//   SPILLWAY_TEST_MODEL  the model to serve (the golden stories260K.gguf)
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

const START_TIMEOUT_MS = 180_000;

export class SpillwayServer {
  /** @param {string[]} extraArgs more `spillway serve` flags */
  static async start(extraArgs = []) {
    const bin = process.env.SPILLWAY_BIN;
    const model = process.env.SPILLWAY_TEST_MODEL;
    if (!bin || !model) throw new Error('SPILLWAY_BIN and SPILLWAY_TEST_MODEL must be set (ctest sets them)');
    const env = { ...process.env };
    for (const key of Object.keys(env)) {
      if (key.startsWith('SPILLWAY_') && key !== 'SPILLWAY_ISA') delete env[key];  // flags come from args only
    }
    const args = ['serve', '--model', model, '--host', '127.0.0.1', '--port', '0', '--log-format', 'json',
      ...extraArgs];
    const server = new SpillwayServer(spawn(bin, args, { env, stdio: ['ignore', 'ignore', 'pipe'] }));
    await server.#waitListening();
    await server.#waitHealthy();
    return server;
  }

  constructor(child) {
    this.child = child;
    this.logs = [];
    this.exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
    this.lines = createInterface({ input: child.stderr });
    this.lines.on('line', (line) => {
      try {
        this.logs.push(JSON.parse(line));
      } catch {
        this.logs.push({ message: line, raw: true });
      }
    });
  }

  get baseURL() { return `http://127.0.0.1:${this.port}`; }

  logTail(n = 20) { return JSON.stringify(this.logs.slice(-n), null, 1); }

  async #waitListening() {
    const deadline = Date.now() + START_TIMEOUT_MS;
    let exited = false;
    this.exited.then(() => { exited = true; });
    while (Date.now() < deadline) {
      const record = this.logs.find((r) => r.message === 'listening');
      if (record) {
        this.port = Number(record.port);
        return;
      }
      if (exited) throw new Error(`spillway exited before listening: ${this.logTail()}`);
      await sleep(20);
    }
    throw new Error(`spillway did not log its port: ${this.logTail()}`);
  }

  async #waitHealthy() {
    const deadline = Date.now() + START_TIMEOUT_MS;
    while (Date.now() < deadline) {
      if (this.child.exitCode !== null) throw new Error(`spillway exited: ${this.logTail()}`);
      try {
        const res = await fetch(`${this.baseURL}/health`);
        if (res.status === 200) return;
      } catch { /* not accepting yet */ }
      await sleep(50);
    }
    throw new Error(`spillway did not become healthy: ${this.logTail()}`);
  }

  /** /metrics as {"name{label=\"v\",...}": value}, labels in exposition order. */
  async metrics() {
    const res = await fetch(`${this.baseURL}/metrics`);
    if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
    const samples = {};
    for (const line of (await res.text()).split('\n')) {
      if (!line || line.startsWith('#')) continue;
      const cut = line.lastIndexOf(' ');
      samples[line.slice(0, cut)] = Number(line.slice(cut + 1));
    }
    return samples;
  }

  async metric(series) {
    return (await this.metrics())[series] ?? 0;
  }

  /** Polls /metrics until predicate(value of series) holds; returns the value. */
  async waitMetric(series, predicate, timeoutMs = 60_000) {
    const deadline = Date.now() + timeoutMs;
    let value;
    while (Date.now() < deadline) {
      value = await this.metric(series);
      if (predicate(value)) return value;
      await sleep(50);
    }
    throw new Error(`${series} never satisfied the condition (last ${value})`);
  }

  /** SIGTERM, then the exit status ({code, signal}); SIGKILL if the drain hangs. */
  async stop(timeoutMs = 60_000) {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), timeoutMs);
    const status = await this.exited;
    clearTimeout(timer);
    this.lines.close();
    return status;
  }
}

export function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
