// LLM providers, Kiln beside its peers: SSE parsing throughput against
// `eventsource-parser` (the SSE parser of the Vercel AI SDK and OpenAI's JS SDK
// family; 3.x, the major the AI SDK depends on and the last that runs on
// Debian's Node 20) with `JSON.parse` of each data line, on the same recorded
// bytes; the cost accounting per turn; and the time to first token through
// Kiln divided by that of a direct request to the same local model
// (SmolLM2-135M on llama.cpp). Natively (the Rust example `providers`, beside
// the peer in Node) and in one headless Chromium (the page's wasm and
// `kiln.chat`, beside the peer bundled for the browser and a plain `fetch`).
// Prints JSON lines that `cargo xtask bench` shows. Not a test: it asserts
// nothing about time.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createParser } from "eventsource-parser";
import { launch } from "../lib/browser.mjs";
import { serveIsolated } from "../lib/serve.mjs";
import { startLocalModel } from "../lib/servers.mjs";

const PKG = process.env.KILN_PKG;
const BIN = process.env.KILN_PROVIDERS_BIN;
// As the example and the `sse` bench hook take them.
const STREAM_BYTES = 1_000_000;
const SSE_ROUNDS = 20;
const WARM_UP_PAIRS = 2;
const PAIRS = 15;
const MAX_TOKENS = 8;
// The example's prompt: the same on both sides, so llama.cpp's prompt cache serves both alike.
const PROMPT = "Say hello in one short sentence.";
const MODEL = "smollm2-135m-instruct";

const round = (x, digits = 3) => Math.round(x * 10 ** digits) / 10 ** digits;

/**
 * The peer's throughput (runs in Node or the page): the bytes fed in 1,460-byte
 * pieces (one TCP segment, as Kiln takes them) through a streaming TextDecoder
 * into `eventsource-parser`, each data line but `[DONE]` parsed with
 * `JSON.parse`. Median of `rounds`, as `kiln_providers::bench::sse_throughput`.
 */
function peerSse(createParser, bytes, rounds, now) {
  let events = 0;
  const samples = [];
  for (let r = 0; r < rounds; r++) {
    const started = now();
    let count = 0;
    const decoder = new TextDecoder();
    const parser = createParser({
      onEvent(event) {
        if (event.data === "[DONE]") return;
        if (JSON.parse(event.data) !== null) count += 1;
      },
    });
    for (let at = 0; at < bytes.length; at += 1460) {
      parser.feed(decoder.decode(bytes.subarray(at, at + 1460), { stream: true }));
    }
    parser.feed(decoder.decode());
    samples.push(now() - started);
    events = count;
  }
  samples.sort((a, b) => a - b);
  const median_ms = samples[Math.floor(samples.length / 2)];
  return { bytes: bytes.length, events, median_ms, mb_per_s: bytes.length / 1e6 / (median_ms / 1000) };
}

/**
 * In the page: time to first token through `kiln.chat` and through a direct
 * `fetch` read with a ReadableStream reader, in alternating pairs (which goes
 * first alternates); each stream is read to its end before the next request
 * (the model has one slot). Medians in ms.
 */
async function pageTtft(kiln, { baseUrl, model, prompt, maxTokens, warmUp, pairs, body }) {
  const now = () => performance.now();
  async function viaKiln() {
    const started = now();
    let first = null;
    await kiln.chat({
      provider: { kind: "openai", base_url: `${baseUrl}/v1` },
      messages: [{ role: "user", text: prompt }],
      options: { model, max_tokens: maxTokens, temperature: 0 },
      onEvent: (event) => {
        if (first === null && event.type === "text_delta") first = now() - started;
      },
    });
    if (first === null) throw new Error("the local model wrote no text through kiln.chat");
    return first;
  }
  async function direct() {
    const started = now();
    const response = await fetch(`${baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "text/event-stream" },
      credentials: "omit",
      body,
    });
    if (!response.ok) throw new Error(`the local model answered ${response.status}`);
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    let first = null;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, end).trimEnd();
        buffer = buffer.slice(end + 1);
        if (first !== null || !line.startsWith("data: ") || line === "data: [DONE]") continue;
        if (JSON.parse(line.slice(6)).choices?.[0]?.delta?.content) first = now() - started;
      }
    }
    if (first === null) throw new Error("the local model wrote no text to the direct fetch");
    return first;
  }
  const kilnMs = [];
  const directMs = [];
  for (let pair = 0; pair < warmUp + pairs; pair++) {
    let k, d;
    if (pair % 2 === 0) {
      k = await viaKiln();
      d = await direct();
    } else {
      d = await direct();
      k = await viaKiln();
    }
    if (pair >= warmUp) {
      kilnMs.push(k);
      directMs.push(d);
    }
  }
  const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
  return { kiln: median(kilnMs), direct: median(directMs), kilnMin: Math.min(...kilnMs), directMin: Math.min(...directMs) };
}

const scratch = mkdtempSync(join(tmpdir(), "kiln-bench-providers-"));
try {
  // Natively: the example writes the recorded stream and prints its figures;
  // the peer parses the same bytes in Node.
  const streamPath = join(scratch, "stream.sse");
  const lines = execFileSync(BIN, ["--write-stream", streamPath], { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] })
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line));
  const native = Object.assign({}, ...lines);
  const bytes = new Uint8Array(readFileSync(streamPath));
  if (bytes.length !== native.sse.bytes) throw new Error(`the stream file has ${bytes.length} bytes, Kiln parsed ${native.sse.bytes}`);
  const peerNode = peerSse(createParser, bytes, SSE_ROUNDS, () => performance.now());
  console.log(JSON.stringify({ where: "native", sse: native.sse, peer_eventsource_parser: peerNode, mb_per_s_vs_peer: round(native.sse.mb_per_s / peerNode.mb_per_s, 2) }));
  console.log(JSON.stringify({ where: "native", cost: native.cost }));
  // The body Kiln sent (caught by the example) is the page's direct request's body too.
  const { kiln_body_text: body, ...ttft } = native.ttft;
  console.log(JSON.stringify({ where: "native", ttft }));

  // In Chromium: the page's wasm and the peer bundled for the browser, on the
  // same bytes (served beside pkg/); TTFT to a local model started here.
  const esbuild = await import("esbuild");
  const bundle = await esbuild.build({
    stdin: { contents: `import { createParser } from "eventsource-parser"; window.Peers = { createParser };`, resolveDir: process.cwd() },
    bundle: true,
    format: "iife",
    platform: "browser",
    write: false,
    logLevel: "error",
  });
  const model = await startLocalModel();
  const http = await serveIsolated([PKG, scratch]);
  const browser = await launch();
  try {
    const { page } = browser;
    await page.goto(`http://127.0.0.1:${http.address().port}/`);
    await page.addScriptTag({ content: bundle.outputFiles[0].text });
    const figures = await page.evaluate(
      async ({ streamBytes, rounds, ttftArgs, sseSource, ttftSource }) => {
        const { Kiln } = await import("./kiln.js");
        const kiln = await Kiln.load({ poolSize: 1 });
        const sse = await kiln.bench("sse", { bytes: streamBytes, rounds });
        const bytes = new Uint8Array(await (await fetch("/stream.sse")).arrayBuffer());
        const peer = eval(sseSource)(window.Peers.createParser, bytes, rounds, () => performance.now());
        const ttft = await eval(ttftSource)(kiln, ttftArgs);
        return { sse, peer, ttft };
      },
      {
        streamBytes: STREAM_BYTES,
        rounds: SSE_ROUNDS,
        ttftArgs: { baseUrl: model.url, model: MODEL, prompt: PROMPT, maxTokens: MAX_TOKENS, warmUp: WARM_UP_PAIRS, pairs: PAIRS, body },
        sseSource: `(${peerSse})`,
        ttftSource: `(${pageTtft})`,
      },
    );
    if (figures.sse.bytes !== figures.peer.bytes) throw new Error(`the page parsed ${figures.sse.bytes} bytes, the peer ${figures.peer.bytes}`);
    console.log(JSON.stringify({ where: "chromium", sse: figures.sse, peer_eventsource_parser: figures.peer, mb_per_s_vs_peer: round(figures.sse.mb_per_s / figures.peer.mb_per_s, 2) }));
    const { ttft } = figures;
    console.log(
      JSON.stringify({
        where: "chromium",
        ttft: {
          pairs: PAIRS,
          max_tokens: MAX_TOKENS,
          body_bytes: body.length,
          kiln_median_ms: round(ttft.kiln),
          direct_median_ms: round(ttft.direct),
          kiln_min_ms: round(ttft.kilnMin),
          direct_min_ms: round(ttft.directMin),
          kiln_vs_direct: round(ttft.kiln / ttft.direct),
        },
      }),
    );
  } finally {
    await browser.close();
    http.close();
    await model.stop();
  }
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
