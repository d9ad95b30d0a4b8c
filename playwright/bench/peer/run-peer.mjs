// Runs the peer (quickjs-emscripten) workloads in a module worker of an open page
// and returns their figures. The page answers the worker's tool calls itself, so
// `calls` crosses the worker boundary both ways, as Kiln's tool calls do.

const RUNS = 5;

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

/**
 * `page` is on an http://127.0.0.1 origin serving the bundle from build.mjs at
 * `workerUrl`. Resolves to the figures in ms; fib, loop, rows and calls are the
 * median of RUNS runs after one warm-up.
 */
export async function measurePeer(page, workerUrl) {
  const run = await openPeer(page, workerUrl);
  const start = await run("start");
  const figures = { start_cold_ms: start.cold, start_warm_ms: start.warm };
  for (const [key, type] of [
    ["calls_200_ms", "calls"],
    ["rows_5000_ms", "rows"],
    ["fib25_ms", "fib"],
    ["loop_5e6_ms", "loop"],
  ]) {
    await run(type);
    const samples = [];
    for (let i = 0; i < RUNS; i++) samples.push(await run(type));
    figures[key] = median(samples);
  }
  return figures;
}

/**
 * Starts the peer's worker in `page` and answers a function that asks it for
 * one workload's figures (`start`, `calls`, …).
 */
export async function openPeer(page, workerUrl) {
  await page.evaluate(async (url) => {
    const worker = new Worker(url, { type: "module" });
    const waiting = new Map();
    let nextId = 0;
    await new Promise((resolve, reject) => {
      worker.onerror = (event) => reject(new Error(`peer worker failed: ${event.message}`));
      worker.onmessage = ({ data }) => {
        if (data.type === "ready") return resolve();
        // The page side of a tool: echo the arguments back.
        if (data.type === "tool") return worker.postMessage({ type: "tool-result", id: data.id, value: data.args });
        const { resolve: done, reject: fail } = waiting.get(data.id);
        waiting.delete(data.id);
        if (data.error) fail(new Error(data.error));
        else done(data.value);
      };
    });
    window.__peer = (type) =>
      new Promise((resolve, reject) => {
        const id = nextId++;
        waiting.set(id, { resolve, reject });
        worker.postMessage({ type, id });
      });
  }, workerUrl);
  return (type) => page.evaluate((t) => window.__peer(t), type);
}
