// The MCP TypeScript SDK's client against a server it starts over stdio: what
// `kiln mcp serve --stdio`'s tests check. Usage:
//   node servers/mcp_sdk_client.mjs CALLS.json COMMAND ARGS...
// CALLS.json is a list of `{name, arguments}`; prints one JSON object:
// `{server, tools, results}` (each result as the SDK returns it, or
// `{thrown}` when the call was refused).
import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [callsFile, command, ...args] = process.argv.slice(2);
const calls = JSON.parse(readFileSync(callsFile, "utf8"));
const transport = new StdioClientTransport({ command, args, stderr: "inherit" });
const client = new Client({ name: "kiln-test", version: "1.0.0" });
await client.connect(transport);
const server = client.getServerVersion();
const { tools } = await client.listTools();
const results = [];
for (const call of calls) {
  try {
    results.push(await client.callTool(call));
  } catch (error) {
    results.push({ thrown: String(error.message ?? error) });
  }
}
await client.close();
console.log(JSON.stringify({ server, tools, results }));
