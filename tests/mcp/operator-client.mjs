// An operator's MCP client built on the official MCP TypeScript SDK, unchanged, against
// Hermes as an MCP server for operators (docs/operator-mcp.md): over stdio (spawning
// `hermes mcp serve`, as Claude Code would) and over streamable HTTP (POST /mcp with an
// operator-scoped key). Driven by the e2e test operator_mcp_sdk, which makes one Telegram
// conversation and two tool calls waiting for approval; then follows the event log and
// sends a message over HTTP.
//   HERMES_BIN          the hermes binary
//   HERMES_ENV          JSON object of the environment `hermes mcp serve` needs (DATABASE_URL, …)
//   HERMES_MCP_URL      http://…/mcp
//   HERMES_OPERATOR_KEY a key with the operator scope
//   HERMES_APPROVALS    JSON array of the two waiting approval ids
// Prints "ok - <step>" per step; exits non-zero at the first mismatch.
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};
const ok = (step) => console.log(`ok - ${step}`);
const MINE = [
  "attachments_fetch", "channels_list", "conversation_get", "conversations_list",
  "messages_read", "permissions_list_open", "permissions_respond",
  "events_poll", "events_wait", "messages_send",
];

// A tool's structured result, failing on a refusal.
async function call(client, name, args = {}) {
  const r = await client.callTool({ name, arguments: args });
  assert.equal(r.isError, false, `${name} refused: ${JSON.stringify(r)}`);
  assert.deepEqual(JSON.parse(r.content[0].text), r.structuredContent);
  return r.structuredContent;
}

const stdio = new Client({ name: "hermes-sdk-operator", version: "1.0.0" });
const transport = new StdioClientTransport({
  command: env("HERMES_BIN"),
  args: ["mcp", "serve"],
  env: { PATH: process.env.PATH, ...JSON.parse(env("HERMES_ENV")) },
  stderr: "inherit",
});
await stdio.connect(transport);
assert.equal(stdio.getServerVersion().name, "hermes-operator");
const { tools } = await stdio.listTools();
const names = tools.map((t) => t.name);
for (const n of MINE) assert.ok(names.includes(n), `${n} listed`);
for (const t of tools) assert.equal(t.inputSchema.type, "object", t.name);
ok(`stdio: connected and listed ${tools.length} tools`);

const listed = await call(stdio, "conversations_list", { platform: "telegram" });
assert.equal(listed.conversations.length, 1);
const [conv] = listed.conversations;
assert.equal(conv.target, "telegram:4242");
const detail = await call(stdio, "conversation_get", { conversation_id: conv.conversation_id });
assert.equal(detail.chat_id, "4242");
assert.equal(detail.message_stats.inbound, 1);
ok("stdio: conversations_list and conversation_get");

const read = await call(stdio, "messages_read", { conversation_id: conv.conversation_id });
assert.deepEqual(read.messages.map((m) => m.direction), ["inbound", "outbound"]);
assert.equal(read.messages[0].text, "hello from the SDK");
const media = await call(stdio, "attachments_fetch", { message_id: read.messages[0].message_id });
assert.deepEqual(media.attachments, []);
ok("stdio: messages_read and attachments_fetch");

const channels = await call(stdio, "channels_list");
assert.equal(channels.platforms.find((p) => p.platform === "telegram").can_send, true);
assert.deepEqual(channels.chats.map((c) => c.sender_id), ["4242"]);
ok("stdio: channels_list");

const [first, second] = JSON.parse(env("HERMES_APPROVALS"));
const open = await call(stdio, "permissions_list_open");
assert.deepEqual(open.approvals.map((a) => a.approval_id), [first, second]);
const denied = await call(stdio, "permissions_respond", { approval_id: first, decision: "deny", reason: "not today" });
assert.equal(denied.outcome, "decided");
assert.equal(denied.approval.decided_by, "stdio");
ok("stdio: permissions_list_open and permissions_respond");

await assert.rejects(stdio.callTool({ name: "no_such_tool", arguments: {} }), (e) => e.code === -32602);
const bad = await stdio.callTool({ name: "messages_read", arguments: { conversation_id: "x" } });
assert.equal(bad.isError, true);
assert.equal(bad.structuredContent.error.code, "INVALID_ARGUMENT");
ok("stdio: unknown tool and bad arguments");

const http = new Client({ name: "hermes-sdk-operator", version: "1.0.0" });
await http.connect(new StreamableHTTPClientTransport(new URL(env("HERMES_MCP_URL")), {
  requestInit: { headers: { Authorization: `Bearer ${env("HERMES_OPERATOR_KEY")}` } },
}));
assert.equal(http.getServerVersion().name, "hermes-operator");
assert.deepEqual((await http.listTools()).tools.map((t) => t.name), names);
assert.deepEqual(await call(http, "conversations_list", { platform: "telegram" }), listed);
const again = await call(http, "permissions_respond", { approval_id: first, decision: "allow" });
assert.equal(again.outcome, "already_decided");
assert.equal(again.verdict, "denied");
const left = await call(http, "permissions_list_open");
assert.deepEqual(left.approvals.map((a) => a.approval_id), [second]);
ok("http: the same tools and data, an answer given over stdio seen");

// The log from the start holds the conversation's messages; a wait from its end is woken
// by a message an operator sends (other messages may come first: it waits again).
const start = await call(http, "events_poll", { after_cursor: "0", kinds: ["message"] });
assert.ok(start.events.some((e) => e.direction === "inbound" && e.text === "hello from the SDK"));
const TEXT = "an operator writes";
const woken = (async () => {
  let cursor = start.next_cursor;
  for (;;) {
    const page = await call(http, "events_wait", { after_cursor: cursor, kinds: ["message"], timeout_ms: 30000 });
    assert.ok(page.events.length > 0, "events_wait timed out");
    const mine = page.events.find((e) => e.text === TEXT);
    if (mine) return mine;
    cursor = page.next_cursor;
  }
})();
const sent = await call(http, "messages_send", { target: "telegram:4242", text: TEXT, idempotency_key: "sdk-1", wait_ms: 30000 });
assert.equal(sent.status, "sent");
const event = await woken;
assert.equal(event.direction, "outbound");
assert.equal(event.run_id, sent.handle);
const unknown = await http.callTool({ name: "messages_send", arguments: { target: "telegram:1", text: "hi" } });
assert.equal(unknown.structuredContent.error.code, "UNKNOWN_CHAT");
ok("http: events_poll, events_wait woken by messages_send, an unknown chat refused");

await http.close();
await stdio.close();
console.log("all checks passed");
