// Drives the fleet's Responses API with the official OpenAI SDK, unchanged (docs/api.md,
// "Responses"): create, stream, retrieve, chain by id and by conversation, image input,
// delete, and errors as the SDK's exceptions. The fleet must answer with the built-in mock
// provider ("echo: <last user message>").
//
//   HERMES_API_URL=http://127.0.0.1:8080/v1 HERMES_API_KEY=… node responses.mjs
//
// Exits non-zero on the first mismatch.

import assert from "node:assert/strict";
import OpenAI from "openai";

const client = new OpenAI({
  baseURL: process.env.HERMES_API_URL,
  apiKey: process.env.HERMES_API_KEY,
  maxRetries: 0,
  timeout: 60_000,
});

const PNG =
  "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

/** The text of a response's message items (what the SDK's `output_text` adds up). */
function textOf(response) {
  return response.output
    .filter((item) => item.type === "message")
    .flatMap((item) => item.content)
    .filter((part) => part.type === "output_text")
    .map((part) => part.text)
    .join("");
}

async function step(name, body) {
  await body();
  console.log(`ok - ${name}`);
}

/** The SDK's exception of `promise`, which must fail. */
async function failure(promise) {
  try {
    await promise;
  } catch (e) {
    return e;
  }
  assert.fail("the call succeeded");
}

async function main() {
  let first;
  await step("create", async () => {
    first = await client.responses.create({
      model: "hermes-agent",
      input: "hello from the sdk",
      instructions: "be brief",
    });
    assert.match(first.id, /^resp_[0-9a-f]{32}$/);
    assert.equal(first.object, "response");
    assert.equal(first.status, "completed");
    assert.equal(first.model, "hermes-agent");
    assert.equal(first.instructions, "be brief");
    assert.equal(first.output_text, "echo: hello from the sdk");
    const u = first.usage;
    assert.ok(u.input_tokens > 0 && u.output_tokens > 0);
    assert.equal(u.total_tokens, u.input_tokens + u.output_tokens);
  });

  await step("stream", async () => {
    const stream = client.responses.stream({ input: "stream these sdk words" });
    const kinds = [];
    let text = "";
    for await (const event of stream) {
      kinds.push(event.type);
      if (event.type === "response.output_text.delta") text += event.delta;
    }
    const final = await stream.finalResponse();
    assert.equal(text, "echo: stream these sdk words");
    // The stream's final response is the one `response.completed` carried.
    assert.equal(textOf(final), text);
    assert.equal(final.status, "completed");
    assert.deepEqual(kinds.slice(0, 4), [
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
    ]);
    assert.deepEqual(kinds.slice(-4), [
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.completed",
    ]);
  });

  await step("stream with create({stream: true})", async () => {
    const stream = await client.responses.create({ input: "raw events", stream: true });
    const numbers = [];
    let completed;
    for await (const event of stream) {
      numbers.push(event.sequence_number);
      if (event.type === "response.completed") completed = event.response;
    }
    assert.deepEqual(numbers, numbers.map((_, i) => i));
    assert.equal(textOf(completed), "echo: raw events");
  });

  await step("retrieve", async () => {
    const got = await client.responses.retrieve(first.id);
    assert.equal(got.id, first.id);
    assert.equal(got.output_text, first.output_text);
    assert.deepEqual(got.usage, first.usage);
  });

  await step("chain by previous_response_id", async () => {
    const next = await client.responses.create({
      input: "and the second turn",
      previous_response_id: first.id,
    });
    assert.equal(next.previous_response_id, first.id);
    assert.equal(next.output_text, "echo: and the second turn");
  });

  await step("chain by conversation", async () => {
    const name = `sdk-${Date.now()}`;
    const a = await client.responses.create({ input: "first in conversation", conversation: name });
    assert.equal(a.previous_response_id, null);
    const b = await client.responses.create({ input: "second in conversation", conversation: name });
    assert.equal(b.previous_response_id, a.id);
    assert.equal(b.output_text, "echo: second in conversation");
  });

  await step("image input", async () => {
    const r = await client.responses.create({
      input: [
        {
          role: "user",
          content: [
            { type: "input_text", text: "describe this image" },
            { type: "input_image", image_url: PNG, detail: "auto" },
          ],
        },
      ],
    });
    assert.equal(r.output_text, "echo: describe this image");
  });

  await step("unsupported content is a BadRequestError", async () => {
    const e = await failure(
      client.responses.create({
        input: [{ role: "user", content: [{ type: "input_file", file_id: "file-abc" }] }],
      }),
    );
    assert.ok(e instanceof OpenAI.BadRequestError, String(e));
    assert.equal(e.status, 400);
    assert.equal(e.code, "unsupported_content_type");
  });

  await step("delete, then retrieve and chain are NotFoundErrors", async () => {
    await client.responses.delete(first.id);
    const e = await failure(client.responses.retrieve(first.id));
    assert.ok(e instanceof OpenAI.NotFoundError, String(e));
    const chained = await failure(
      client.responses.create({ input: "too late", previous_response_id: first.id }),
    );
    assert.ok(chained instanceof OpenAI.NotFoundError, String(chained));
  });
}

main().catch((e) => {
  console.error(`not ok - ${e?.stack ?? e}`);
  process.exit(1);
});
