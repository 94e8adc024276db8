// Structured output with the official OpenAI Node SDK (`openai` and `zod` pinned in
// package-lock.json) against a real `spillway serve` on the golden stories260K model, which
// never writes JSON by itself: the SDK's parse helpers (zodResponseFormat, zodFunction) get
// outputs that their own zod schemas accept, forced tool calls come back as tool_calls,
// json_object gives an object; streamed and not. Run by ctest as e2e.openai_sdk_structured.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import OpenAI from 'openai';
import { zodFunction, zodResponseFormat } from 'openai/helpers/zod';
import { z } from 'zod';

import { SpillwayServer } from './spillway_server.mjs';

const MODEL = 'stories260K';

// Bounded fields, so that even a tiny model finishes within max_tokens.
const Person = z.object({
  name: z.string().min(1).max(12),
  age: z.number().int().min(0).max(120),
  pet: z.enum(['cat', 'dog', 'bird']),
});
const WeatherArgs = z.object({
  city: z.string().max(12),
  unit: z.enum(['c', 'f']),
});
const TimeArgs = z.object({ zone: z.enum(['utc', 'local']) });

let server;
let client;

before(async () => {
  server = await SpillwayServer.start(['--ctx-size', '2048']);
  client = new OpenAI({ baseURL: `${server.baseURL}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 300_000 });
});

after(async () => {
  if (!server) return;
  const { code, signal } = await server.stop();
  assert.equal(signal, null, `spillway was killed by ${signal}: ${server.logTail()}`);
  assert.equal(code, 0, `spillway exited with ${code} after SIGTERM: ${server.logTail()}`);
});

const messages = [{ role: 'user', content: 'Tell me about a person.' }];

describe('response_format', () => {
  test('chat.completions.parse with zodResponseFormat returns message.parsed', async () => {
    const completion = await client.chat.completions.parse({
      model: MODEL, messages, temperature: 0, max_tokens: 120,
      response_format: zodResponseFormat(Person, 'person'),
    });
    const choice = completion.choices[0];
    assert.equal(choice.finish_reason, 'stop');
    assert.ok(choice.message.parsed, choice.message.content);
    assert.deepEqual(Person.parse(choice.message.parsed), choice.message.parsed);
    assert.deepEqual(JSON.parse(choice.message.content), choice.message.parsed);
  });

  test('streamed parse gives the same parsed object', async () => {
    const whole = await client.chat.completions.parse({
      model: MODEL, messages, temperature: 0, max_tokens: 120,
      response_format: zodResponseFormat(Person, 'person'),
    });
    const stream = client.chat.completions.stream({
      model: MODEL, messages, temperature: 0, max_tokens: 120,
      response_format: zodResponseFormat(Person, 'person'),
    });
    const final = await stream.finalChatCompletion();
    assert.equal(final.choices[0].finish_reason, 'stop');
    assert.deepEqual(final.choices[0].message.parsed, whole.choices[0].message.parsed);
  });

  test('json_object returns a JSON object, streamed and not', async () => {
    const body = { model: MODEL, messages, temperature: 0, max_tokens: 400, response_format: { type: 'json_object' } };
    const completion = await client.chat.completions.create(body);
    let text = '';
    for await (const chunk of await client.chat.completions.create({ ...body, stream: true })) {
      text += chunk.choices[0]?.delta?.content ?? '';
    }
    assert.equal(text, completion.choices[0].message.content);
    if (completion.choices[0].finish_reason === 'stop') {
      const value = JSON.parse(text);
      assert.equal(typeof value, 'object');
      assert.ok(value !== null && !Array.isArray(value));
    } else {  // the tiny model may talk past max_tokens inside a string: still an object's start
      assert.equal(completion.choices[0].finish_reason, 'length');
      assert.match(text, /^\s*\{/);
    }
  });

  test('a schema with an unsupported keyword is a 400 naming it', async () => {
    await assert.rejects(client.chat.completions.create({
      model: MODEL, messages, max_tokens: 8,
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', not: {} } } },
    }), (err) => {
      assert.ok(err instanceof OpenAI.BadRequestError, `${err?.constructor?.name}: ${err?.message}`);
      assert.equal(err.param, 'response_format.json_schema.schema#/not');
      return true;
    });
  });
});

describe('tools', () => {
  const tools = [zodFunction({ name: 'get_weather', parameters: WeatherArgs }), zodFunction({ name: 'get_time', parameters: TimeArgs })];

  test('a strict zodFunction with a named tool_choice returns parsed_arguments', async () => {
    const completion = await client.chat.completions.parse({
      model: MODEL, messages, temperature: 0, max_tokens: 120, tools,
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
    });
    const choice = completion.choices[0];
    assert.equal(choice.finish_reason, 'stop');  // as OpenAI for a named function
    assert.equal(choice.message.tool_calls.length, 1);
    const call = choice.message.tool_calls[0];
    assert.equal(call.function.name, 'get_weather');
    assert.ok(call.function.parsed_arguments);
    assert.deepEqual(WeatherArgs.parse(call.function.parsed_arguments), call.function.parsed_arguments);
  });

  test('tool_choice "required" returns tool calls, streamed and not', async () => {
    const body = { model: MODEL, messages, temperature: 0, max_tokens: 120, tools, tool_choice: 'required', parallel_tool_calls: false };
    const completion = await client.chat.completions.parse(body);
    const choice = completion.choices[0];
    assert.equal(choice.finish_reason, 'tool_calls');
    assert.equal(choice.message.tool_calls.length, 1);
    const call = choice.message.tool_calls[0];
    const schema = call.function.name === 'get_weather' ? WeatherArgs : TimeArgs;
    assert.deepEqual(schema.parse(call.function.parsed_arguments), call.function.parsed_arguments);

    const stream = client.chat.completions.stream(body);
    const final = await stream.finalChatCompletion();
    assert.equal(final.choices[0].finish_reason, 'tool_calls');
    assert.equal(final.choices[0].message.tool_calls.length, 1);
    assert.equal(final.choices[0].message.tool_calls[0].function.name, call.function.name);
    assert.deepEqual(final.choices[0].message.tool_calls[0].function.parsed_arguments, call.function.parsed_arguments);
  });

  test('tool_choice naming a function that is not in tools is a 400', async () => {
    await assert.rejects(client.chat.completions.create({
      model: MODEL, messages, max_tokens: 8, tools, tool_choice: { type: 'function', function: { name: 'nope' } },
    }), (err) => err instanceof OpenAI.BadRequestError && err.param === 'tool_choice.function.name');
  });
});
