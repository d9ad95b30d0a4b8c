// Peer worker: the same workloads as Kiln's, run in quickjs-emscripten inside a
// Web Worker. Every figure is timed here with performance.now(), so only the
// engine's work is measured, not the page's messaging to ask for it (except in
// `calls`, where the crossing to the page is the point).
import variant from "@jitl/quickjs-singlefile-browser-release-sync";
import { newQuickJSWASMModuleFromVariant } from "quickjs-emscripten-core";

const WARM_STARTS = 50;
const ROWS = 5000;
const CALLS = 200;

// The wasm is embedded in this script, so loading it needs no fetch.
const QuickJS = await newQuickJSWASMModuleFromVariant(variant);
const runtime = QuickJS.newRuntime();

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

/** A bare context plus a trivial eval; the context is disposed after the clock stops. */
function timeStart() {
  const t0 = performance.now();
  const ctx = runtime.newContext();
  const handle = ctx.unwrapResult(ctx.evalCode("1"));
  if (ctx.getNumber(handle) !== 1) throw new Error("start: wrong result");
  handle.dispose();
  const ms = performance.now() - t0;
  ctx.dispose();
  return ms;
}

// Measured first thing, so it is the first context this worker ever makes.
const startColdMs = timeStart();

/** Evaluates `code` in a fresh context, timing the eval and the read of its number. */
function timeEval(code, expected) {
  const ctx = runtime.newContext();
  try {
    const t0 = performance.now();
    const handle = ctx.unwrapResult(ctx.evalCode(code));
    const value = ctx.getNumber(handle);
    handle.dispose();
    const ms = performance.now() - t0;
    if (value !== expected) throw new Error(`eval: got ${value}, want ${expected}`);
    return ms;
  } finally {
    ctx.dispose();
  }
}

const FIB = "function fib(n){return n<2?n:fib(n-1)+fib(n-2)} fib(25)";
const LOOP = "let s=0; for (let i=0;i<5e6;i++) s+=i; s";

const rows = Array.from({ length: ROWS }, (_, i) => ({
  id: i,
  name: `item-${i}`,
  price: (i % 100) + 0.5,
  qty: (i % 7) + 1,
  category: `cat-${i % 10}`,
  active: i % 3 !== 0,
}));

// Every price is positive, so the filter keeps all rows but still reads a field of each.
const ROWS_PROGRAM = `JSON.stringify(JSON.parse(input)
  .filter((r) => r.price > 0)
  .map((r) => ({ id: r.id, total: r.price * r.qty, label: r.name.toUpperCase() })))`;

/**
 * Rows go in as JSON text parsed by the guest and come back as JSON text parsed by
 * the host: one string copy each way, instead of one FFI call per field.
 */
function timeRows() {
  const ctx = runtime.newContext();
  try {
    const t0 = performance.now();
    ctx.newString(JSON.stringify(rows)).consume((input) => ctx.setProp(ctx.global, "input", input));
    const out = JSON.parse(ctx.unwrapResult(ctx.evalCode(ROWS_PROGRAM)).consume((h) => ctx.getString(h)));
    const ms = performance.now() - t0;
    if (out.length !== ROWS || out[ROWS - 1].label !== `ITEM-${ROWS - 1}`) throw new Error("rows: wrong result");
    return ms;
  } finally {
    ctx.dispose();
  }
}

/** Builds a guest value from a small JSON-like host value, the way a tool binding would. */
function toGuest(ctx, value) {
  if (value === null) return ctx.null;
  switch (typeof value) {
    case "number":
      return ctx.newNumber(value);
    case "string":
      return ctx.newString(value);
    case "boolean":
      return value ? ctx.true : ctx.false;
    case "undefined":
      return ctx.undefined;
  }
  const target = Array.isArray(value) ? ctx.newArray() : ctx.newObject();
  for (const [key, item] of Object.entries(value)) {
    const handle = toGuest(ctx, item);
    ctx.setProp(target, key, handle);
    handle.dispose();
  }
  return target;
}

// Tool calls waiting for the page's reply, by call id.
const pendingTools = new Map();
let nextToolId = 0;

const CALLS_PROGRAM = `(async () => {
  let r;
  for (let i = 0; i < ${CALLS}; i++) r = await tool({ i });
  return r.i;
})()`;

/** 200 sequential awaited tool calls, each a round trip to the page and back. */
async function timeCalls() {
  const ctx = runtime.newContext();
  try {
    ctx
      .newFunction("tool", (argsHandle) => {
        const deferred = ctx.newPromise();
        const id = nextToolId++;
        pendingTools.set(id, deferred);
        self.postMessage({ type: "tool", id, args: ctx.dump(argsHandle) });
        return deferred.handle;
      })
      .consume((fn) => ctx.setProp(ctx.global, "tool", fn));
    const t0 = performance.now();
    const promise = ctx.unwrapResult(ctx.evalCode(CALLS_PROGRAM));
    const result = ctx.unwrapResult(await ctx.resolvePromise(promise));
    const ms = performance.now() - t0;
    promise.dispose();
    const last = result.consume((h) => ctx.getNumber(h));
    if (last !== CALLS - 1) throw new Error(`calls: got ${last}`);
    return ms;
  } finally {
    ctx.dispose();
  }
}

function onToolResult({ id, value }) {
  const deferred = pendingTools.get(id);
  pendingTools.delete(id);
  const handle = toGuest(deferred.context, value);
  deferred.resolve(handle);
  handle.dispose();
  // Resolving only queues the guest's continuation; this runs it up to the next await.
  runtime.executePendingJobs().unwrap();
}

const workloads = {
  start: () => ({ cold: startColdMs, warm: median(Array.from({ length: WARM_STARTS }, timeStart)) }),
  fib: () => timeEval(FIB, 75025),
  loop: () => timeEval(LOOP, 12499997500000),
  rows: timeRows,
  calls: timeCalls,
};

self.onmessage = async ({ data }) => {
  if (data.type === "tool-result") return onToolResult(data);
  try {
    self.postMessage({ type: "done", id: data.id, value: await workloads[data.type]() });
  } catch (error) {
    self.postMessage({ type: "done", id: data.id, error: String(error?.stack ?? error) });
  }
};
self.postMessage({ type: "ready" });
