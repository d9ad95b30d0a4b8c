// Kiln's sandbox side by side with the peer (quickjs-emscripten) in one headless
// Chromium, and natively through the `kiln` CLI. Prints JSON lines that
// `cargo xtask bench` shows. Not a test: it asserts nothing about time.
//
// Both run in a module worker of the same page. Kiln's figures come from the
// page API's `kiln.report()` (timings the sandbox measured); the peer times
// itself inside its worker. The page is served with cross-origin isolation
// headers only so that `performance.now()` reads in 5 µs steps instead of
// 100 µs (sub-millisecond figures would otherwise be rounding); the app itself
// needs no such headers.
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { launch } from "../lib/browser.mjs";
import { serveIsolated } from "../lib/serve.mjs";
import { buildPeerWorker } from "./peer/build.mjs";
import { measurePeer, openPeer } from "./peer/run-peer.mjs";

const PKG = process.env.KILN_PKG;
const CLI = process.env.KILN_CLI;
const RUNS = 5;
const STARTS = 50;
// Browsers started for the cold start, each with a fresh profile (no code
// cached from an earlier load): one sample of Kiln's and the peer's each.
const COLD = 5;

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const round = (ms) => Math.round(ms * 1000) / 1000;

// The workloads, as Kiln programs. `rows` comes from a page tool, so the 5,000
// rows cross the worker boundary both ways as well.
const PROGRAMS = {
  calls: "let r; for (let i = 0; i < 200; i++) r = await tools.echo({i}); return r.i;",
  // `bench_echo` is the bench build's runtime-side tool: guest → runtime worker → guest.
  runtime_calls: "let r; for (let i = 0; i < 200; i++) r = await tools.bench_echo({i}); return r.i;",
  rows: [
    "const rows = await tools.rows({});",
    "return rows.filter((r) => r.price > 0).map((r) => ({id: r.id, total: r.price * r.qty, label: r.name.toUpperCase()}));",
  ].join("\n"),
  fib: "function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2) } return fib(25);",
  loop: "let s = 0; for (let i = 0; i < 5e6; i++) s += i; return s;",
};
const LIMITS = { return_bytes: 1024 * 1024, js_cpu_ms: 60_000 };

async function measureKiln(page) {
  return page.evaluate(
    async ({ PROGRAMS, LIMITS, RUNS, STARTS }) => {
      const { Kiln } = await import("/kiln.js");
      const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
      const rows = Array.from({ length: 5000 }, (_, i) => ({
        id: i, name: `item-${i}`, price: (i % 100) + 0.5, qty: (i % 7) + 1, category: `cat-${i % 10}`, active: i % 3 !== 0,
      }));
      const tools = {
        echo: { description: "echo", input_schema: { type: "object" }, call: (args) => args },
        rows: { description: "rows", input_schema: { type: "object" }, call: () => rows },
      };
      const report = async (kiln, code) => {
        const t0 = performance.now();
        const { report } = await kiln.report({ code, tools, limits: LIMITS });
        if (report.outcome.status !== "completed") throw new Error(`${code}: ${JSON.stringify(report.outcome)}`);
        return { ...report, page_ms: performance.now() - t0 };
      };

      // Cold: the first run on a fresh worker, counting the build of its
      // context (done before the worker said it was ready, after a warm-up
      // run) as the peer counts its first context after the module loads.
      const t0 = performance.now();
      const cold = await Kiln.load({ poolSize: 1 });
      const loadMs = performance.now() - t0;
      const first = await report(cold, "return 1");
      const figures = { context_ms: first.context_ms, load_ms: loadMs };

      const kiln = await Kiln.load({ poolSize: 1 });
      await report(kiln, "return 1");
      const starts = [];
      for (let i = 0; i < STARTS; i++) starts.push((await report(kiln, "return 1")).start_ms);
      figures.start_warm_ms = median(starts);

      for (const [name, code] of Object.entries(PROGRAMS)) {
        await report(kiln, code);
        const inside = [];
        const page = [];
        for (let i = 0; i < RUNS; i++) {
          const result = await report(kiln, code);
          inside.push(result.duration_ms);
          page.push(result.page_ms);
        }
        figures[`${name}_ms`] = median(inside);
        figures[`${name}_page_ms`] = median(page);
      }
      return figures;
    },
    { PROGRAMS, LIMITS, RUNS, STARTS },
  );
}

/**
 * The floor under any tool call across the worker boundary: 200 sequential
 * round trips of a short JSON string between the page and a worker that only
 * echoes it, in the same browser.
 */
async function measurePingPong(page) {
  return page.evaluate(async () => {
    const source = "onmessage = (event) => postMessage(event.data);";
    const worker = new Worker(URL.createObjectURL(new Blob([source], { type: "text/javascript" })));
    const roundTrip = (message) =>
      new Promise((resolve) => {
        worker.onmessage = (event) => resolve(event.data);
        worker.postMessage(message);
      });
    const message = JSON.stringify({ v: 3, msg: { type: "tool_reply", run_id: 1, call_number: 1, reply: { Ok: { i: 1 } } } });
    for (let i = 0; i < 50; i++) await roundTrip(message);
    const samples = [];
    for (let run = 0; run < 5; run++) {
      const t0 = performance.now();
      for (let i = 0; i < 200; i++) await roundTrip(message);
      samples.push(performance.now() - t0);
    }
    worker.terminate();
    return samples.sort((a, b) => a - b)[2];
  });
}

/**
 * How the runtime worker should reach its sandbox workers: 200 sequential
 * round trips of a short JSON string from a dedicated worker (standing for
 * the runtime worker) to an echoing worker it started itself (nested), and to
 * one the page started and handed over as a MessageChannel port. Medians of 5.
 */
async function measureTopology(page) {
  return page.evaluate(async () => {
    const runtime = `
      const echo = URL.createObjectURL(new Blob(["onmessage = (e) => postMessage(e.data);"], { type: "text/javascript" }));
      const message = JSON.stringify({ v: 3, msg: { type: "tool_reply", run_id: 1, call_number: 1, reply: { Ok: { i: 1 } } } });
      async function trips(send, listen) {
        const roundTrip = () => new Promise((resolve) => { listen(resolve); send(message); });
        for (let i = 0; i < 50; i++) await roundTrip();
        const samples = [];
        for (let run = 0; run < 5; run++) {
          const t0 = performance.now();
          for (let i = 0; i < 200; i++) await roundTrip();
          samples.push(performance.now() - t0);
        }
        return samples.sort((a, b) => a - b)[2];
      }
      onmessage = async (event) => {
        if (event.data.kind === "nested") {
          const worker = new Worker(echo);
          const ms = await trips((m) => worker.postMessage(m), (done) => { worker.onmessage = (e) => done(e.data); });
          worker.terminate();
          postMessage(ms);
        } else {
          const port = event.data.port;
          postMessage(await trips((m) => port.postMessage(m), (done) => { port.onmessage = (e) => done(e.data); }));
        }
      };`;
    const url = (source) => URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
    const worker = new Worker(url(runtime));
    const ask = (message, transfer = []) => new Promise((resolve) => {
      worker.onmessage = (event) => resolve(event.data);
      worker.postMessage(message, transfer);
    });
    const nested = await ask({ kind: "nested" });
    const sandbox = new Worker(url("onmessage = (e) => { const p = e.data.port; p.onmessage = (m) => p.postMessage(m.data); };"));
    const channel = new MessageChannel();
    sandbox.postMessage({ port: channel.port1 }, [channel.port1]);
    const viaChannel = await ask({ kind: "channel", port: channel.port2 }, [channel.port2]);
    worker.terminate();
    sandbox.terminate();
    return { nested, viaChannel };
  });
}

/** JSON text against structured clones for 5,000 rows, inside the runtime worker (its `codec` bench hook). */
async function measureCodec(page) {
  return page.evaluate(async () => {
    const { Kiln } = await import("/kiln.js");
    const kiln = await Kiln.load({ poolSize: 1 });
    return kiln.bench("codec", { rows: 5000, rounds: 9 });
  });
}

/** The CodeAct loop in the runtime worker over its pool (its `codeact` bench hook): 40 program turns over a scripted provider. */
async function measureCodeact(page) {
  return page.evaluate(async () => {
    const { Kiln } = await import("/kiln.js");
    const kiln = await Kiln.load({ poolSize: 2 });
    await kiln.bench("codeact", { turns: 5 });
    return kiln.bench("codeact", { turns: 40 });
  });
}

/** The same programs through the native CLI (`kiln run --report`): the median of RUNS processes. */
function measureNative() {
  const dir = mkdtempSync(join(tmpdir(), "kiln-bench-"));
  try {
    const rows = Array.from({ length: 5000 }, (_, i) => ({
      id: i, name: `item-${i}`, price: (i % 100) + 0.5, qty: (i % 7) + 1, category: `cat-${i % 10}`, active: i % 3 !== 0,
    }));
    writeFileSync(join(dir, "tools.json"), JSON.stringify([{ name: "echo" }, { name: "bench_echo" }, { name: "rows", returns: rows }]));
    writeFileSync(join(dir, "limits.json"), JSON.stringify(LIMITS));
    const run = (code) => {
      writeFileSync(join(dir, "program.js"), code);
      const out = execFileSync(CLI, ["run", join(dir, "program.js"), "--tools", join(dir, "tools.json"), "--limits", join(dir, "limits.json"), "--report"], { maxBuffer: 64 << 20 });
      return JSON.parse(out).report;
    };
    const figures = {};
    const starts = [];
    const contexts = [];
    for (let i = 0; i < RUNS * 2; i++) {
      const report = run("return 1");
      starts.push(report.start_ms);
      contexts.push(report.context_ms);
    }
    figures.start_warm_ms = median(starts);
    figures.context_ms = median(contexts);
    figures.start_cold_ms = figures.context_ms + figures.start_warm_ms;
    for (const [name, code] of Object.entries(PROGRAMS)) {
      const samples = [];
      for (let i = 0; i < RUNS; i++) samples.push(run(code).duration_ms);
      figures[`${name}_ms`] = median(samples);
    }
    return figures;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The first run of a fresh worker in a browser that has never loaded either
 * (a fresh profile each time, so no compiled code is cached): Kiln's
 * context build and start, the peer's first context after its module loads.
 * The median of COLD browsers.
 */
async function measureCold(url) {
  const kiln = [];
  const peer = [];
  for (let i = 0; i < COLD; i++) {
    const browser = await launch();
    try {
      await browser.page.goto(url);
      kiln.push(
        await browser.page.evaluate(async (limits) => {
          const { Kiln } = await import("/kiln.js");
          const fresh = await Kiln.load({ poolSize: 1 });
          const { report } = await fresh.report({ code: "return 1", limits });
          return report.context_ms + report.start_ms;
        }, LIMITS),
      );
      const run = await openPeer(browser.page, "/bench/peer-worker.js");
      peer.push((await run("start")).cold);
    } finally {
      await browser.close();
    }
  }
  const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
  return { kiln: median(kiln), peer: median(peer) };
}

const bundleDir = mkdtempSync(join(tmpdir(), "kiln-peer-"));
await buildPeerWorker(join(bundleDir, "bench", "peer-worker.js"));
const server = await serveIsolated([PKG, bundleDir]);
const browser = await launch();
try {
  const { page } = browser;
  await page.goto(`http://127.0.0.1:${server.address().port}/`);
  const isolated = await page.evaluate(() => crossOriginIsolated);
  const kiln = await measureKiln(page);
  const peer = await measurePeer(page, "/bench/peer-worker.js");
  const cold = await measureCold(`http://127.0.0.1:${server.address().port}/`);
  kiln.start_cold_ms = cold.kiln;
  peer.start_cold_ms = cold.peer;
  const pingPong = await measurePingPong(page);
  const topology = await measureTopology(page);
  const codec = await measureCodec(page);
  const codeact = await measureCodeact(page);
  const native = CLI ? measureNative() : {};
  // [figure, Kiln's key, the peer's key]
  const rows = [
    ["run start, warm (request reaches a warm worker → first statement; peer: bare context + trivial eval)", "start_warm_ms", "start_warm_ms"],
    [`run start, cold (first run on a fresh worker in a fresh browser, its context's build included; peer: first context after the module loads; median of ${COLD} browsers)`, "start_cold_ms", "start_cold_ms"],
    ["200 sequential calls of a runtime-side tool, guest → runtime worker → guest (target ≤ peer)", "runtime_calls_ms", "calls_200_ms"],
    ["200 sequential calls of a page tool, guest → runtime worker → page → back", "calls_ms", "calls_200_ms"],
    ["5,000 rows in, filtered and mapped, 5,000 out (target ≤ 100 ms)", "rows_ms", "rows_5000_ms"],
    ["fib(25)", "fib_ms", "fib25_ms"],
    ["5e6-iteration loop", "loop_ms", "loop_5e6_ms"],
  ];
  console.log(JSON.stringify({ figure: "timer", crossOriginIsolated: isolated }));
  for (const [figure, key, peerKey] of rows) {
    const pageKey = key.replace(/_ms$/, "_page_ms");
    console.log(JSON.stringify({
      figure,
      kiln_ms: round(kiln[key]),
      peer_ms: round(peer[peerKey]),
      kiln_over_peer: Math.round((kiln[key] / peer[peerKey]) * 100) / 100,
      ...(pageKey in kiln ? { kiln_page_round_trip_ms: round(kiln[pageKey]) } : {}),
      ...(key in native ? { kiln_native_ms: round(native[key]) } : {}),
    }));
  }
  console.log(JSON.stringify({ figure: "floor: 200 bare postMessage round trips, page ⇄ an echoing worker", ms: round(pingPong) }));
  console.log(JSON.stringify({ figure: "sandbox workers, 200 round trips from a dedicated worker: nested (started by it) vs started by the page and handed over by MessageChannel", nested_ms: round(topology.nested), channel_ms: round(topology.viaChannel), nested_over_channel: Math.round((topology.nested / topology.viaChannel) * 100) / 100 }));
  console.log(JSON.stringify({ figure: `5,000 rows (${codec.json_bytes} B of JSON) across a worker boundary: encode, structuredClone, decode; JSON text (serde_json) vs a JS object (serde-wasm-bindgen)`, json_ms: round(codec.json_ms), clone_ms: round(codec.clone_ms), clone_over_json: Math.round((codec.clone_ms / codec.json_ms) * 100) / 100 }));
  console.log(JSON.stringify({ figure: `the CodeAct loop in the runtime worker, ${codeact.turns} turns of which ${codeact.actions} programs on the pool: overhead per turn (target ≤ 3 ms), execute_code call complete → guest's first statement`, overhead_per_turn_ms: round(codeact.overhead_per_turn_ms), first_statement_median_ms: round(codeact.first_statement_median_ms), first_statement_max_ms: round(codeact.first_statement_max_ms), total_ms: round(codeact.total_ms), sandbox_ms: round(codeact.sandbox_ms) }));
  console.log(JSON.stringify({ figure: "fresh worker: Kiln.load() until ready (module fetch, compile, warm-up run, first context)", kiln_ms: round(kiln.load_ms) }));
  console.log(JSON.stringify({ figure: "building one context", kiln_ms: round(kiln.context_ms), ...(native.context_ms !== undefined ? { kiln_native_ms: round(native.context_ms) } : {}) }));
} finally {
  await browser.close();
  server.close();
  rmSync(bundleDir, { recursive: true, force: true });
}
