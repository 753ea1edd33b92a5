// An external agent built on the official MCP TypeScript SDK, unchanged, against Hermes's
// agent MCP surface (docs/agents.md, "The agent's side"). Driven by the e2e test
// agent_mcp_sdk, which prepares the runs and checks the fleet afterwards.
//   HERMES_MCP_URL      http://…/api/mcp (the JSON-RPC endpoint is …/rpc, the REST alias …/<tool>)
//   HERMES_AGENT_KEY    a key linked to an EXECUTE agent holding four open runs
//   HERMES_REVIEW_KEY   a key linked to a REVIEW agent holding one open run
//   HERMES_UNLINKED_KEY a key linked to no agent
//   HERMES_OTHER_CHAT   a Telegram chat of the EXECUTE agent's user, for chat.sendMessage
// Prints "ok - <step>" per step; exits non-zero at the first mismatch.
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const base = process.env.HERMES_MCP_URL;
const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};

async function connect(key) {
  const client = new Client({ name: "hermes-sdk-agent", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(`${base}/rpc`), {
    requestInit: { headers: { Authorization: `Bearer ${key}` } },
  });
  await client.connect(transport);
  return client;
}

// A tool's structured result, failing on a refusal.
async function call(client, name, args = {}) {
  const r = await client.callTool({ name, arguments: args });
  assert.equal(r.isError, false, `${name} refused: ${JSON.stringify(r)}`);
  assert.deepEqual(JSON.parse(r.content[0].text), r.structuredContent);
  return r.structuredContent;
}

// A tool's refusal: its structured error.
async function refused(client, name, args = {}) {
  const r = await client.callTool({ name, arguments: args });
  assert.equal(r.isError, true, `${name} should be refused: ${JSON.stringify(r)}`);
  return r.structuredContent.error;
}

async function rest(key, tool, body) {
  const resp = await fetch(`${base}/${tool}`, {
    method: "POST",
    headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: resp.status, body: await resp.json() };
}

const ok = (step) => console.log(`ok - ${step}`);

const agentKey = env("HERMES_AGENT_KEY");
const agent = await connect(agentKey);
assert.equal(agent.getServerVersion().name, "hermes-agents");
const { tools } = await agent.listTools();
const names = tools.map((t) => t.name).sort();
// The contract's names are listed; the short ones called below are aliases of the same tools.
assert.deepEqual(names, [
  "agent.context.bundle", "agent.inbox.ack", "agent.inbox.list", "agents.heartbeat",
  "agents.me", "chat.appendDraftChunk", "chat.appendMessage", "chat.finalizeDraft",
  "chat.sendMessage", "chat.startDraft", "memory.remember", "runs.fail",
]);
for (const t of tools) assert.equal(t.inputSchema.type, "object", t.name);
ok("connected and listed 12 tools");

const me = await call(agent, "agents.me");
assert.equal(me.profileKey, "victor");
assert.equal(me.openRuns, 4);
let beat = await call(agent, "agents.heartbeat", { status: "BUSY" });
assert.equal(beat.status, "BUSY");
beat = await call(agent, "agents.heartbeat");
assert.equal(beat.status, "BUSY", "without a status BUSY stays");
beat = await call(agent, "agents.heartbeat", { status: "ONLINE" });
assert.equal(beat.status, "ONLINE");
assert.ok(beat.lastHeartbeatAt);
ok("agents.me and agents.heartbeat");

const inbox = await call(agent, "inbox.list", { status: "unacked", limit: 10 });
assert.equal(inbox.runs.length, 4);
const [a, b, c, d] = inbox.runs.map((r) => r.runId);
for (const run of [a, b, c, d]) assert.equal((await call(agent, "inbox.ack", { runId: run })).acked, true);
assert.equal((await call(agent, "inbox.list")).runs.length, 0);
assert.equal((await call(agent, "inbox.list", { status: "acked" })).runs.length, 4);
ok("inbox.list and inbox.ack");

const bundle = await call(agent, "context.bundle", { runId: a });
assert.equal(bundle.message.text, "message 1");
assert.equal(bundle.runProtocol.mutationAllowed, true);
assert.equal(bundle.runProtocol.engagementMode, "EXECUTE");
await call(agent, "memory.remember", { runId: a, key: "home_city", value: "Lisbon" });
assert.equal((await call(agent, "context.bundle", { runId: a })).user.memory.home_city, "Lisbon");
ok("context.bundle and memory.remember");

const sent = await call(agent, "chat.sendMessage", {
  runId: a, platform: "telegram", chatId: env("HERMES_OTHER_CHAT"), body: "a note for your other chat",
});
assert.equal(sent.status, "queued");
assert.equal((await call(agent, "chat.appendMessage", { runId: a, body: "answer one" })).status, "answered");
assert.equal((await refused(agent, "chat.appendMessage", { runId: a, body: "again" })).code, "RUN_ENDED");
ok("chat.sendMessage and chat.appendMessage");

const { draftId } = await call(agent, "chat.startDraft", { runId: b });
await call(agent, "chat.appendDraftChunk", { runId: b, draftId, delta: "draft " });
const chunk = await call(agent, "chat.appendDraftChunk", { runId: b, draftId, delta: "answer" });
assert.equal(chunk.chunks, 2);
assert.equal((await call(agent, "chat.finalizeDraft", { runId: b, draftId })).status, "answered");
ok("drafts");

assert.equal((await call(agent, "runs.fail", { runId: c, reason: "cannot do this one" })).status, "failed");
ok("runs.fail");

// The REST alias: the same tools with a flat body.
let r = await rest(agentKey, "agents.me", {});
assert.equal(r.status, 200);
assert.equal(r.body.profileKey, "victor");
r = await rest(agentKey, "chat.appendMessage", { runId: d, body: "answer four" });
assert.equal(r.status, 200, JSON.stringify(r.body));
r = await rest(agentKey, "chat.appendMessage", { runId: d, body: "again" });
assert.equal(r.status, 409);
assert.equal(r.body.error.code, "RUN_ENDED");
ok("REST alias");

// A key that speaks for no agent is refused by every tool, on both transports.
const unlinkedKey = env("HERMES_UNLINKED_KEY");
const unlinked = await connect(unlinkedKey);
assert.equal((await refused(unlinked, "agents.me")).code, "UNAUTHORIZED");
assert.equal((await refused(unlinked, "inbox.list")).code, "UNAUTHORIZED");
r = await rest(unlinkedKey, "inbox.list", {});
assert.equal(r.status, 403);
assert.equal(r.body.error.code, "UNAUTHORIZED");
await unlinked.close();
ok("unlinked key refused");

// A REVIEW run may answer, not mutate.
const review = await connect(env("HERMES_REVIEW_KEY"));
const [run] = (await call(review, "inbox.list")).runs;
assert.equal(run.engagementMode, "REVIEW");
const e = await refused(review, "memory.remember", { runId: run.runId, key: "diet", value: "vegan" });
assert.deepEqual([e.code, e.engagementMode, e.tool], ["MUTATION_NOT_ALLOWED", "REVIEW", "memory.remember"]);
const e2 = await refused(review, "chat.sendMessage", {
  runId: run.runId, platform: "telegram", chatId: env("HERMES_OTHER_CHAT"), body: "x",
});
assert.equal(e2.code, "MUTATION_NOT_ALLOWED");
assert.equal((await call(review, "chat.appendMessage", { runId: run.runId, body: "reviewed" })).status, "answered");
await review.close();
ok("REVIEW mutations refused");

await agent.close();
console.log("agent-client.mjs: all checks passed");
