// The official OpenAI Node SDK (`openai` from npm, pinned in package-lock.json) against a
// real `spillway serve` with an API key, on the golden stories260K model. Run by ctest as
// e2e.openai_sdk (node --test).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import OpenAI from 'openai';

import { SpillwayServer } from './spillway_server.mjs';

const MODEL = 'stories260K';
const API_KEY = `sk-spillway-e2e-${process.pid}`;
// llama.cpp's greedy continuation of "Once upon a time" on stories260K (the golden test).
const GOLDEN = 'there was a little girl named Lily. She loved to play outside in the park';

let server;
let client;

before(async () => {
  // A context long enough that a cancelled stream is still running when it is cancelled.
  server = await SpillwayServer.start(['--api-key', API_KEY, '--ctx-size', '8192']);
  client = new OpenAI({ baseURL: `${server.baseURL}/v1`, apiKey: API_KEY, maxRetries: 0, timeout: 300_000 });
});

after(async () => {
  if (!server) return;
  const { code, signal } = await server.stop();
  assert.equal(signal, null, `spillway was killed by ${signal}: ${server.logTail()}`);
  assert.equal(code, 0, `spillway exited with ${code} after SIGTERM: ${server.logTail()}`);
});

describe('models', () => {
  test('list has the served model', async () => {
    const ids = [];
    for await (const model of client.models.list()) ids.push(model.id);
    assert.deepEqual(ids, [MODEL]);
  });

  test('retrieve returns it', async () => {
    const model = await client.models.retrieve(MODEL);
    assert.equal(model.id, MODEL);
    assert.equal(model.object, 'model');
    assert.equal(typeof model.created, 'number');
    assert.equal(typeof model.owned_by, 'string');
  });

  test('retrieve of an unknown model raises NotFoundError', async () => {
    await assert.rejects(client.models.retrieve('no-such-model'), (err) => {
      assert.ok(err instanceof OpenAI.NotFoundError, `${err?.constructor?.name}: ${err?.message}`);
      assert.equal(err.status, 404);
      return true;
    });
  });
});

describe('completions', () => {
  test('greedy completion is llama.cpp\'s continuation', async () => {
    const completion = await client.completions.create({
      model: MODEL, prompt: 'Once upon a time', max_tokens: 32, temperature: 0,
    });
    assert.equal(completion.object, 'text_completion');
    assert.equal(completion.model, MODEL);
    assert.equal(completion.choices.length, 1);
    assert.ok(completion.choices[0].text.includes(GOLDEN), completion.choices[0].text);
    assert.equal(completion.choices[0].finish_reason, 'length');
    assert.equal(completion.usage.completion_tokens, 32);
    assert.equal(completion.usage.total_tokens, completion.usage.prompt_tokens + 32);
  });

  test('streamed completion carries the same text', async () => {
    const stream = await client.completions.create({
      model: MODEL, prompt: 'Once upon a time', max_tokens: 32, temperature: 0, stream: true,
    });
    let text = '';
    let finish = null;
    for await (const chunk of stream) {
      for (const choice of chunk.choices) {
        text += choice.text;
        finish = choice.finish_reason ?? finish;
      }
    }
    assert.ok(text.includes(GOLDEN), text);
    assert.equal(finish, 'length');
  });
});

describe('chat', () => {
  const messages = [
    { role: 'system', content: 'You tell short stories.' },
    { role: 'user', content: 'Tell me about a little girl.' },
  ];

  test('non-streaming', async () => {
    const chat = await client.chat.completions.create({
      model: MODEL, messages, max_completion_tokens: 16, temperature: 0,
    });
    assert.equal(chat.object, 'chat.completion');
    assert.match(chat.id, /^chatcmpl-/);
    assert.equal(chat.model, MODEL);
    assert.equal(chat.choices.length, 1);
    const [choice] = chat.choices;
    assert.equal(choice.index, 0);
    assert.equal(choice.message.role, 'assistant');
    assert.equal(typeof choice.message.content, 'string');
    assert.ok(['stop', 'length'].includes(choice.finish_reason), choice.finish_reason);
    assert.ok(chat.usage.prompt_tokens > 0);
    assert.ok(chat.usage.completion_tokens >= 1 && chat.usage.completion_tokens <= 16);
    assert.equal(chat.usage.total_tokens, chat.usage.prompt_tokens + chat.usage.completion_tokens);
  });

  test('streaming with include_usage matches non-streaming', async () => {
    const params = { model: MODEL, messages, max_completion_tokens: 24, temperature: 0 };
    const whole = await client.chat.completions.create(params);
    const stream = await client.chat.completions.create({
      ...params, stream: true, stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);

    assert.ok(chunks.length >= 3, `${chunks.length} chunks`);
    for (const chunk of chunks) {
      assert.equal(chunk.object, 'chat.completion.chunk');
      assert.equal(chunk.id, chunks[0].id);
      assert.equal(chunk.created, chunks[0].created);
    }
    assert.equal(chunks[0].choices[0].delta.role, 'assistant');
    const content = chunks.flatMap((c) => c.choices.map((ch) => ch.delta.content ?? '')).join('');
    assert.equal(content, whole.choices[0].message.content);
    const finishes = chunks.flatMap((c) => c.choices.map((ch) => ch.finish_reason)).filter((f) => f);
    assert.deepEqual(finishes, [whole.choices[0].finish_reason]);

    // The usage chunk comes last, with no choices; the others carry usage null.
    const last = chunks.at(-1);
    assert.deepEqual(last.choices, []);
    assert.deepEqual(last.usage, whole.usage);
    for (const chunk of chunks.slice(0, -1)) assert.equal(chunk.usage ?? null, null);
  });

  test('streaming through the SDK\'s stream helper gives the final message', async () => {
    const runner = client.chat.completions.stream({
      model: MODEL, messages, max_completion_tokens: 12, temperature: 0,
    });
    const final = await runner.finalChatCompletion();
    const whole = await client.chat.completions.create({
      model: MODEL, messages, max_completion_tokens: 12, temperature: 0,
    });
    assert.equal(final.choices[0].message.content, whole.choices[0].message.content);
  });

  test('an invalid request raises BadRequestError', async () => {
    await assert.rejects(
      client.chat.completions.create({ model: MODEL, messages, temperature: 7 }),
      (err) => {
        assert.ok(err instanceof OpenAI.BadRequestError, `${err?.constructor?.name}: ${err?.message}`);
        assert.equal(err.status, 400);
        assert.equal(err.type, 'invalid_request_error');
        assert.match(err.message, /temperature/);
        return true;
      });
    await assert.rejects(
      client.chat.completions.create({ model: MODEL, messages: [] }),
      OpenAI.BadRequestError);
  });

  test('a wrong API key raises AuthenticationError', async () => {
    const stranger = new OpenAI({ baseURL: `${server.baseURL}/v1`, apiKey: 'sk-wrong', maxRetries: 0 });
    await assert.rejects(
      stranger.chat.completions.create({ model: MODEL, messages, max_completion_tokens: 4 }),
      (err) => {
        assert.ok(err instanceof OpenAI.AuthenticationError, `${err?.constructor?.name}: ${err?.message}`);
        assert.equal(err.status, 401);
        assert.equal(err.code, 'invalid_api_key');
        return true;
      });
    await assert.rejects(stranger.models.list(), OpenAI.AuthenticationError);
  });
});

describe('cancellation', () => {
  const CANCELLED = 'spillway_requests_finished_total{finish_reason="cancelled"}';

  test('breaking out of a stream cancels the request on the server', async () => {
    await server.waitMetric('spillway_requests_running', (v) => v === 0);
    const cancelledBefore = await server.metric(CANCELLED);
    const stream = await client.chat.completions.create({
      model: MODEL, messages: [{ role: 'user', content: 'Tell me a very long story.' }],
      stream: true, max_tokens: 7000, temperature: 0.8, ignore_eos: true,
    });
    let contentChunks = 0;
    for await (const chunk of stream) {
      if (chunk.choices[0]?.delta?.content) contentChunks += 1;
      if (contentChunks === 3) {
        // Still generating: thousands of tokens to go.
        assert.equal(await server.metric('spillway_requests_running'), 1);
        break;  // the SDK aborts the HTTP request
      }
    }
    assert.equal(contentChunks, 3);
    await server.waitMetric(CANCELLED, (v) => v === cancelledBefore + 1);
    await server.waitMetric('spillway_requests_running', (v) => v === 0);
    await server.waitMetric('spillway_kv_cache_usage_ratio', (v) => v === 0);
    const left = server.logs.filter((r) => r.message === 'request' && r.status === 499);
    assert.ok(left.length >= 1, 'the request is logged with status 499');
    assert.ok(left.at(-1).completion_tokens < 7000, `${left.at(-1).completion_tokens} tokens`);
  });

  test('the server keeps serving afterwards', async () => {
    const completion = await client.completions.create({
      model: MODEL, prompt: 'Once upon a time', max_tokens: 32, temperature: 0,
    });
    assert.ok(completion.choices[0].text.includes(GOLDEN), completion.choices[0].text);
  });
});
