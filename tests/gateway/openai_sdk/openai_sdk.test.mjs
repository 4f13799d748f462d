// The official openai package, unmodified, against `infer gateway`. GatewayTest.OfficialOpenAiSdk starts
// redis-server with the module (models `stories` and `qwen`, stories260K with Qwen 2.5's template) and
// the gateway, then runs this file with node's test runner: GATEWAY_URL is the gateway's /v1 base URL.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import OpenAI from 'openai';

const baseURL = process.env.GATEWAY_URL;
const client = new OpenAI({ baseURL, apiKey: 'unused', maxRetries: 0 });
const messages = [{ role: 'user', content: 'Once upon a time' }];

test('models.list names the loaded models', async () => {
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  assert.ok(ids.includes('stories'), ids.join(','));
  assert.ok(ids.includes('qwen'), ids.join(','));
});

test('a chat completion, plain', async () => {
  const r = await client.chat.completions.create({ model: 'stories', chat_template: 'chatml', messages, max_tokens: 8, temperature: 0 });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.ok(r.choices[0].message.content.length > 0);
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 8);
});

test('a chat completion, streamed, with usage', async () => {
  const stream = await client.chat.completions.create({
    model: 'stories', chat_template: 'chatml', messages, max_tokens: 24, temperature: 0, stream: true,
    stream_options: { include_usage: true },
  });
  let text = '', finish = null, usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.delta.content ?? '';
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  const plain = await client.chat.completions.create({ model: 'stories', chat_template: 'chatml', messages, max_tokens: 24, temperature: 0 });
  assert.equal(text, plain.choices[0].message.content);
  assert.equal(finish, 'length');
  assert.equal(usage.completion_tokens, 24);
});

test('response_format json_schema gives JSON the schema accepts', async () => {
  const r = await client.chat.completions.create({
    model: 'stories', chat_template: 'chatml', messages, max_tokens: 80, temperature: 1, seed: 5,
    response_format: { type: 'json_schema', json_schema: { name: 'pet', schema: {
      type: 'object', properties: { name: { type: 'string', maxLength: 10 }, legs: { type: 'integer', minimum: 0, maximum: 8 } },
      required: ['name', 'legs'], additionalProperties: false } } },
  });
  const pet = JSON.parse(r.choices[0].message.content);
  assert.equal(typeof pet.name, 'string');
  assert.ok(Number.isInteger(pet.legs) && pet.legs >= 0 && pet.legs <= 8);
});

test('tools with tool_choice required give a call', async () => {
  const r = await client.chat.completions.create({
    model: 'qwen', messages: [{ role: 'user', content: 'Weather in Paris?' }], max_tokens: 120, temperature: 0,
    tools: [{ type: 'function', function: { name: 'get_weather', parameters: {
      type: 'object', properties: { city: { type: 'string', maxLength: 12 } }, required: ['city'], additionalProperties: false } } }],
    tool_choice: 'required',
  });
  const call = r.choices[0].message.tool_calls[0];
  assert.equal(r.choices[0].finish_reason, 'tool_calls');
  assert.equal(call.type, 'function');
  assert.equal(call.function.name, 'get_weather');
  assert.equal(typeof JSON.parse(call.function.arguments).city, 'string');
});

test('logprobs', async () => {
  const r = await client.chat.completions.create({
    model: 'stories', chat_template: 'chatml', messages, max_tokens: 4, temperature: 0, logprobs: true, top_logprobs: 3,
  });
  const content = r.choices[0].logprobs.content;
  assert.equal(content.length, 4);
  for (const t of content) {
    assert.ok(t.logprob <= 0);
    assert.equal(t.top_logprobs.length, 3);
  }
});

test('embeddings, as floats and through the SDK\'s default base64', async () => {
  const floats = await client.embeddings.create({ model: 'stories', input: ['hello', 'world'], encoding_format: 'float' });
  assert.equal(floats.data.length, 2);
  const decoded = await client.embeddings.create({ model: 'stories', input: ['hello', 'world'] });
  assert.equal(decoded.data[0].embedding.length, floats.data[0].embedding.length);
  for (let i = 0; i < floats.data[0].embedding.length; i++)
    assert.ok(Math.abs(decoded.data[0].embedding[i] - floats.data[0].embedding[i]) <= 1e-6 * Math.max(1, Math.abs(floats.data[0].embedding[i])));
});

test('a wrong key is an AuthenticationError', async () => {
  const wrong = new OpenAI({ baseURL, apiKey: 'nobody:wrong', maxRetries: 0 });
  await assert.rejects(wrong.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
});

test('an unknown model is a NotFoundError', async () => {
  await assert.rejects(client.chat.completions.create({ model: 'nope', messages }), (e) => e instanceof OpenAI.NotFoundError);
});
