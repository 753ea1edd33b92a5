// An operator's MCP client (the official MCP TypeScript SDK, over streamable HTTP) that
// answers a tool call waiting for approval the way a person at Claude Code would: it waits
// for the `approval_requested` event of the run, finds the call among the open ones, allows
// or denies it, and sees the `approval_resolved` event. In `timeout` mode it answers nothing
// and only watches the call be resolved as timed out. Driven by the e2e test
// operator_approvals, which checks the run's end on its side.
//   HERMES_MCP_URL      http://…/mcp
//   HERMES_OPERATOR_KEY the operator key
//   HERMES_RUN_ID       the run whose call waits
//   HERMES_MODE         allow | deny | timeout
// Prints "ok - <step>" per step and "all checks passed"; exits non-zero at the first mismatch.
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};
const ok = (step) => console.log(`ok - ${step}`);
const RUN = env("HERMES_RUN_ID");
const MODE = env("HERMES_MODE");

async function call(client, name, args = {}) {
  const r = await client.callTool({ name, arguments: args });
  assert.equal(r.isError, false, `${name} refused: ${JSON.stringify(r)}`);
  return r.structuredContent;
}

// Wait (events_wait, woken by the server's notification) for the run's event of `kind`,
// from `cursor` on; returns the event and the cursor after it.
async function nextEvent(client, cursor, kind) {
  for (let round = 0; round < 20; round++) {
    const page = await call(client, "events_wait", {
      after_cursor: cursor, kinds: [kind], timeout_ms: 30000,
    });
    cursor = page.next_cursor;
    const mine = page.events.find((e) => e.run_id === RUN);
    if (mine) return { event: mine, cursor };
  }
  throw new Error(`no ${kind} event of run ${RUN}`);
}

const client = new Client({ name: "hermes-sdk-approver", version: "1.0.0" });
await client.connect(
  new StreamableHTTPClientTransport(new URL(env("HERMES_MCP_URL")), {
    requestInit: { headers: { Authorization: `Bearer ${env("HERMES_OPERATOR_KEY")}` } },
  }),
);

const requested = await nextEvent(client, "0", "approval_requested");
assert.equal(requested.event.tool, "current_time");
ok("approval_requested event of the run");

if (MODE === "timeout") {
  const { event } = await nextEvent(client, requested.cursor, "approval_resolved");
  assert.equal(event.verdict, "timed_out");
  assert.equal(event.approval_id, requested.event.approval_id);
  ok("approval_resolved: timed out");
} else {
  const open = await call(client, "permissions_list_open");
  const waiting = open.approvals.find((a) => a.approval_id === requested.event.approval_id);
  assert.ok(waiting, `the call is open: ${JSON.stringify(open)}`);
  assert.equal(waiting.status, "pending");
  assert.deepEqual(waiting.arguments, { timezone: "Asia/Tokyo" });
  ok("permissions_list_open shows the call");

  const decision = MODE === "allow" ? "allow" : "deny";
  const answer = await call(client, "permissions_respond", {
    approval_id: waiting.approval_id, decision, reason: `the operator said ${decision}`,
  });
  assert.equal(answer.outcome, "decided");
  assert.equal(answer.resumed, true);
  const again = await call(client, "permissions_respond", {
    approval_id: waiting.approval_id, decision: "allow",
  });
  assert.equal(again.outcome, "already_decided", JSON.stringify(again));
  ok(`permissions_respond ${decision}, and a second answer changes nothing`);

  const { event } = await nextEvent(client, requested.cursor, "approval_resolved");
  assert.equal(event.verdict, MODE === "allow" ? "allowed" : "denied");
  ok("approval_resolved event");
}
await client.close();
console.log("all checks passed");
