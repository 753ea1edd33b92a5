// An agent written from the Forge contract's text, on the official MCP TypeScript SDK,
// against Hermes's agent MCP surface (docs/agents.md, "The contract, item by item"). Driven
// by the e2e test forge_contract, which dispatched one run to the agent and checks that it
// closed.
//   HERMES_MCP_URL    http://…/api/mcp (the JSON-RPC endpoint is …/rpc)
//   HERMES_AGENT_KEY  a key linked to an external agent holding one unacknowledged run
// Prints "ok - <step>" per step; exits non-zero at the first mismatch.
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const base = process.env.HERMES_MCP_URL;
const key = process.env.HERMES_AGENT_KEY;
if (!base || !key) throw new Error("HERMES_MCP_URL and HERMES_AGENT_KEY must be set");

const client = new Client({ name: "forge-contract-agent", version: "1.0.0" });
await client.connect(
  new StreamableHTTPClientTransport(new URL(`${base}/rpc`), {
    requestInit: { headers: { Authorization: `Bearer ${key}` } },
  }),
);

async function call(name, args = {}) {
  const r = await client.callTool({ name, arguments: args });
  assert.equal(r.isError, false, `${name} refused: ${JSON.stringify(r)}`);
  return r.structuredContent;
}

const ok = (step) => console.log(`ok - ${step}`);

const { tools } = await client.listTools();
const names = tools.map((t) => t.name);
for (const name of [
  "agent.inbox.list", "agent.inbox.ack", "agent.context.bundle", "agents.me",
  "agents.heartbeat", "chat.appendMessage", "chat.startDraft", "chat.appendDraftChunk",
  "chat.finalizeDraft",
]) {
  assert.ok(names.includes(name), `tools/list lacks ${name}`);
}
ok("the contract's names are listed");

const me = await call("agents.me");
await call("agents.heartbeat", { status: "ONLINE" });
ok(`I am ${me.profileKey} (${me.id})`);

// The required loop, as the contract writes it.
const { runs } = await call("agent.inbox.list", { status: "unacked" });
assert.equal(runs.length, 1);
const [run] = runs;
assert.equal((await call("agent.inbox.ack", { runId: run.runId })).acked, true);
const bundle = await call("agent.context.bundle", { issueId: run.issueId });
assert.equal(bundle.message.text, "from the SDK");
assert.deepEqual(bundle.message.attachments, []);
ok("agent.inbox.list, agent.inbox.ack, agent.context.bundle");

const answered = await call("chat.appendMessage", { threadId: run.threadId, body: "Answered from the contract" });
assert.equal(answered.status, "answered");
ok("chat.appendMessage by threadId");

await client.close();
console.log("all checks passed");
