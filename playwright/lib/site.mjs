// A plain static server over pkg/ (content types and lengths, no custom headers,
// as any static host) that counts the requests for the model's weights and,
// while `cutAfter` is set, ends those responses after that many bytes: a
// download that breaks off, for the in-browser model's specs. `served` maps a
// path (`models/manifest.json`) to bytes answered in place of pkg/'s: a hostile
// model folder (`null`: a 404, whatever pkg/ holds). While `down` is set every
// request is refused, as a server that has gone away.
import { createReadStream, existsSync, statSync } from "node:fs";
import { createServer } from "node:http";
import { extname, join, normalize } from "node:path";
import { fileURLToPath } from "node:url";

export const PKG = fileURLToPath(new URL("../../pkg/", import.meta.url));
const TYPES = { ".html": "text/html", ".js": "text/javascript", ".wasm": "application/wasm", ".css": "text/css", ".json": "application/json" };

/** Starts the server on a free port: `{url, weightRequests, cutAfter, served, down, close()}`. */
export function startSite() {
  const site = { weightRequests: 0, cutAfter: null, served: {}, down: false };
  const server = createServer((request, response) => {
    if (site.down) {
      request.socket.destroy();
      return;
    }
    const path = normalize(decodeURIComponent(new URL(request.url, "http://x").pathname)).replace(/^\/+/, "");
    if (Object.hasOwn(site.served, path) && site.served[path] === null) {
      response.writeHead(404).end();
      return;
    }
    if (Object.hasOwn(site.served, path)) {
      const body = Buffer.from(site.served[path]);
      response.writeHead(200, { "content-type": TYPES[extname(path)] ?? "application/octet-stream", "content-length": body.length });
      response.end(body);
      return;
    }
    const file = join(PKG, path === "" ? "index.html" : path);
    if (path.includes("..") || !existsSync(file) || !statSync(file).isFile()) {
      response.writeHead(404).end();
      return;
    }
    const size = statSync(file).size;
    response.writeHead(200, { "content-type": TYPES[extname(file)] ?? "application/octet-stream", "content-length": size });
    if (file.endsWith(".gguf")) {
      site.weightRequests += 1;
      if (site.cutAfter !== null) {
        createReadStream(file, { end: site.cutAfter - 1 })
          .on("data", (chunk) => response.write(chunk))
          .on("end", () => response.socket.destroy());
        return;
      }
    }
    createReadStream(file).pipe(response);
  });
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () => {
      site.url = `http://127.0.0.1:${server.address().port}/`;
      site.close = () => new Promise((done) => server.close(done));
      resolve(site);
    }),
  );
}
