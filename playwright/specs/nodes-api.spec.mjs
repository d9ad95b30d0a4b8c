// Code nodes from a page: kiln.codeNode(spec).run(values) runs the body in a
// sandbox worker through the ladder (a page tool called from it, a value of
// the wrong type refused naming the slot, an output of the wrong type a
// warning); kiln.graph({nodes, edges}).run(inputs) runs nodes in dependency
// order with each node's report on onEvent, fails a failed node's dependents
// naming it and refuses a connection whose types do not fit before anything
// runs; kiln.authorCode asks a model (aimock's kiln-code-* fixtures) through
// submit_code, repairs a refused submission, and rejects with a typed
// failure; kiln.authorPayload shows what would be sent, samples only when
// ticked.
import assert from "node:assert/strict";
import { test } from "node:test";
import { useApp } from "../lib/browser.mjs";
import { useAimock } from "../lib/servers.mjs";

const app = useApp();
const aimock = useAimock();

const TOTAL = {
  title: "Order total",
  code: "const total = items.reduce((s, i) => s + i.price * i.qty, 0);\nconsole.log('lines', items.length);\nreturn { total, count: items.length };",
  inputs: [{ name: "items", type: "list[{price: number, qty: integer}]" }],
  outputs: [
    { name: "total", type: "number" },
    { name: "count", type: "integer" },
  ],
};

/** Evaluates `body(kiln, args)` in the page with a loaded Kiln; a throw comes back as `{thrown}`. */
async function inPage(body, args = {}) {
  const { page } = app();
  return page.evaluate(
    async ({ body, args }) => {
      const { Kiln } = await import("./kiln.js");
      window.kiln ??= await Kiln.load();
      const run = new Function("kiln", "args", `return (async () => { ${body} })();`);
      try {
        return await run(window.kiln, args);
      } catch (error) {
        return { thrown: { name: error.name, message: error.message, code: error.code, errors: error.errors, telemetry: error.telemetry } };
      }
    },
    { body, args },
  );
}

test("a node's progress reaches the page's onEvent as it runs, clamped and spaced", async () => {
  const ran = await inPage(
    `const events = [];
     const ran = await kiln.codeNode({ title: "Steps", outputs: [{ name: "n", type: "integer" }],
       code: "progress(-3, 'start'); progress(50, 'dropped: too soon'); await sleep(150); progress(150, 'x'.repeat(600)); return { n: 2 };" })
       .run({}, { onEvent: (event) => events.push(event) });
     return { events, outputs: ran.outputs };`,
  );
  assert.deepEqual(ran.outputs, { n: 2 });
  assert.deepEqual(ran.events, [
    { type: "progress", percent: 0, message: "start" },
    { type: "progress", percent: 100, message: "x".repeat(500) },
  ]);
});

test("a node runs on its values and returns each output by name, with its console and run result", async () => {
  const ran = await inPage(
    `return await kiln.codeNode(args.spec).run({ items: [{ price: 2.5, qty: 4 }, { price: 1, qty: 3 }] });`,
    { spec: TOTAL },
  );
  assert.deepEqual(ran.outputs, { total: 13, count: 2 });
  assert.deepEqual(ran.warnings, []);
  assert.equal(ran.error, undefined);
  assert.deepEqual(
    ran.console.map((line) => line.text),
    ["lines 2"],
  );
  assert.equal(ran.result.structuredContent.status, "completed");
  assert.ok(ran.duration_ms >= 0);
});

test("check() reads a node as it would run without running it: [] for a good one, each problem by line for another, TypeScript as the JavaScript that runs", async () => {
  const checked = await inPage(
    `const typed = { ...args.spec, code: "interface Item { price: number; qty: number }\\nconst rows: Item[] = items;\\nif (rows.length === 0) return { total: 0 };\\nreturn { total: rows.reduce((s: number, i) => s + i.price * i.qty, 0), count: rows.length };" };
     return {
       good: await kiln.codeNode(args.spec).check(),
       typed: await kiln.codeNode(typed).check(),
       imports: await kiln.codeNode({ ...args.spec, code: 'import { chunk } from "lodash";\\nreturn { total: 0, count: 0 };' }).check(),
     };`,
    { spec: TOTAL },
  );
  assert.deepEqual(checked.good, []);
  assert.equal(checked.typed.length, 1, JSON.stringify(checked.typed));
  assert.match(checked.typed[0], /gives no `count`/);
  assert.equal(checked.imports.length, 1, JSON.stringify(checked.imports));
  assert.match(checked.imports[0], /^line 1: import_refused: `lodash` cannot be imported/);
});

test("a wrong value is refused naming the slot, the type and what came; a mistyped output is a warning", async () => {
  const refused = await inPage(`return await kiln.codeNode(args.spec).run({ items: [{ price: "2", qty: 1 }] });`, { spec: TOTAL });
  assert.equal(refused.error.code, "invalid_inputs");
  assert.match(refused.error.message, /`items\[0\]\.price` must be a number, not a string/);
  const warned = await inPage(
    `return await kiln.codeNode({ title: "Half", code: "return { half: n / 2 };", inputs: [{ name: "n", type: "integer" }],
       outputs: [{ name: "half", type: "integer" }] }).run({ n: 3 });`,
  );
  assert.deepEqual(warned.outputs, { half: 1.5 });
  assert.equal(warned.warnings.length, 1);
  assert.match(warned.warnings[0], /`half`.*integer/);
});

test("inputs are typed at the JavaScript boundary: an absent optional input is undefined whatever its name, bytes only where the type says", async () => {
  const shapes = {
    title: "Shapes",
    code: "const kind = (v) => (v instanceof Uint8Array ? 'bytes' : typeof v);\nreturn { kinds: [kind(toString), kind(constructor), kind(blob), kind(raw)].join(',') };",
    inputs: [
      { name: "toString", type: "string", required: false },
      { name: "constructor", type: "string", required: false },
      { name: "blob", type: "object" },
      { name: "raw", type: "bytes" },
    ],
    outputs: [{ name: "kinds", type: "string" }],
  };
  const ran = await inPage(`return await kiln.codeNode(args.spec).run({ blob: { $bytes: "AQID" }, raw: { $bytes: "AQID" } });`, {
    spec: shapes,
  });
  assert.equal(ran.error, undefined, JSON.stringify(ran.error));
  assert.equal(ran.outputs.kinds, "undefined,undefined,object,bytes");
});

test("a node's body calls the page's tool through the ladder", async () => {
  const ran = await inPage(`
    const calls = [];
    const node = kiln.codeNode({ title: "Greet", code: "const r = await tools.shout({ text: name }); return { greeting: r.text };",
      inputs: [{ name: "name", type: "string" }], outputs: [{ name: "greeting", type: "string" }] });
    const run = await node.run({ name: "ada" }, { tools: { shout: { description: "Upper-cases text.", input_schema: { type: "object" }, category: "read",
      call: (args) => { calls.push(args); return { text: args.text.toUpperCase() }; } } } });
    return { run, calls };`);
  assert.deepEqual(ran.calls, [{ text: "ada" }]);
  assert.deepEqual(ran.run.outputs, { greeting: "ADA" });
});

test("a graph runs in dependency order, reports each node as it settles, and fails a failed node's dependents naming it", async () => {
  const ran = await inPage(`
    const events = [];
    const double = { title: "Double", code: "return { out: x * 2 };", inputs: [{ name: "x", type: "number" }], outputs: [{ name: "out", type: "number" }] };
    const boom = { title: "Boom", code: "throw new Error('no ' + x);", inputs: [{ name: "x", type: "number" }], outputs: [{ name: "out", type: "number" }] };
    const graph = kiln.graph({
      nodes: [{ id: "a", ...double }, { id: "b", ...double }, { id: "c", ...boom }, { id: "d", ...double }],
      edges: [{ from: "a.out", to: "b.x" }, { from: "a.out", to: "c.x" }, { from: "c.out", to: "d.x" }],
    });
    const result = await graph.run({ a: { x: 5 } }, { onEvent: (event) => events.push(event) });
    return { result, events };`);
  const byId = Object.fromEntries(ran.result.nodes.map((node) => [node.id, node]));
  assert.equal(ran.result.status, "failed");
  assert.deepEqual(byId.a.outputs, { out: 10 });
  assert.deepEqual(byId.b.outputs, { out: 20 });
  assert.equal(byId.c.status, "failed");
  assert.match(byId.c.error.message, /no 10/);
  assert.equal(byId.d.status, "failed");
  assert.match(byId.d.error.message, /`c`/);
  assert.equal(ran.events[0].type, "node");
  assert.equal(ran.events[0].id, "a");
  assert.deepEqual(ran.events.map((event) => event.id).sort(), ["a", "b", "c", "d"]);
});

test("a graph whose connection does not fit is refused before anything runs, naming both ends", async () => {
  const ran = await inPage(`
    return await kiln.graph({
      nodes: [
        { id: "name", title: "Name", code: "return { text: 'x' };", outputs: [{ name: "text", type: "string" }] },
        { id: "sum", title: "Sum", code: "return { out: n + 1 };", inputs: [{ name: "n", type: "number" }], outputs: [{ name: "out", type: "number" }] },
      ],
      edges: [{ from: "name.text", to: "sum.n" }],
    }).run({});`);
  assert.equal(ran.thrown.code, "invalid_graph");
  assert.match(ran.thrown.message, /name\.text/);
  assert.match(ran.thrown.message, /sum\.n/);
  const bad = await inPage(`return await kiln.codeNode({ title: "x" }).run({}, { limits: { cpu: 1 } });`);
  assert.equal(bad.thrown.name, "TypeError");
});

test("authorCode repairs a refused submission and answers the accepted node, which runs", async () => {
  const written = await inPage(
    `const written = await kiln.authorCode({ instruction: "kiln-code-repair: classify n by sign and size",
        inputs: [{ name: "n", type: "number", description: "the number to classify" }],
        provider: { kind: "openai", base_url: args.baseUrl }, model: "gpt-4o-mini" });
     const ran = await kiln.codeNode(written.node).run({ n: -4 });
     return { written, ran };`,
    { baseUrl: `${aimock().url}/v1` },
  );
  assert.equal(written.thrown, undefined, JSON.stringify(written.thrown));
  assert.equal(written.written.node.title, "Classify the number");
  assert.equal(written.written.telemetry.rounds, 2);
  assert.equal(written.written.telemetry.refused, 1);
  assert.equal(written.written.telemetry.model, "gpt-4o-mini");
  assert.equal(JSON.stringify(written.written.telemetry).includes("classify n"), false);
  assert.deepEqual(written.ran.outputs, { sign: "not positive", size: 4 });
});

test("authorCode rejects with no_valid_submission and the last reasons; the payload carries samples only when ticked", async () => {
  const failed = await inPage(
    `return await kiln.authorCode({ instruction: "kiln-code-never: anything", provider: { kind: "openai", base_url: args.baseUrl }, model: "gpt-4o-mini" });`,
    { baseUrl: `${aimock().url}/v1` },
  );
  assert.equal(failed.thrown.code, "no_valid_submission");
  assert.ok(failed.thrown.errors.length > 0);
  assert.equal(failed.thrown.telemetry.rounds, 3);
  const request = {
    instruction: "Total the order",
    inputs: [{ name: "lines", type: "list[{price: number, qty: integer}]" }],
    samples: { lines: [{ price: 7.25, qty: 31 }] },
    provider: { kind: "openai", base_url: "http://127.0.0.1:9/v1" },
    model: "gpt-4o-mini",
  };
  const hidden = await inPage(`return await kiln.authorPayload(args.request);`, { request });
  assert.equal(hidden.model, "gpt-4o-mini");
  assert.equal(JSON.stringify(hidden.messages).includes("7.25"), false);
  assert.match(JSON.stringify(hidden.messages), /lines/);
  const shown = await inPage(`return await kiln.authorPayload(args.request);`, { request: { ...request, includeSamples: true } });
  assert.equal(JSON.stringify(shown.messages).includes("7.25"), true);
  const noModel = await inPage(`return await kiln.authorPayload({ ...args.request, model: undefined });`, { request });
  assert.equal(noModel.thrown.code, "no_model");
});

test("a graph whose nodes import kiln:csv and kiln:html parses, selects and hashes without a hand-written parser", async () => {
  const ran = await inPage(`
    const pages = {
      title: "Pages from a CSV",
      code: "import { parse } from \\"kiln:csv\\";\\nreturn { pages: parse(csv).map((row) => row.html) };",
      inputs: [{ name: "csv", type: "string" }],
      outputs: [{ name: "pages", type: "list[string]" }],
    };
    const links = {
      title: "Links and their digest",
      code: "import * as html from \\"kiln:html\\";\\nconst hrefs = pages.flatMap((page) => html.select(page, \\"a[href]\\").map((a) => a.attributes.href));\\nreturn { hrefs, digest: toHex(crypto.digest(\\"SHA-256\\", hrefs.join(\\"\\\\n\\"))) };",
      inputs: [{ name: "pages", type: "list[string]" }],
      outputs: [{ name: "hrefs", type: "list[string]" }, { name: "digest", type: "string" }],
    };
    const refused = await kiln.codeNode({ ...links, code: "import _ from \\"lodash\\";\\nreturn { hrefs: [], digest: '' };" })
      .run({ pages: [] }).then((run) => run.error, (error) => ({ thrown: error.message }));
    const graph = kiln.graph({ nodes: [{ id: "pages", ...pages }, { id: "links", ...links }], edges: [{ from: "pages.pages", to: "links.pages" }] });
    const csv = 'name,html\\nhome,"<a href=""/a"">A</a> <p>no link</p>"\\nabout,"<nav><a href=""/b"">B</a><a>none</a></nav>"\\n';
    return { result: await graph.run({ pages: { csv } }), refused };`);
  assert.equal(ran.result.status, "completed", JSON.stringify(ran.result));
  const links = ran.result.nodes.find((node) => node.id === "links");
  assert.deepEqual(links.outputs.hrefs, ["/a", "/b"]);
  // sha256("/a\n/b"), as `sha256sum` prints it.
  assert.equal(links.outputs.digest, "920e1136383360910a2165ba206599598de8a189ac35cf7666aaedb717000e76");
  assert.match(JSON.stringify(ran.refused), /`lodash` cannot be imported/);
});
