// Other pages run programs through the ES module API in pkg/: Kiln.load(),
// then kiln.run({code, tools, limits}) resolves to the tool-result/v1 object.
import assert from "node:assert/strict";
import { test } from "node:test";
import { useApp } from "../lib/browser.mjs";

const app = useApp();

/** Runs `request` (with tools written as source text) through the page API in the page. */
async function run(request, { tools = {} } = {}) {
  const { page } = app();
  return page.evaluate(
    async ({ request, tools }) => {
      const { Kiln } = await import("./kiln.js");
      window.kiln ??= await Kiln.load();
      const built = {};
      for (const [name, source] of Object.entries(tools)) {
        built[name] = { description: `the ${name} tool`, input_schema: { type: "object" }, call: eval(source) };
      }
      return window.kiln.run({ ...request, tools: built });
    },
    { request, tools },
  );
}

test("a page runs a program against its own tools and gets tool-result/v1", async () => {
  const result = await run(
    { code: 'const r = await tools.echo({text: "hi"});\nconsole.log("got", r);\nreturn {answer: 42, r};' },
    { tools: { echo: "async (args) => args" } },
  );
  assert.equal(result.isError, undefined);
  const s = result.structuredContent;
  assert.match(s.run_id, /^codemode:[0-9a-f]{16}$/);
  assert.equal(s.status, "completed");
  assert.equal(s.termination_reason, "completed");
  assert.deepEqual(s.value, { answer: 42, r: { text: "hi" } });
  assert.equal(s.output, 'got { text: "hi" }\n');
  assert.equal(s.call_count, 1);
  assert.deepEqual({ ...s.calls[0], duration_ms: 0 }, { tool: "echo", outcome: "ok", waited_on_person: false, duration_ms: 0 });
  assert.match(s.catalog_digest, /^sha256:[0-9a-f]{64}$/);
  assert.match(result.content[0].text, /^completed · \d+ ms · 1 calls · person wait 0 ms\n\nReturn value:\n\{\n  "answer": 42,/);
});

test("a program written in TypeScript runs with its types stripped, and only such a program loads the stripper", async () => {
  const { page } = app();
  const fetched = [];
  const seen = (request) => {
    if (new URL(request.url()).pathname.endsWith("/kiln_ts_bg.wasm")) fetched.push(request.url());
  };
  page.on("request", seen);
  try {
    const plain = await run({ code: "const rows = [1, 2, 3];\nreturn rows.map((n) => n * 2);" });
    assert.deepEqual(plain.structuredContent.value, [2, 4, 6]);
    assert.deepEqual(fetched, [], "plain JavaScript loads no stripper");

    const typed = await run({
      code: `import { parse } from "kiln:csv";
interface Row { name: string; total: number }
type Rows = Row[];
function first<T>(items: T[]): T | undefined { return items[0]; }
const rows: Rows = (parse("name,total\\na,2\\nb,3") as Array<{ name: string; total: string }>).map((row): Row => ({ name: row.name, total: Number(row.total) }));
const wrong: string = 42 as any as number;
return { first: first(rows)!.name, sum: rows.reduce((n: number, row) => n + row.total, 0), wrong };`,
    });
    assert.equal(typed.isError, undefined, JSON.stringify(typed.structuredContent.error));
    assert.deepEqual(typed.structuredContent.value, { first: "a", sum: 5, wrong: 42 });
    assert.equal(fetched.length, 1, fetched.join(", "));

    // TypeScript that makes JavaScript of its own is refused by name, with what to write instead.
    const made = await run({ code: "enum Color { Red, Green }\nreturn Color.Red;" });
    assert.equal(made.errorCode, "syntax");
    assert.match(made.structuredContent.error.message, /^TypeScript's `enum` at line 1, column 1 cannot be stripped: it makes JavaScript of its own\nhint: /);
    // A JavaScript syntax error is still the engine's own, at its place; the stripper is kept.
    const broken = await run({ code: "const a = 1;\nconst = 2;" });
    assert.equal(broken.errorCode, "syntax");
    assert.match(broken.structuredContent.error.message, /^SyntaxError: .*line 2/);
    // TypeScript's own syntax error is named where it is, not at its first annotation.
    const typedBroken = await run({ code: "const a: number = 1;\nconst b = a + 1;\nconst c = ;\nreturn c;" });
    assert.equal(typedBroken.errorCode, "syntax");
    assert.match(typedBroken.structuredContent.error.message, /^SyntaxError: .* at line 3, column 11$/);
    assert.equal(fetched.length, 1, fetched.join(", "));
  } finally {
    page.off("request", seen);
  }
});

test("kiln:html, kiln:markdown, kiln:diff and kiln:zip run in the library's own wasm, which only a program importing one loads", async () => {
  const { page } = app();
  const fetched = [];
  const seen = (request) => {
    if (new URL(request.url()).pathname.endsWith("/kiln_modules_bg.wasm")) fetched.push(request.url());
  };
  page.on("request", seen);
  try {
    const plain = await run({ code: 'import { parse } from "kiln:csv";\nreturn parse("a\\n1");' });
    assert.deepEqual(plain.structuredContent.value, [{ a: "1" }]);
    assert.deepEqual(fetched, [], "a program importing only kiln:csv loads no library wasm");

    const result = await run({
      code: `import { select, toMarkdown } from "kiln:html";
import { toHtml } from "kiln:markdown";
import * as diff from "kiln:diff";
import zip from "kiln:zip";
const links = select('<ul><li><a href="/a">A</a></li><li><a href="/b">B b</a></li></ul>', "a", { limit: 1 });
const archive = zip.write({ "notes/a.txt": "héllo", "bytes.bin": new Uint8Array([0, 255]), "empty/": "" });
let missing;
try { zip.read(archive, "nope.txt"); } catch (error) { missing = error.name + ": " + error.message; }
let badSelector;
try { select("<p></p>", "p[[", {}); } catch (error) { badSelector = error.name; }
return {
  links,
  markdown: toMarkdown("<h1>Title</h1><p>Some <b>bold</b> text</p>"),
  html: toHtml("# Hi\\n\\n<script>x</script>"),
  unified: diff.unified("a\\nb\\n", "a\\nc\\n"),
  words: diff.words("one two", "one three").length,
  entries: zip.list(archive).map((entry) => [entry.name, entry.size, entry.isDirectory]),
  text: zip.read(archive, "notes/a.txt", { text: true }),
  bytes: Array.from(zip.read(archive, "bytes.bin")),
  missing,
  badSelector,
};`,
    });
    assert.equal(result.isError, undefined, JSON.stringify(result.structuredContent.error));
    const value = result.structuredContent.value;
    assert.deepEqual(value.links, [{ tag: "a", text: "A", html: '<a href="/a">A</a>', attributes: { href: "/a" } }]);
    assert.equal(value.markdown, "# Title\n\nSome **bold** text");
    assert.equal(value.html, "<h1>Hi</h1>\n&lt;script&gt;x&lt;/script&gt;");
    assert.equal(value.unified, "--- before\n+++ after\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n");
    assert.ok(value.words >= 3, String(value.words));
    assert.deepEqual(value.entries, [["notes/a.txt", 6, false], ["bytes.bin", 2, false], ["empty/", 0, true]]);
    assert.equal(value.text, "héllo");
    assert.deepEqual(value.bytes, [0, 255]);
    assert.match(value.missing, /^Error: kiln:zip read: the archive has no entry `nope.txt`; it has `notes\/a.txt`/);
    assert.equal(value.badSelector, "SyntaxError");
    assert.ok(fetched.length >= 1, "the library wasm was fetched for a program importing it");

    // A zip bomb ends at the run's inflation bound, across the crossing, and the next run is whole.
    const bomb = await run({
      code: `import { write, read } from "kiln:zip";
const archive = write({ "zeros.bin": "0".repeat(4_000_000) }, { level: 9 });
let reads = 0;
try { for (;;) { read(archive, "zeros.bin"); reads += 1; } } catch (error) { return { reads, error: error.name + ": " + error.message }; }`,
    });
    assert.equal(bomb.isError, undefined, JSON.stringify(bomb.structuredContent.error));
    assert.equal(bomb.structuredContent.value.reads, 13);
    assert.match(bomb.structuredContent.value.error, /^RangeError: kiln:zip read: inflating `zeros.bin` would pass the 52428800 bytes a run may inflate/);
    const next = await run({ code: 'import { toHtml } from "kiln:markdown";\nreturn toHtml("*ok*");' });
    assert.equal(next.structuredContent.value, "<p><em>ok</em></p>\n");
  } finally {
    page.off("request", seen);
  }
});

test("an uncaught tool rejection carries the tool's code and names the call", async () => {
  const result = await run(
    { code: "await tools.browse({});" },
    { tools: { browse: "async () => { throw Object.assign(new Error('No session.'), {code: 'no_session', detail: {hint: 'launch'}}) }" } },
  );
  assert.equal(result.isError, true);
  assert.equal(result.errorCode, "no_session");
  assert.deepEqual(result.structuredContent.error, {
    code: "no_session",
    message: "browse (call 1) failed: No session.",
    detail: { hint: "launch" },
  });
  assert.equal(result.structuredContent.calls[0].outcome, "error");
});

test("a guest that never stops is ended at its JS CPU budget, and the next run works", async () => {
  const result = await run({ code: "while (true) {}", limits: { js_cpu_ms: 300 } });
  assert.equal(result.errorCode, "budget_exhausted");
  assert.equal(result.structuredContent.budget, "js_cpu");
  assert.equal(result.structuredContent.termination_reason, "budget_exhausted:js_cpu");
  const next = await run({ code: "return 1 + 1" });
  assert.equal(next.structuredContent.value, 2);
});

test("JavaScript that runs while a reply is received is charged: a spin in a `then` getter ends at the CPU budget", async () => {
  const code = `let once = false;
Object.defineProperty(Object.prototype, "then", { configurable: true, get() { if (!once) { once = true; const t = Date.now(); while (Date.now() - t < 3000) {} } } });
await tools.echo({ x: 1 });
return "done";`;
  const result = await run({ code, limits: { js_cpu_ms: 300 } }, { tools: { echo: "async (args) => args" } });
  assert.equal(result.structuredContent.termination_reason, "budget_exhausted:js_cpu");
  // The next run works.
  const next = await run({ code: "return 1" });
  assert.equal(next.structuredContent.value, 1);
});

test("sleeping and awaiting tools do not spend JS CPU; the wall budget still ends the run", async () => {
  const slow = await run(
    { code: "await sleep(400); await tools.slow({}); await sleep(400); return 'done';", limits: { js_cpu_ms: 300 } },
    { tools: { slow: "() => new Promise((resolve) => setTimeout(() => resolve(1), 400))" } },
  );
  assert.equal(slow.structuredContent.value, "done");
  assert.ok(slow.structuredContent.duration_ms >= 1200, slow.structuredContent.duration_ms);

  const walled = await run({ code: "await sleep(5000);", limits: { wall_ms: 300 } });
  assert.equal(walled.structuredContent.termination_reason, "budget_exhausted:wall");
});

test("time a call is held on a person counts as person wait, and has a budget", async () => {
  const approve = "(args, ctx) => ctx.waitOnPerson(new Promise((resolve) => setTimeout(() => resolve({approved: true}), 300)))";
  const held = await run({ code: "return await tools.approve({});" }, { tools: { approve } });
  assert.deepEqual(held.structuredContent.value, { approved: true });
  assert.ok(held.structuredContent.person_wait_ms >= 250, JSON.stringify(held.structuredContent));
  assert.equal(held.structuredContent.calls[0].waited_on_person, true);

  const sleeping = await run({ code: "const [r] = await Promise.all([tools.approve({}), sleep(300)]); return r;" }, { tools: { approve } });
  assert.ok(sleeping.structuredContent.person_wait_ms < 100, "time asleep is never person wait");

  const over = await run({ code: "return await tools.approve({});", limits: { person_wait_ms: 100 } }, { tools: { approve } });
  assert.equal(over.structuredContent.termination_reason, "budget_exhausted:person_wait");
});

test("runs at the same time each get a worker of the pool", async () => {
  const { page } = app();
  const values = await page.evaluate(async () => {
    const { Kiln } = await import("./kiln.js");
    window.kiln ??= await Kiln.load();
    const runs = [1, 2, 3].map((n) => window.kiln.run({ code: `await sleep(200); return ${n};` }));
    return (await Promise.all(runs)).map((result) => result.structuredContent.value);
  });
  assert.deepEqual(values, [1, 2, 3]);
});

test("bad requests are refused with a TypeError that names what was wrong", async () => {
  const { page } = app();
  const problems = await page.evaluate(async () => {
    const { Kiln } = await import("./kiln.js");
    window.kiln ??= await Kiln.load();
    const refused = async (request) => {
      try {
        await window.kiln.run(request);
        return "accepted";
      } catch (error) {
        return `${error.name}: ${error.message}`;
      }
    };
    return [
      await refused("return 1"),
      await refused({ code: 42 }),
      await refused({ code: "return 1", tools: { echo: { description: "x" } } }),
      await refused({ code: "return 1", limits: { js_cpu: 5 } }),
    ];
  });
  assert.match(problems[0], /^TypeError: kiln\.run: takes one object/);
  assert.match(problems[1], /`code` must be a string/);
  assert.match(problems[2], /`tools\.echo\.call` must be a function/);
  assert.match(problems[3], /`limits` are not valid: unknown field `js_cpu`/);
});

test("bytes stay bytes both ways between the guest and a page tool", async () => {
  const result = await run(
    { code: "const out = await tools.reverse({data: new Uint8Array([1, 2, 3])});\nreturn [out instanceof Uint8Array, Array.from(out), out];" },
    { tools: { reverse: "(args) => { if (!(args.data instanceof Uint8Array)) throw new Error('not bytes'); return args.data.slice().reverse(); }" } },
  );
  assert.deepEqual(result.structuredContent.value, [true, [3, 2, 1], { $bytes: "AwIB" }]);
});

test("a guest that allocates without bound ends budget_exhausted:memory, and the next run works", async () => {
  const result = await run({
    code: "let a = []; while (true) a.push('x'.repeat(1e6) + a.length);",
    limits: { memory_bytes: 32 * 1024 * 1024 },
  });
  assert.equal(result.errorCode, "budget_exhausted");
  assert.equal(result.structuredContent.budget, "memory");
  const next = await run({ code: "return 'alive'" });
  assert.equal(next.structuredContent.value, "alive");
});

test("engine work that overflows the worker's stack ends the run as an engine failure, and the next run works", async () => {
  // A prototype chain 100,000 long: Boa's property lookup recurses once per
  // link on the wasm stack, and nothing bounds how long a chain a program makes.
  const result = await run({ code: "let o = {}; for (let i = 0; i < 1e5; i++) o = Object.create(o); return o.x" });
  assert.equal(result.errorCode, "engine");
  assert.match(result.structuredContent.error.message, /^the sandbox worker failed: /);
  const next = await run({ code: "return 'alive'" });
  assert.equal(next.structuredContent.value, "alive");
});

test("deep values and deep sources end with a catchable error or a syntax error, not a dead worker", async () => {
  const deepArray = "let a = []; for (let i = 0; i < 1e5; i++) a = [a];";
  const caught = (body) => `${deepArray} try { ${body}; return 'ran' } catch (e) { return e.message }`;
  const cases = [
    [caught("String(a)"), /^an array joined into a string nests deeper than 128 levels/],
    [caught("a.flat(Infinity)"), /^an array flattened with flat\(\) nests deeper than 128 levels/],
    [caught("JSON.stringify(a)"), /^a value given to JSON.stringify nests deeper than 128 levels/],
    [caught("let p = {}; for (let i = 0; i < 1e5; i++) p = new Proxy(p, {}); p.x"), /^a chain of proxies nests deeper/],
    [caught("let f = () => 1; for (let i = 0; i < 1e5; i++) f = f.bind(null); f()"), /^a chain of bound functions/],
  ];
  for (const [code, message] of cases) {
    const result = await run({ code });
    assert.equal(result.structuredContent.status, "completed", code);
    assert.match(result.structuredContent.value, message, code);
  }
  // At the bound the parser has the stack it needs; past it the program is refused.
  const nested = (depth) => `return ${"(".repeat(depth)}1${")".repeat(depth)}`;
  assert.equal((await run({ code: nested(128) })).structuredContent.value, 1);
  for (const code of [nested(129), `return ${"[".repeat(50000)}${"]".repeat(50000)}`, `return ${"!".repeat(50000)}1`]) {
    const result = await run({ code });
    assert.equal(result.errorCode, "syntax", code.slice(0, 20));
    assert.match(result.structuredContent.error.message, /^SyntaxError: the program nests deeper than 128 levels/);
  }
  const next = await run({ code: "return 'alive'" });
  assert.equal(next.structuredContent.value, "alive");
});

test("a run ended by terminating its worker keeps the output and calls the host saw", async () => {
  const result = await run(
    { code: "console.log('before'); await tools.echo({a: 1}); while (true) {}", limits: { js_cpu_ms: 300 } },
    { tools: { echo: "(args) => args" } },
  );
  assert.equal(result.structuredContent.termination_reason, "budget_exhausted:js_cpu");
  assert.equal(result.structuredContent.output, "before\n");
  assert.deepEqual(
    result.structuredContent.calls.map((call) => [call.tool, call.outcome]),
    [["echo", "ok"]],
  );
  assert.match(result.content[0].text, /\nOutput:\nbefore\n/);
});

test("kiln.run({signal}) cancels at once: the runaway guest's worker is ended, calls keep their outcomes", async () => {
  const { page } = app();
  const result = await page.evaluate(async () => {
    const { Kiln } = await import("./kiln.js");
    window.kiln ??= await Kiln.load();
    const controller = new AbortController();
    let calls = 0;
    const tools = {
      // Reached its tool (the page's call), then the run was cancelled.
      echo: { input_schema: { type: "object" }, call: (args) => (calls++, args) },
      slow: {
        input_schema: { type: "object" },
        call: () => {
          calls++;
          controller.abort();
          return new Promise(() => {});
        },
      },
    };
    return window.kiln.run({
      code: "console.log('before'); await tools.echo({a: 1}); await tools.slow({}); while (true) {}",
      tools,
      signal: controller.signal,
    });
  });
  const s = result.structuredContent;
  assert.equal(result.isError, true);
  assert.equal(result.errorCode, "cancelled");
  assert.equal(s.status, "cancelled");
  assert.equal(s.output, "before\n");
  assert.deepEqual(s.calls.map((call) => [call.tool, call.outcome]), [["echo", "ok"], ["slow", "outcome_unknown"]]);
  // A runaway guest, stopped from outside long before its 10 s CPU budget; a call
  // held on an approval that never comes provably never started: withdrawn.
  const runaway = await page.evaluate(async () => {
    const controller = new AbortController();
    const started = performance.now();
    const result = await window.kiln.run({
      // The sleep lets the call reach the host (calls travel when the guest goes idle).
      code: "tools.write_it({}).catch(() => {}); await sleep(1); while (true) {}",
      tools: { write_it: { category: "write", input_schema: { type: "object" }, call: (args) => args } },
      // Stopped once the call waits on its approval (a fixed timer raced a slow start:
      // under load the call had not reached the host when the stop came).
      approve: () => {
        setTimeout(() => controller.abort(), 50);
        return new Promise(() => {});
      },
      signal: controller.signal,
    });
    return { result, ms: performance.now() - started };
  });
  assert.equal(runaway.result.structuredContent.status, "cancelled");
  assert.deepEqual(runaway.result.structuredContent.calls.map((call) => call.outcome), ["withdrawn"]);
  assert.ok(runaway.ms < 9_000, `cancelled after ${runaway.ms} ms`);
  // An already aborted signal cancels before anything runs; the next run works.
  const early = await page.evaluate(() => window.kiln.run({ code: "return 1", signal: AbortSignal.abort() }));
  assert.equal(early.structuredContent.status, "cancelled");
  const next = await run({ code: "return 6 * 7" });
  assert.equal(next.structuredContent.value, 42);
  // Not a signal: a TypeError naming it.
  const refused = await page.evaluate(() => window.kiln.run({ code: "return 1", signal: 5 }).catch((e) => String(e)));
  assert.match(refused, /TypeError: kiln\.run: `signal` must be an AbortSignal/);
});
