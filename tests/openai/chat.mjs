// The official OpenAI SDK, unchanged, against a running Hermes fleet whose model is the
// built-in mock provider (it answers "echo: <last user message>"): chat completions plain
// and streamed, image input, models, and errors surfacing as the SDK's own exceptions.
//
//   HERMES_API_URL=http://127.0.0.1:8080/v1 HERMES_API_KEY=… node chat.mjs
//
// Exits non-zero with a line naming the first check that failed.
import OpenAI from 'openai';

const baseURL = process.env.HERMES_API_URL;
const apiKey = process.env.HERMES_API_KEY;
if (!baseURL || !apiKey) {
  console.error('chat.mjs: HERMES_API_URL and HERMES_API_KEY are required');
  process.exit(2);
}
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60_000 });

function check(what, ok, detail) {
  if (!ok) {
    console.error(`FAIL ${what}: ${JSON.stringify(detail)}`);
    process.exit(1);
  }
  console.log(`ok - ${what}`);
}

// A 1x1 PNG.
const PNG =
  'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==';

const models = await client.models.list();
const ids = [];
for await (const m of models) ids.push(m.id);
check('models.list names one model', ids.length === 1, ids);

const plain = await client.chat.completions.create({
  model: ids[0],
  messages: [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'hello sdk' },
  ],
});
check('chat answer', plain.choices[0].message.content === 'echo: hello sdk', plain);
check('chat usage', plain.usage.total_tokens === plain.usage.prompt_tokens + plain.usage.completion_tokens, plain.usage);

const stream = await client.chat.completions.create({
  model: ids[0],
  messages: [{ role: 'user', content: 'stream me' }],
  stream: true,
  stream_options: { include_usage: true },
});
let text = '';
let usage = null;
let finish = null;
const misshapen = [];
for await (const chunk of stream) {
  // Every chunk the SDK yields must be a chat.completion.chunk (named Hermes events too).
  if (chunk.object !== 'chat.completion.chunk' || !Array.isArray(chunk.choices)) misshapen.push(chunk);
  text += chunk.choices[0]?.delta?.content ?? '';
  finish = chunk.choices[0]?.finish_reason ?? finish;
  usage = chunk.usage ?? usage;
}
check('every streamed chunk is a chat.completion.chunk', misshapen.length === 0, misshapen);
check('streamed answer', text === 'echo: stream me', text);
check('streamed finish_reason', finish === 'stop', finish);
check('streamed usage', usage && usage.total_tokens > 0, usage);

const image = await client.chat.completions.create({
  model: ids[0],
  messages: [
    {
      role: 'user',
      content: [
        { type: 'text', text: 'what is this' },
        { type: 'image_url', image_url: { url: PNG } },
      ],
    },
  ],
});
check('image input answered', image.choices[0].message.content === 'echo: what is this', image);

async function refused(what, call, Kind, status, code) {
  try {
    await call();
  } catch (e) {
    check(what, e instanceof Kind && e.status === status && (!code || e.code === code), {
      name: e.constructor.name,
      status: e.status,
      code: e.code,
    });
    return;
  }
  check(what, false, 'no error');
}

await refused(
  'a wrong key is an AuthenticationError',
  () =>
    new OpenAI({ baseURL, apiKey: 'wrong-key-0123456789', maxRetries: 0 }).chat.completions.create({
      model: 'hermes',
      messages: [{ role: 'user', content: 'hi' }],
    }),
  OpenAI.AuthenticationError,
  401,
  'invalid_api_key',
);
await refused(
  'no messages is a BadRequestError',
  () => client.chat.completions.create({ model: 'hermes', messages: [] }),
  OpenAI.BadRequestError,
  400,
);
await refused(
  'an uploaded file is refused as unsupported_content_type',
  () =>
    client.chat.completions.create({
      model: 'hermes',
      messages: [{ role: 'user', content: [{ type: 'file', file: { file_id: 'file-1' } }] }],
    }),
  OpenAI.BadRequestError,
  400,
  'unsupported_content_type',
);
await refused(
  'a temperature out of range is a BadRequestError',
  () =>
    client.chat.completions.create({
      model: 'hermes',
      messages: [{ role: 'user', content: 'hi' }],
      temperature: 7,
    }),
  OpenAI.BadRequestError,
  400,
);
console.log('chat.mjs: all checks passed');
