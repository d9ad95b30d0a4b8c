// The MCP TypeScript SDK's client against a server: what `kiln mcp serve`'s
// tests check. Usage:
//   node servers/mcp_sdk_client.mjs CALLS.json COMMAND ARGS...   (stdio: starts the server)
//   node servers/mcp_sdk_client.mjs CALLS.json http://127.0.0.1:PORT/mcp   (Streamable HTTP)
// CALLS.json is a list of `{name, arguments}`; an argument `run_id` written
// `$N` is the `structuredContent.run_id` of result N. Prints one JSON object:
// `{server, tools, results, session}` (each result as the SDK returns it, or
// `{thrown}` when the call was refused; `session` the HTTP session id).
import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [callsFile, command, ...args] = process.argv.slice(2);
const calls = JSON.parse(readFileSync(callsFile, "utf8"));
const transport = command.startsWith("http://")
  ? new StreamableHTTPClientTransport(new URL(command))
  : new StdioClientTransport({ command, args, stderr: "inherit" });
const client = new Client({ name: "kiln-test", version: "1.0.0" });
await client.connect(transport);
const server = client.getServerVersion();
const session = transport.sessionId ?? null;
const { tools } = await client.listTools();
const results = [];
for (const call of calls) {
  const runId = call.arguments?.run_id;
  if (typeof runId === "string" && runId.startsWith("$")) {
    call.arguments.run_id = results[Number(runId.slice(1))]?.structuredContent?.run_id;
  }
  try {
    results.push(await client.callTool(call));
  } catch (error) {
    results.push({ thrown: String(error.message ?? error) });
  }
}
if (transport.terminateSession) await transport.terminateSession();
await client.close();
console.log(JSON.stringify({ server, tools, results, session }));
