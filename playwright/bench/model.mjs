// Kiln's own model (SmolLM2-135M-Instruct, Q8_0) beside its peers, in one run on one
// machine: Kiln's in-browser provider (`kiln.chat` with `{kind: "browser"}`: the model
// worker's candle) and wllama (npm `@wllama/wllama`: llama.cpp in wasm) in the same
// headless Chromium page, and llama.cpp natively (PyPI `xllamacpp`,
// `servers/model_bench.py`). All three run the GGUF Kiln ships (`pkg/models/`) on one
// thread, greedy, on the same prompt tokens: Kiln renders the user's text with the
// model's own chat template, the peers get that rendering as a raw prompt. After one
// warm-up turn each, ROUNDS measured rounds taken in turn (Kiln, wllama, native);
// medians. Prints JSON lines that `cargo xtask bench` shows. Not a test: it asserts
// nothing about time.
//
// Time to first token runs from the call (`kiln.chat`, `createCompletion`,
// `handle_completions`) to the first text; the generation rate is
// (output tokens - 1) / (last text - first text), measured the same way for all three.
// Kiln's turns run with the model already loaded from the Cache API (the page is
// reloaded after the download). The page is served by a plain static server (content
// types and lengths, no COOP/COEP headers, as `cargo xtask serve`): no
// SharedArrayBuffer, so wllama runs its single-thread path, as it would on any host.
import { spawn } from "node:child_process";
import { readFileSync, statSync } from "node:fs";
import { createServer } from "node:http";
import { createRequire } from "node:module";
import { dirname, extname, join, normalize } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { launch } from "../lib/browser.mjs";

const PKG = process.env.KILN_PKG;
const PYTHON = process.env.KILN_LOCAL_MODEL_PYTHON;
const NATIVE_SCRIPT = fileURLToPath(new URL("../../servers/model_bench.py", import.meta.url));
// wllama's ES module build: `index.js` (its worker's code is inside) and `wasm/wllama.wasm`.
const WLLAMA = join(dirname(createRequire(import.meta.url).resolve("@wllama/wllama/package.json")), "esm");
const WLLAMA_VERSION = JSON.parse(readFileSync(join(WLLAMA, "../package.json"), "utf8")).version;

const ROUNDS = 3;
const MAX_TOKENS = 128;
const MODEL = "smollm2-135m-instruct";
// A request whose greedy reply runs past MAX_TOKENS on all three (checked: 400 tokens
// without an end of turn natively), so every turn makes exactly MAX_TOKENS tokens.
const TEXT = "Write a long story about a dragon who learns to bake bread.";
// The GGUF's `tokenizer.chat_template` for one user message, with the system prompt it
// adds when there is none, and `add_generation_prompt`; no BOS (`add_bos_token` false).
const SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face";
const RAW_PROMPT = `<|im_start|>system\n${SYSTEM}<|im_end|>\n<|im_start|>user\n${TEXT}<|im_end|>\n<|im_start|>assistant\n`;
// Kiln's aims for its own model (issue 18).
const AIM_TTFT_MS = 300;
const AIM_TOKENS_PER_S = 50;
// As `servers/model_bench.py`; Kiln's context grows with the turn.
const WLLAMA_CONTEXT = 2048;

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const round = (x, digits = 1) => (x === null || x === undefined ? null : Math.round(x * 10 ** digits) / 10 ** digits);
const ratio = (a, b) => (a && b ? round(a / b, 2) : null);

/** The bench page: the page API and wllama are imported by the calls below. */
const PAGE = `<!doctype html>
<meta charset="utf-8">
<title>Kiln model bench</title>
<script>
// wllama starts its worker from a Blob of JavaScript (emscripten's glue inside), whose
// module scope no one can reach: its source gets a prefix that keeps every
// WebAssembly.Memory it makes, so the bench can read the wasm memory's size.
(() => {
  const HOOK = "{const M=WebAssembly.Memory;globalThis.__wasmMemories=[];WebAssembly.Memory=new Proxy(M,{construct(t,a,n){const m=Reflect.construct(t,a,n);globalThis.__wasmMemories.push(m);return m;}});}\\n";
  const Base = Blob;
  window.Blob = class extends Base {
    constructor(parts, options) {
      if (options?.type === "text/javascript" && typeof parts?.[0] === "string" && parts[0].includes("wModuleInit")) parts = [HOOK, ...parts];
      super(parts, options);
    }
  };
})();
</script>
`;

/** A plain static server: `pkg/` at the root, wllama's build under `/wllama/`, the page. */
function servePlain() {
  const types = { ".html": "text/html", ".js": "text/javascript", ".mjs": "text/javascript", ".wasm": "application/wasm", ".json": "application/json", ".css": "text/css" };
  const served = new Set();
  const server = createServer((request, response) => {
    const path = normalize(decodeURIComponent(new URL(request.url, "http://x").pathname)).replace(/^\/+/, "");
    if (path === "model-bench.html") {
      response.writeHead(200, { "content-type": "text/html", "content-length": Buffer.byteLength(PAGE) }).end(PAGE);
      return;
    }
    const file = path.startsWith("wllama/") ? join(WLLAMA, path.slice("wllama/".length)) : join(PKG, path);
    let size;
    try {
      if (path.includes("..") || !statSync(file).isFile()) throw new Error("not a file");
      size = statSync(file).size;
    } catch {
      response.writeHead(404).end();
      return;
    }
    served.add(path);
    response.writeHead(200, { "content-type": types[extname(file)] ?? "application/octet-stream", "content-length": size });
    if (request.method === "HEAD") response.end();
    else response.end(readFileSync(file));
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve({ server, served, url: `http://127.0.0.1:${server.address().port}/` })));
}

/** In the page: loads the page API and keeps the model's statuses. */
async function kilnLoad() {
  const { Kiln } = await import("/kiln.js");
  window.kiln = await Kiln.load();
  window.modelStatuses = [];
  window.kiln.onModelStatus((status) => window.modelStatuses.push(status));
}

/** In the page: one turn of Kiln's own model, timed from the call. */
async function kilnTurn({ text, model, maxTokens }) {
  let first = null;
  let last = null;
  const started = performance.now();
  const message = await window.kiln.chat({
    provider: { kind: "browser" },
    messages: [{ role: "user", text }],
    options: { model, max_tokens: maxTokens },
    onEvent: (event) => {
      if (event.type !== "text_delta" || !event.text) return;
      last = performance.now();
      first ??= last;
    },
  });
  const tokens = message.usage.output_tokens;
  return {
    ttft_ms: first - started,
    tokens_per_s: (tokens - 1) / ((last - first) / 1000),
    input_tokens: message.usage.input_tokens,
    output_tokens: tokens,
    stop: message.stop.reason,
    text: message.text,
    ready: window.modelStatuses.findLast((status) => status.state === "ready") ?? null,
  };
}

/** In the page: wllama on one thread with the GGUF fetched from the same server. */
async function wllamaLoad({ modelUrl, context }) {
  const { Wllama } = await import("/wllama/index.js");
  const quiet = { debug() {}, log() {}, warn: console.warn, error: console.error };
  const wllama = new Wllama({ default: "/wllama/wasm/wllama.wasm" }, { logger: quiet });
  const started = performance.now();
  const blob = await (await fetch(modelUrl)).blob();
  // No GPU layers: with an adapter it would offload to WebGPU.
  await wllama.loadModel([blob], { n_threads: 1, n_ctx: context, n_gpu_layers: 0, n_parallel: 1 });
  window.wllama = wllama;
  return {
    load_ms: performance.now() - started,
    multithread: wllama.isMultithread(),
    threads: wllama.getNumThreads(),
    isolated: self.crossOriginIsolated,
  };
}

/** In the page: one wllama completion of the raw prompt, timed from the call. */
async function wllamaTurn({ prompt, maxTokens }) {
  let first = null;
  let last = null;
  let timings = null;
  let text = "";
  const started = performance.now();
  await window.wllama.createCompletion({
    prompt,
    max_tokens: maxTokens,
    temperature: 0, // greedy
    top_k: 1,
    cache_prompt: false, // the prompt is processed again each turn, as Kiln's is
    stream: true,
    onData: (chunk) => {
      const piece = chunk.choices?.[0]?.text ?? "";
      if (piece) {
        last = performance.now();
        first ??= last;
        text += piece;
      }
      if (chunk.timings) timings = chunk.timings;
    },
  });
  const tokens = timings.predicted_n;
  return {
    ttft_ms: first - started,
    tokens_per_s: (tokens - 1) / ((last - first) / 1000),
    input_tokens: timings.prompt_n,
    output_tokens: tokens,
    llama_tokens_per_s: timings.predicted_per_second,
    llama_prompt_ms: timings.prompt_ms,
    text,
  };
}

/** The native peer: `servers/model_bench.py` kept running, one JSON line per turn. */
async function startNative(gguf) {
  const child = spawn(PYTHON, [NATIVE_SCRIPT, gguf], { stdio: ["pipe", "pipe", "ignore"] });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const next = async () => {
    const { value, done } = await lines.next();
    if (done) throw new Error(`${NATIVE_SCRIPT} ended early (exit ${child.exitCode}); run it by hand to see why`);
    return JSON.parse(value);
  };
  const ready = await next();
  return {
    ready,
    async turn() {
      child.stdin.write(`${JSON.stringify({ prompt: RAW_PROMPT, max_tokens: MAX_TOKENS })}\n`);
      const answer = await next();
      return { ...answer, input_tokens: answer.prompt_tokens };
    },
    stop() {
      child.stdin.end();
    },
  };
}

/** Bytes of `files` (paths under `dir`) as sent raw and with gzip -9. */
function sizes(dir, files) {
  const each = files.map((path) => {
    const bytes = readFileSync(join(dir, path));
    return { path, raw: bytes.length, gzip: gzipSync(bytes, { level: 9 }).length };
  });
  return { raw: each.reduce((sum, f) => sum + f.raw, 0), gzip: each.reduce((sum, f) => sum + f.gzip, 0), files: each };
}

/** `true` when sides `a` and `b` wrote the same text, else where they part and what each wrote from there. */
function agreement(texts, a, b) {
  let at = 0;
  while (at < Math.min(texts[a].length, texts[b].length) && texts[a][at] === texts[b][at]) at++;
  if (at === texts[a].length && at === texts[b].length) return true;
  return { differs_at_char: at, [a]: texts[a].slice(at, at + 24), [b]: texts[b].slice(at, at + 24) };
}

const manifest = JSON.parse(readFileSync(join(PKG, "models/manifest.json"), "utf8"));
const { server, served, url } = await servePlain();
const browser = await launch();
let native = null;
try {
  const { page } = browser;
  const pageErrors = [];
  page.on("pageerror", (error) => pageErrors.push(String(error)));
  await page.goto(`${url}model-bench.html`);

  // The first turn downloads the model into the Cache API; after a reload the model
  // worker reads it from there, as on any later visit.
  await page.evaluate(kilnLoad);
  const download = await page.evaluate(kilnTurn, { text: TEXT, model: MODEL, maxTokens: 1 });
  await page.reload();
  await page.evaluate(kilnLoad);
  const kilnWarm = await page.evaluate(kilnTurn, { text: TEXT, model: MODEL, maxTokens: MAX_TOKENS });
  if (!kilnWarm.ready?.from_cache) throw new Error(`Kiln's model did not load from the cache after a reload: ${JSON.stringify(kilnWarm.ready)}`);

  const wllamaLoaded = await page.evaluate(wllamaLoad, { modelUrl: `/models/${manifest.weights.file}`, context: WLLAMA_CONTEXT });
  await page.evaluate(wllamaTurn, { prompt: RAW_PROMPT, maxTokens: MAX_TOKENS });

  let nativeError = process.env.KILN_LOCAL_MODEL_ERROR ?? (PYTHON ? null : "KILN_LOCAL_MODEL_PYTHON is not set");
  if (!nativeError) {
    native = await startNative(join(PKG, "models", manifest.weights.file));
    await native.turn();
  }

  const runs = { kiln: [], wllama: [], native: [] };
  for (let r = 0; r < ROUNDS; r++) {
    runs.kiln.push(await page.evaluate(kilnTurn, { text: TEXT, model: MODEL, maxTokens: MAX_TOKENS }));
    runs.wllama.push(await page.evaluate(wllamaTurn, { prompt: RAW_PROMPT, maxTokens: MAX_TOKENS }));
    if (native) runs.native.push(await native.turn());
  }
  // The wasm memory of wllama's worker, after its turns (llama.cpp allocates its KV
  // cache and compute buffers when it loads, so this is also its size once loaded).
  let wllamaMemory = null;
  for (const worker of page.workers()) {
    const memories = await worker.evaluate(() => globalThis.__wasmMemories?.map((m) => m.buffer.byteLength)).catch(() => undefined);
    if (memories?.length) wllamaMemory = Math.max(...memories);
  }
  if (pageErrors.length) throw new Error(`the page failed: ${pageErrors.join("; ")}`);

  const sides = Object.entries(runs).filter(([, list]) => list.length);
  const med = (key) => Object.fromEntries(sides.map(([side, list]) => [side, round(median(list.map((run) => run[key])))]));
  const samples = (key) => Object.fromEntries(sides.map(([side, list]) => [side, list.map((run) => round(run[key]))]));
  const texts = Object.fromEntries(sides.map(([side, list]) => [side, list[0].text]));
  console.log(
    JSON.stringify({
      figure: `model turns: SmolLM2-135M-Instruct ${manifest.dtype}, one thread, greedy, ${MAX_TOKENS} tokens, median of ${ROUNDS} rounds after a warm-up each; peers wllama ${WLLAMA_VERSION} (same page) and llama.cpp natively (xllamacpp)`,
      prompt: TEXT,
      input_tokens: Object.fromEntries(sides.map(([side, list]) => [side, list[0].input_tokens])),
      output_tokens: Object.fromEntries(sides.map(([side, list]) => [side, list.map((run) => run.output_tokens)])),
      kiln_stop: runs.kiln[0].stop,
      same_text: { kiln_wllama: agreement(texts, "kiln", "wllama"), ...(native ? { kiln_native: agreement(texts, "kiln", "native"), wllama_native: agreement(texts, "wllama", "native") } : {}) },
      wllama: wllamaLoaded.multithread || wllamaLoaded.threads !== 1 ? { warning: "wllama did not run on one thread", ...wllamaLoaded } : undefined,
      ...(native ? {} : { native: `skipped: ${nativeError}` }),
    }),
  );
  const rate = med("tokens_per_s");
  const ttft = med("ttft_ms");
  console.log(JSON.stringify({ figure: "generation, tokens/s: (output tokens - 1) / (last text - first text)", ...rate, kiln_vs_wllama: ratio(rate.kiln, rate.wllama), kiln_vs_native: ratio(rate.kiln, rate.native), samples: samples("tokens_per_s"), llama_own_tokens_per_s: { wllama: round(median(runs.wllama.map((run) => run.llama_tokens_per_s))), native: round(median(runs.native.map((run) => run.llama_tokens_per_s))) } }));
  console.log(JSON.stringify({ figure: "time to first token, ms: the call to the first text (Kiln's model loaded from the Cache API)", ...ttft, kiln_vs_wllama: ratio(ttft.kiln, ttft.wllama), kiln_vs_native: ratio(ttft.kiln, ttft.native), samples: samples("ttft_ms"), llama_own_prompt_ms: { wllama: round(median(runs.wllama.map((run) => run.llama_prompt_ms))), native: round(median(runs.native.map((run) => run.llama_prompt_ms))) } }));

  const ready = kilnWarm.ready;
  const nativeMemory = runs.native.at(-1);
  console.log(
    JSON.stringify({
      figure: "memory, bytes: Kiln's model worker wasm memory once loaded (ready.memory_bytes), wllama's worker wasm memory after its turns, native RSS of the python process (llama.cpp and the interpreter)",
      kiln_wasm: ready.memory_bytes,
      wllama_wasm: wllamaMemory,
      kiln_vs_wllama: ratio(ready.memory_bytes, wllamaMemory),
      native_rss: nativeMemory?.rss_bytes ?? null,
      native_peak_rss: nativeMemory?.peak_rss_bytes ?? null,
    }),
  );
  console.log(
    JSON.stringify({
      figure: "loading, ms: Kiln's first turn (download, check, cache, load) and after a reload (read from the Cache API, check, load); wllama's fetch and load; native load",
      kiln_download: round(download.ready?.load_ms),
      kiln_from_cache: round(ready.load_ms),
      wllama: round(wllamaLoaded.load_ms),
      native: round(native?.ready.load_ms),
    }),
  );

  // What a visitor downloads for each: code, then weights (and Kiln's tokenizer).
  const kilnCode = sizes(PKG, ["workers/model.js", "kiln_model_worker.js", "kiln_model_worker_bg.wasm"]);
  const tokenizer = sizes(PKG, [`models/${manifest.tokenizer.file}`]);
  const wllamaPaths = [...served].filter((path) => path.startsWith("wllama/")).map((path) => path.slice("wllama/".length)).sort();
  const wllamaCode = sizes(WLLAMA, wllamaPaths);
  const weights = manifest.weights.bytes;
  console.log(
    JSON.stringify({
      figure: "download, bytes (gzip -9 as a static host would send code; the GGUF barely compresses and is counted raw)",
      kiln: { code_raw: kilnCode.raw, code_gzip: kilnCode.gzip, tokenizer_raw: tokenizer.raw, tokenizer_gzip: tokenizer.gzip, weights, total_gzip: kilnCode.gzip + tokenizer.gzip + weights, files: kilnCode.files },
      wllama: { code_raw: wllamaCode.raw, code_gzip: wllamaCode.gzip, weights, total_gzip: wllamaCode.gzip + weights, files: wllamaCode.files },
      kiln_code_vs_wllama_gzip: ratio(kilnCode.gzip, wllamaCode.gzip),
    }),
  );

  const verdict = (met, by) => (met ? "met" : `missed by ${by}`);
  console.log(
    JSON.stringify({
      figure: `aims: first token once cached ≤ ${AIM_TTFT_MS} ms; generation ≥ ${AIM_TOKENS_PER_S} tokens/s and ≥ wllama`,
      ttft_ms: ttft.kiln,
      ttft: verdict(ttft.kiln <= AIM_TTFT_MS, `${round(ttft.kiln - AIM_TTFT_MS)} ms (${ratio(ttft.kiln, AIM_TTFT_MS)}× the aim)`),
      tokens_per_s: rate.kiln,
      tokens_per_s_vs_50: verdict(rate.kiln >= AIM_TOKENS_PER_S, `${round(AIM_TOKENS_PER_S - rate.kiln)} tokens/s (${ratio(rate.kiln, AIM_TOKENS_PER_S)}× the aim)`),
      tokens_per_s_vs_wllama: verdict(rate.kiln >= rate.wllama, `${round(rate.wllama - rate.kiln)} tokens/s (${ratio(rate.kiln, rate.wllama)}× wllama)`),
    }),
  );
} finally {
  native?.stop();
  await browser.close();
  server.close();
}
