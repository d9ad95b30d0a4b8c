// Bundles the peer worker into one self-contained module-worker script: a browser
// worker cannot resolve bare import specifiers, and the wasm is embedded as data.
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const SOURCE = fileURLToPath(new URL("worker.src.mjs", import.meta.url));

/** Bundles `entry` and what it imports into one browser module at `outFile`. */
export async function bundle(entry, outFile) {
  await build({
    entryPoints: [entry],
    outfile: outFile,
    bundle: true,
    format: "esm",
    platform: "browser",
    // The worker awaits the wasm module at top level.
    target: "es2022",
    minify: true,
    logLevel: "warning",
  });
}

/** Writes the bundled peer worker to `outFile`. */
export async function buildPeerWorker(outFile) {
  await bundle(SOURCE, outFile);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const outFile = process.argv[2];
  if (!outFile) {
    console.error("usage: node build.mjs OUTFILE");
    process.exit(2);
  }
  await buildPeerWorker(outFile);
}
