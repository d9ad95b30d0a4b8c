// Real peers the specs start on 127.0.0.1 and stop after: the MCP reference
// server (`@modelcontextprotocol/server-everything`, Streamable HTTP at /mcp),
// and a tiny HTTP server that answers with the request it got.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { createServer, connect } from "node:net";
import http from "node:http";
import { join } from "node:path";

/** A loopback port nothing listens on (bound, then released). */
export async function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

function listening(port) {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    socket.once("connect", () => (socket.destroy(), resolve(true)));
    socket.once("error", () => resolve(false));
  });
}

/** Starts the MCP reference server; `stop()` kills it. */
export async function startEverything(port) {
  const pkg = process.env.KILN_MCP_EVERYTHING;
  if (!pkg || !existsSync(join(pkg, "dist/index.js"))) {
    throw new Error(`the MCP reference server is not installed (KILN_MCP_EVERYTHING=${pkg}); cargo xtask test installs it`);
  }
  port ??= await freePort();
  const child = spawn(process.execPath, [join(pkg, "dist/index.js"), "streamableHttp"], {
    env: { ...process.env, PORT: String(port) },
    stdio: "ignore",
  });
  let exited = null;
  child.once("exit", (code) => (exited = code ?? "signal"));
  const deadline = Date.now() + 15_000;
  while (!(await listening(port))) {
    if (exited !== null) throw new Error(`the MCP reference server exited (${exited}) before listening on ${port}`);
    if (Date.now() > deadline) throw new Error(`the MCP reference server is not listening on ${port} after 15 s`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return {
    port,
    url: `http://127.0.0.1:${port}/mcp`,
    async stop() {
      if (exited !== null) return;
      const gone = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGKILL");
      await gone;
    },
  };
}

/** An HTTP server that answers every request with its headers as JSON (CORS open). */
export async function startEcho() {
  const server = http.createServer((request, response) => {
    response.writeHead(200, {
      "content-type": "application/json",
      "access-control-allow-origin": "*",
      "access-control-allow-headers": "*",
    });
    response.end(JSON.stringify({ method: request.method, headers: request.headers }));
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}/`,
    stop: () => new Promise((resolve) => server.close(resolve)),
  };
}
