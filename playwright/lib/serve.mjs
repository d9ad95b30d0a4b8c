// A static server for benchmarks: files from the first of `dirs` that has
// them, served with cross-origin isolation headers only so that
// `performance.now()` reads in 5 µs steps instead of 100 µs (sub-millisecond
// figures would otherwise be rounding). The app itself needs no such headers.
import { createReadStream, existsSync, statSync } from "node:fs";
import { createServer } from "node:http";
import { extname, join, normalize } from "node:path";

export function serveIsolated(dirs) {
  const types = { ".html": "text/html", ".js": "text/javascript", ".mjs": "text/javascript", ".wasm": "application/wasm", ".css": "text/css" };
  const server = createServer((request, response) => {
    const path = normalize(decodeURIComponent(new URL(request.url, "http://x").pathname)).replace(/^\/+/, "");
    const file = dirs.map((dir) => join(dir, path === "" ? "index.html" : path)).find((f) => existsSync(f) && statSync(f).isFile());
    if (!file || path.includes("..")) {
      response.writeHead(404).end();
      return;
    }
    response.writeHead(200, {
      "content-type": types[extname(file)] ?? "application/octet-stream",
      "cross-origin-opener-policy": "same-origin",
      "cross-origin-embedder-policy": "require-corp",
    });
    createReadStream(file).pipe(response);
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

