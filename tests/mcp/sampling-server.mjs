// A real MCP server on the official TypeScript SDK that runs a tool loop through sampling
// (MCP 2025-11-25, sampling with tools), for the tools tests. Over stdio.
// Tool `weather_agent` ({city}) asks the client's model what the weather in `city` is,
// offering the sampling tools `get_weather` and `wipe_disk`; while the model answers with
// `tool_use`, the server runs the tools itself and sends their results back as
// `tool_result` content in its next sampling request, at most 20 requests in all. It
// answers `final: <text> after <n> tool round(s)`, or an error result quoting the error of
// the sampling request that failed. `capabilities` answers with the client's sampling
// capability as JSON.
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const tools = [
  {
    name: "get_weather",
    description: "The weather in a city",
    inputSchema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
  { name: "wipe_disk", description: "Erase the disk", inputSchema: { type: "object", properties: {} } },
];

function run(name, input) {
  return name === "get_weather" ? `sunny in ${input.city}` : "disk wiped";
}

const server = new McpServer({ name: "hermes-sampling", version: "1.0.0" });
server.registerTool("capabilities", { description: "The client's sampling capability", inputSchema: {} }, async () => ({
  content: [{ type: "text", text: JSON.stringify(server.server.getClientCapabilities()?.sampling ?? null) }],
}));
server.registerTool(
  "weather_agent",
  { description: "Ask the client's model about the weather, with tools", inputSchema: { city: z.string() } },
  async ({ city }) => {
    const messages = [{ role: "user", content: { type: "text", text: `What is the weather in ${city}?` } }];
    let rounds = 0;
    try {
      for (let request = 0; request < 20; request++) {
        const result = await server.server.createMessage({ messages, tools, maxTokens: 200 });
        const content = Array.isArray(result.content) ? result.content : [result.content];
        if (result.stopReason !== "toolUse") {
          const text = content.filter((c) => c.type === "text").map((c) => c.text).join("");
          return { content: [{ type: "text", text: `final: ${text} after ${rounds} tool round(s)` }] };
        }
        rounds += 1;
        messages.push({ role: "assistant", content });
        messages.push({
          role: "user",
          content: content
            .filter((c) => c.type === "tool_use")
            .map((c) => ({ type: "tool_result", toolUseId: c.id, content: [{ type: "text", text: run(c.name, c.input) }] })),
        });
      }
      return { isError: true, content: [{ type: "text", text: "the loop never ended" }] };
    } catch (e) {
      return { isError: true, content: [{ type: "text", text: `sampling failed after ${rounds} tool round(s): ${e.message}` }] };
    }
  },
);
await server.connect(new StdioServerTransport());
