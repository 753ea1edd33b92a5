// The agent MCP surface's latency (scripts/bench-agent-mcp): calls made one at a time with the
// official SDK and with the REST alias, beside the same ingest's cheapest authenticated route
// (`GET /v1/models`), alternated round by round (3 rounds; the median round is reported).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
const base = process.env.BASE, key = process.env.AGENT_KEY, op = process.env.OP_KEY;
const N = Number(process.env.N || 500);
const client = new Client({ name: "bench", version: "1" });
await client.connect(new StreamableHTTPClientTransport(new URL(base + "/api/mcp/rpc"),
  { requestInit: { headers: { Authorization: `Bearer ${key}` } } }));
const kinds = {
  "GET /v1/models (baseline)": () => fetch(base + "/v1/models", { headers: { Authorization: `Bearer ${op}` } }).then(r => r.text()),
  "MCP SDK tools/call inbox.list": () => client.callTool({ name: "inbox.list", arguments: { status: "all" } }),
  "REST alias inbox.list": () => fetch(base + "/api/mcp/inbox.list", { method: "POST", headers: { Authorization: `Bearer ${key}`, "content-type": "application/json" }, body: '{"status":"all"}' }).then(r => r.text()),
  "MCP SDK tools/call agents.heartbeat": () => client.callTool({ name: "agents.heartbeat", arguments: {} }),
};
const results = {};
for (let round = 0; round < 3; round++) {
  for (const [name, f] of Object.entries(kinds)) {
    for (let i = 0; i < 50; i++) await f(); // warm
    const t = [];
    for (let i = 0; i < N; i++) { const s = process.hrtime.bigint(); await f(); t.push(Number(process.hrtime.bigint() - s) / 1e6); }
    t.sort((a, b) => a - b);
    (results[name] ||= []).push({ p50: t[Math.floor(N * 0.5)], p99: t[Math.floor(N * 0.99)] });
  }
}
const med = a => a.sort((x, y) => x - y)[1];
const base50 = med(results["GET /v1/models (baseline)"].map(r => r.p50));
for (const [name, rs] of Object.entries(results)) {
  const p50 = med(rs.map(r => r.p50)), p99 = med(rs.map(r => r.p99));
  console.log(`${name.padEnd(36)} p50 ${p50.toFixed(2)} ms  p99 ${p99.toFixed(2)} ms  p50 ratio ${(p50 / base50).toFixed(2)}  rounds p50 ${rs.map(r => r.p50.toFixed(2)).join("/")}`);
}
await client.close();
