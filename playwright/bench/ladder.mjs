// The capability ladder's cost per call and one MCP round trip, Kiln beside
// its peers: natively (the Rust example `ladder` against Ajv and the MCP
// TypeScript SDK's client in Node) and in one headless Chromium (the page's
// wasm against the same two, bundled for the browser). Prints JSON lines that
// `cargo xtask bench` shows. Not a test: it asserts nothing about time.
import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { launch } from "../lib/browser.mjs";
import { serveIsolated } from "../lib/serve.mjs";
import { startEverything } from "../lib/servers.mjs";

const PKG = process.env.KILN_PKG;
const LADDER = process.env.KILN_LADDER_BIN;
const SERVERS = join(process.env.KILN_MCP_EVERYTHING, "../..");
const CALLS = 200;
const ITERATIONS = 20_000;

const round = (x, digits = 3) => Math.round(x * 10 ** digits) / 10 ** digits;

// The same schema and (already folded) arguments as kiln_capabilities::bench.
const SCHEMA = {
  type: "object",
  properties: {
    workflow_id: { type: "string", minLength: 1 },
    limit: { type: "integer", minimum: 1, maximum: 100 },
    tags: { type: "array", items: { type: "string" } },
    order: { enum: ["asc", "desc"] },
  },
  required: ["workflow_id"],
  additionalProperties: false,
};
const ARGS = { workflow_id: "wf-42", limit: 10, tags: ["a", "b"], order: "desc" };

/** Median ns per validation over batches of 1,000 (runs in Node or the page). */
function ajvFigure(Ajv, schema, args, iterations, now) {
  const validate = new Ajv({ allErrors: false }).compile(schema);
  const samples = [];
  for (let b = 0; b < iterations / 1000; b++) {
    const started = now();
    for (let i = 0; i < 1000; i++) validate(structuredClone(args));
    samples.push(((now() - started) * 1e6) / 1000);
  }
  return samples.sort((a, b) => a - b)[Math.floor(samples.length / 2)];
}

/** Median and p90 ms of `calls` SDK round trips (runs in Node or the page). */
async function sdkFigure({ Client, StreamableHTTPClientTransport }, url, calls, now) {
  const client = new Client({ name: "bench-peer", version: "1.0.0" });
  const started = now();
  const transport = new StreamableHTTPClientTransport(new URL(url));
  await client.connect(transport);
  await client.listTools();
  const connect_ms = now() - started;
  const samples = [];
  for (let i = 0; i < calls; i++) {
    const t = now();
    await client.callTool({ name: "get-sum", arguments: { a: i, b: 1 } });
    samples.push(now() - t);
  }
  await transport.terminateSession?.();
  await client.close();
  samples.sort((a, b) => a - b);
  return { calls, connect_ms, median_ms: samples[Math.floor(calls / 2)], p90_ms: samples[Math.floor(calls * 0.9)] };
}

const require = createRequire(join(SERVERS, "package.json"));
const Ajv = require("ajv").default;
const sdk = {
  ...(await import(pathToFileURL(require.resolve("@modelcontextprotocol/sdk/client/index.js")))),
  ...(await import(pathToFileURL(require.resolve("@modelcontextprotocol/sdk/client/streamableHttp.js")))),
};
const server = await startEverything();
try {
  // Natively.
  const native = JSON.parse(execFileSync(LADDER, { env: { ...process.env, KILN_MCP_URL: server.url }, encoding: "utf8" }));
  const ajvNode = ajvFigure(Ajv, SCHEMA, ARGS, ITERATIONS, () => performance.now());
  const sdkNode = await sdkFigure(sdk, server.url, CALLS, () => performance.now());
  console.log(JSON.stringify({ where: "native", ladder: native.ladder, peer_ajv_validate_ns: round(ajvNode), arguments_vs_ajv: round(native.ladder.arguments_ns / ajvNode, 2) }));
  console.log(JSON.stringify({ where: "native", mcp: native.mcp, peer_sdk: sdkNode, median_vs_sdk: round(native.mcp.median_ms / sdkNode.median_ms, 2) }));

  // In Chromium: the page's wasm and the peers bundled for the browser.
  const esbuild = await import("esbuild");
  const bundle = await esbuild.build({
    stdin: {
      contents: `import Ajv from "ajv";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
window.Peers = { Ajv, Client, StreamableHTTPClientTransport };`,
      resolveDir: SERVERS,
    },
    bundle: true,
    format: "iife",
    platform: "browser",
    write: false,
    logLevel: "error",
  });
  const http = await serveIsolated([PKG]);
  const browser = await launch();
  try {
    const { page } = browser;
    await page.goto(`http://127.0.0.1:${http.address().port}/`);
    await page.addScriptTag({ content: bundle.outputFiles[0].text });
    const figures = await page.evaluate(
      async ({ url, calls, iterations, schema, args, ajvSource, sdkSource }) => {
        const { Kiln } = await import("./kiln.js");
        const kiln = await Kiln.load({ poolSize: 1 });
        const ladder = await kiln.bench("ladder", { iterations });
        const mcp = await kiln.bench("mcp", { url, calls });
        const now = () => performance.now();
        const ajv = eval(ajvSource)(window.Peers.Ajv, schema, args, iterations, now);
        const sdk = await eval(sdkSource)(window.Peers, url, calls, now);
        return { ladder, mcp, ajv, sdk };
      },
      { url: server.url, calls: CALLS, iterations: ITERATIONS, schema: SCHEMA, args: ARGS, ajvSource: `(${ajvFigure})`, sdkSource: `(${sdkFigure})` },
    );
    console.log(JSON.stringify({ where: "chromium", ladder: figures.ladder, peer_ajv_validate_ns: round(figures.ajv), arguments_vs_ajv: round(figures.ladder.arguments_ns / figures.ajv, 2) }));
    console.log(JSON.stringify({ where: "chromium", mcp: figures.mcp, peer_sdk: figures.sdk, median_vs_sdk: round(figures.mcp.median_ms / figures.sdk.median_ms, 2) }));
  } finally {
    await browser.close();
    http.close();
  }
} finally {
  await server.stop();
}
