// A small real MCP server built on the official TypeScript SDK, for the tools tests.
//   node dynamic-server.mjs stdio              — over stdio
//   node dynamic-server.mjs http <port> <key>  — streamable HTTP on 127.0.0.1:<port>/mcp,
//                                                 every request must carry `x-api-key: <key>`
// Tools: `grow` registers a new tool `grown_<n>` at run time (the SDK then sends
// notifications/tools/list_changed); `whoami` answers with the transport's name;
// `fail` answers with an error result that quotes its `secret` argument; `hold` writes the
// file `path` (so a test knows the call arrived) and never answers; `burst` sends `n`
// notifications/tools/list_changed at once; `lists` tells how many tools/list requests the
// server has answered and the most it ever held at once (over stdio, where one server lives
// as long as the connection; each answer is held 20 ms so that overlapping lists would show).
import { writeFile } from "node:fs/promises";
import http from "node:http";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";

const listing = { total: 0, inFlight: 0, maxInFlight: 0, pending: new Set() };

function build(transportName) {
  const server = new McpServer({ name: "hermes-dynamic", version: "1.0.0" });
  server.registerTool(
    "burst",
    { description: "Send `n` tools/list_changed notifications at once", inputSchema: { n: z.number().int().min(1).max(500) } },
    async ({ n }) => {
      await Promise.all(Array.from({ length: n }, () => server.server.sendToolListChanged()));
      return { content: [{ type: "text", text: `sent ${n}` }] };
    },
  );
  server.registerTool("lists", { description: "tools/list requests answered, and the most at once", inputSchema: {} }, async () => ({
    content: [{ type: "text", text: JSON.stringify({ total: listing.total, max_concurrent: listing.maxInFlight }) }],
  }));
  let grown = 0;
  server.registerTool("whoami", { description: "Name of the transport", inputSchema: {} }, async () => ({
    content: [{ type: "text", text: `dynamic over ${transportName}` }],
  }));
  server.registerTool("grow", { description: "Register one more tool", inputSchema: {} }, async () => {
    grown += 1;
    const n = grown;
    server.registerTool(`grown_${n}`, { description: `Grown tool ${n}`, inputSchema: {} }, async () => ({
      content: [{ type: "text", text: `grown ${n}` }],
    }));
    return { content: [{ type: "text", text: `now ${n} grown` }] };
  });
  server.registerTool(
    "fail",
    { description: "Fail, quoting a secret", inputSchema: { secret: z.string() } },
    async ({ secret }) => ({
      isError: true,
      content: [{ type: "text", text: `upstream refused Authorization: Bearer ${secret}` }],
    }),
  );
  server.registerTool(
    "hold",
    { description: "Write `path`, then never answer", inputSchema: { path: z.string() } },
    async ({ path }) => {
      await writeFile(path, "held");
      return new Promise(() => {});
    },
  );
  return server;
}

const [mode, port, key] = process.argv.slice(2);
if (mode === "http") {
  const httpServer = http.createServer(async (req, res) => {
    if (req.headers["x-api-key"] !== key) {
      res.writeHead(401, { "content-type": "text/plain" }).end("missing or wrong x-api-key");
      return;
    }
    // Stateless: one server and transport per request.
    const server = build("http");
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on("close", () => {
      transport.close();
      server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res);
  });
  httpServer.listen(Number(port), "127.0.0.1", () => {
    process.stdout.write(`listening ${httpServer.address().port}\n`);
  });
} else {
  const transport = new StdioServerTransport();
  await build("stdio").connect(transport);
  // Count tools/list requests in and their answers out, wrapping what the SDK installed.
  const receive = transport.onmessage;
  transport.onmessage = (message, extra) => {
    if (message.method === "tools/list") {
      listing.pending.add(message.id);
      listing.total += 1;
      listing.inFlight += 1;
      listing.maxInFlight = Math.max(listing.maxInFlight, listing.inFlight);
    }
    receive(message, extra);
  };
  const send = transport.send.bind(transport);
  transport.send = async (message, options) => {
    if (message.method === undefined && listing.pending.delete(message.id)) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      listing.inFlight -= 1;
    }
    return send(message, options);
  };
}
