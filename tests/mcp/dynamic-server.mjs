// A small real MCP server built on the official TypeScript SDK, for the tools tests.
//   node dynamic-server.mjs stdio              — over stdio
//   node dynamic-server.mjs http <port> <key>  — streamable HTTP on 127.0.0.1:<port>/mcp,
//                                                 every request must carry `x-api-key: <key>`
// Tools: `grow` registers a new tool `grown_<n>` at run time (the SDK then sends
// notifications/tools/list_changed); `whoami` answers with the transport's name;
// `fail` answers with an error result that quotes its `secret` argument; `hold` writes the
// file `path` (so a test knows the call arrived) and never answers.
import { writeFile } from "node:fs/promises";
import http from "node:http";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";

function build(transportName) {
  const server = new McpServer({ name: "hermes-dynamic", version: "1.0.0" });
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
  await build("stdio").connect(new StdioServerTransport());
}
