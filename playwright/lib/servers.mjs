// Real peers the specs start on 127.0.0.1 and stop after: the MCP reference
// server (`@modelcontextprotocol/server-everything`, Streamable HTTP at /mcp),
// aimock (mock LLM providers, fixtures in servers/aimock), the local model
// (SmolLM2-135M behind llama.cpp, servers/local_model.py), and a tiny HTTP
// server that answers with the request it got. `cargo xtask test` installs
// them and passes where they are in KILN_* variables.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { createServer, connect } from "node:net";
import http from "node:http";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { after, before } from "node:test";

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

/**
 * Spawns a server and resolves with the first stdout line `found` accepts (the
 * rest of stdout is drained); rejects when it exits first or after `timeoutMs`,
 * with its last stderr lines.
 */
function spawnUntil(command, args, { name, timeoutMs, found, stdin = "ignore" }) {
  const child = spawn(command, args, { stdio: [stdin, "pipe", "pipe"] });
  const tail = [];
  createInterface({ input: child.stderr }).on("line", (line) => {
    tail.push(line);
    if (tail.length > 15) tail.shift();
  });
  return new Promise((resolve, reject) => {
    let settled = false;
    const fail = (what) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      child.kill("SIGKILL");
      // Let the stderr reader take the last words.
      setTimeout(() => reject(new Error(`${what}; its last words:\n${tail.join("\n")}`)), 100);
    };
    const timer = setTimeout(() => fail(`${name} is not listening after ${timeoutMs / 1000} s`), timeoutMs);
    child.once("error", (error) => fail(`cannot start ${name} (${command}): ${error.message}`));
    child.once("exit", (code, signal) => fail(`${name} exited (${code ?? signal}) before listening`));
    createInterface({ input: child.stdout }).on("line", (line) => {
      if (settled || !found(line)) return;
      settled = true;
      clearTimeout(timer);
      resolve({ child, line });
    });
  });
}

function stopper(child) {
  let exited = child.exitCode !== null || child.signalCode !== null;
  child.once("exit", () => (exited = true));
  return async () => {
    if (exited) return;
    const gone = new Promise((resolve) => child.once("exit", resolve));
    child.stdin?.end();
    child.kill("SIGKILL");
    await gone;
  };
}

/**
 * Starts aimock (mock OpenAI, Anthropic and Ollama endpoints) on a free port
 * with servers/aimock's fixtures, strict: an unmatched request is a 503.
 * `url` is the root (OpenAI at `${url}/v1`); `journal()` is every request so
 * far (GET /__aimock/journal); `stop()` kills it.
 */
export async function startAimock() {
  const pkg = process.env.KILN_AIMOCK;
  const fixtures = process.env.KILN_AIMOCK_FIXTURES;
  if (!pkg || !existsSync(join(pkg, "dist/cli.js"))) {
    throw new Error(`aimock is not installed (KILN_AIMOCK=${pkg}); cargo xtask test installs it`);
  }
  if (!fixtures || !existsSync(fixtures)) {
    throw new Error(`aimock's fixtures are missing (KILN_AIMOCK_FIXTURES=${fixtures}); cargo xtask test sets it to servers/aimock`);
  }
  const args = [join(pkg, "dist/cli.js"), "--host", "127.0.0.1", "--port", "0", "--strict", "--log-level", "info", "--fixtures", fixtures];
  const { child, line } = await spawnUntil(process.execPath, args, {
    name: "aimock",
    timeoutMs: 15_000,
    found: (text) => text.includes("listening on http://"),
  });
  const port = Number(line.slice(line.lastIndexOf(":") + 1));
  const url = `http://127.0.0.1:${port}`;
  return {
    port,
    url,
    async journal() {
      const response = await fetch(`${url}/__aimock/journal`);
      if (!response.ok) throw new Error(`GET /__aimock/journal answered ${response.status}`);
      return response.json();
    },
    stop: stopper(child),
  };
}

/**
 * Starts the local model (SmolLM2-135M-Instruct behind llama.cpp's server,
 * model id `smollm2-135m-instruct`) on a free port; waits for it to load (at
 * most 60 s). `url` is the root (OpenAI at `${url}/v1`); `stop()` kills it.
 */
export async function startLocalModel() {
  if (process.env.KILN_LOCAL_MODEL_ERROR) {
    throw new Error(`the local model is not available: ${process.env.KILN_LOCAL_MODEL_ERROR}`);
  }
  const python = process.env.KILN_LOCAL_MODEL_PYTHON;
  const script = process.env.KILN_LOCAL_MODEL_SCRIPT;
  if (!python || !existsSync(python) || !script || !existsSync(script)) {
    throw new Error(
      `the local model is not installed (KILN_LOCAL_MODEL_PYTHON=${python}, KILN_LOCAL_MODEL_SCRIPT=${script}); cargo xtask test installs it`,
    );
  }
  let lastError;
  // A free port can be taken between choosing and binding it: try thrice.
  for (let attempt = 0; attempt < 3; attempt += 1) {
    const port = await freePort();
    try {
      // stdin stays open: the server exits when it closes (when this process ends).
      const { child } = await spawnUntil(python, [script, "--port", String(port)], {
        name: "the local model server",
        timeoutMs: 60_000,
        found: (text) => text.startsWith("listening "),
        stdin: "pipe",
      });
      return { port, url: `http://127.0.0.1:${port}`, model: "smollm2-135m-instruct", stop: stopper(child) };
    } catch (error) {
      lastError = error;
      if (!String(error.message).includes("couldn't bind")) throw error;
    }
  }
  throw lastError;
}

/**
 * For a spec file: starts aimock before its tests and stops it after them.
 * Returns a function giving the running aimock (`{url, journal()}`).
 */
export function useAimock() {
  let mock;
  before(async () => {
    mock = await startAimock();
  });
  after(async () => {
    await mock?.stop();
  });
  return () => mock;
}

/**
 * A small MCP server over Streamable HTTP (CORS open) whose `tools/call` answers as the
 * conformance suite's `sse-retry` scenario does: a stream holding only a priming event (an
 * id and `retry: 500`) that it then closes; the answer comes on the GET that resumes with
 * `Last-Event-ID`. Its one tool is `echo({text})`. `resumes` lists each resumption, with how
 * long after the close it came.
 */
export async function startResuming() {
  const pending = new Map();
  const resumes = [];
  let next = 0;
  let closedAt = 0;
  const cors = {
    "access-control-allow-origin": "*",
    "access-control-allow-headers": "*",
    "access-control-allow-methods": "GET, POST, DELETE, OPTIONS",
    "access-control-expose-headers": "mcp-session-id",
  };
  const server = http.createServer(async (request, response) => {
    if (request.method === "OPTIONS" || request.method === "DELETE") {
      response.writeHead(request.method === "OPTIONS" ? 204 : 200, cors);
      return response.end();
    }
    if (request.method === "GET") {
      const last = request.headers["last-event-id"];
      if (!last || !pending.has(last)) {
        // The session's own stream is not offered.
        response.writeHead(405, { ...cors, allow: "POST, DELETE" });
        return response.end();
      }
      resumes.push({ lastEventId: last, afterMs: Date.now() - closedAt });
      response.writeHead(200, { ...cors, "content-type": "text/event-stream" });
      response.write(`id: ${last}-answer\nevent: message\ndata: ${JSON.stringify(pending.get(last))}\n\n`);
      pending.delete(last);
      return response.end();
    }
    let body = "";
    for await (const chunk of request) body += chunk;
    const message = JSON.parse(body);
    if (message.id === undefined) {
      response.writeHead(202, cors);
      return response.end();
    }
    const json = (result, headers = {}) => {
      response.writeHead(200, { ...cors, "content-type": "application/json", ...headers });
      response.end(JSON.stringify({ jsonrpc: "2.0", id: message.id, result }));
    };
    switch (message.method) {
      case "initialize":
        return json(
          { protocolVersion: "2025-06-18", capabilities: { tools: {} }, serverInfo: { name: "resuming", version: "1" } },
          { "mcp-session-id": "resuming-1" },
        );
      case "tools/list":
        return json({
          tools: [
            {
              name: "echo",
              description: "Echoes its text, answering on a resumed stream.",
              inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
            },
          ],
        });
      case "tools/call": {
        const id = `call-${++next}`;
        pending.set(id, {
          jsonrpc: "2.0",
          id: message.id,
          result: { content: [{ type: "text", text: `resumed: ${message.params.arguments.text}` }] },
        });
        response.writeHead(200, { ...cors, "content-type": "text/event-stream" });
        response.write(`id: ${id}\nretry: 500\ndata: \n\n`);
        closedAt = Date.now();
        return response.end();
      }
      default:
        return json({});
    }
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}/mcp`,
    resumes,
    stop: () =>
      new Promise((resolve) => {
        server.closeAllConnections?.();
        server.close(resolve);
      }),
  };
}
