// The workspace's stores through the page API, in a real Chromium profile
// (IndexedDB + OPFS): a program writes memory, run memory and files through
// the ladder and `workspace.*`; the page finds them after a reload and after
// the renderer crashes right behind an acknowledged write; a second tab sees
// changes as they happen; a run a closed tab left running is marked
// interrupted; a stale edit is refused, not lost; a used-up quota,
// blocked storage and a database deleted underneath each fail with a clear
// error and write nothing; an export goes into another workspace and a bad
// import writes nothing.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { APP_URL, launch } from "../lib/browser.mjs";

let browser;
before(async () => {
  browser = await launch();
});
after(async () => {
  await browser?.close();
});

/** A new tab with the runtime loaded for `workspace` as `window.kiln`. */
async function tab(workspace, { init, context = browser.context } = {}) {
  const page = await context.newPage();
  if (init) {
    await page.addInitScript(init);
    // The runtime worker opens the workspace too: the same script runs first
    // there, as a browser that blocks storage blocks it in workers as well.
    await page.route("**/workers/runtime.js", async (route) => {
      const response = await route.fetch();
      const prelude = `(${init.toString().replaceAll("window", "self")})();\n`;
      await route.fulfill({ response, body: prelude + (await response.text()) });
    });
  }
  // A same-origin document without the app, so only this runtime opens the workspace.
  await page.goto(new URL("kiln.js", APP_URL).href);
  await load(page, workspace);
  return page;
}

async function load(page, workspace) {
  await page.evaluate(async (workspace) => {
    const { Kiln } = await import(new URL("kiln.js", location.href).href);
    window.kiln = await Kiln.load({ workspace, poolSize: 1 });
  }, workspace);
}

/** Runs `fn(kiln, arg)` in the page; a rejection comes back as `{error: {name, message, code, hint}}`. */
function call(page, fn, arg) {
  return page.evaluate(
    async ({ source, arg }) => {
      try {
        return await eval(source)(window.kiln, arg);
      } catch (error) {
        return { error: { name: error.name, message: error.message, code: error.code, hint: error.hint } };
      }
    },
    { source: fn.toString(), arg },
  );
}

test("a program's memory, run memory and files are found by the page, and again after a reload", async () => {
  const page = await tab("reload");
  const result = await call(page, (kiln) =>
    kiln.run({
      agent: "ada",
      inputs: { customer: "ACME" },
      code: `
        await workspace.mkdir("notes");
        await workspace.write("notes/today.md", "# Today\\nbuy milk\\n");
        const saved = await tools.save_memory({ text: "The user's favourite colour is teal" });
        await tools.share_result({ key: "summary", value: { colour: "teal" }, title: "What we learned" });
        const stat = await workspace.stat("notes/today.md");
        const missing = await workspace.stat("notes/none.md");
        const input = (await tools.read_shared({ keys: ["input:customer"] })).entries[0].value;
        return { id: saved.id, size: stat.size, missing: missing.exists, listed: (await workspace.list("notes")).map((e) => e.name), input };
      `,
    }),
  );
  assert.equal(result.isError, undefined, JSON.stringify(result.structuredContent?.error));
  const value = result.structuredContent.value;
  assert.deepEqual({ ...value, id: "" }, { id: "", size: 17, missing: false, listed: ["today.md"], input: "ACME" });

  const check = async () => {
    const found = await call(page, async (kiln) => ({
      memories: await kiln.memory.query("favourite colour"),
      file: await kiln.files.read("notes/today.md"),
      jobs: await kiln.history.jobs(),
      run: await kiln.runMemory(),
    }));
    assert.equal(found.memories[0].id, value.id);
    assert.equal(found.memories[0].agent, "ada");
    assert.deepEqual(found.file, { text: "# Today\nbuy milk\n" });
    assert.equal(found.jobs[0].status, "ok");
    assert.equal(found.jobs[0].title, 'await workspace.mkdir("notes");');
    assert.equal(found.run.run_id, found.jobs[0].id);
    assert.deepEqual(
      found.run.entries.map((e) => [e.key, e.title, e.kind, e.value]),
      [
        ["input:customer", "", "input", "ACME"],
        ["shared:summary", "What we learned", "shared", { colour: "teal" }],
      ],
    );
  };
  await check();
  await page.reload();
  await load(page, "reload");
  await check();
  await page.close();
});

test("an acknowledged write survives the renderer crashing right after it", async () => {
  const page = await tab("crash");
  const saved = await call(page, async (kiln) => {
    const memory = await kiln.memory.save("written just before the crash");
    await kiln.files.write("crash.txt", "still here");
    return memory;
  });
  const cdp = await browser.context.newCDPSession(page);
  const crashed = page.waitForEvent("crash");
  // The renderer dies before it can answer, so the command never resolves.
  cdp.send("Page.crash").catch(() => {});
  await crashed;
  await page.close();
  const again = await tab("crash");
  const found = await call(again, async (kiln) => ({ list: await kiln.memory.list(), file: await kiln.files.read("crash.txt") }));
  assert.deepEqual(found.list.map((m) => m.id), [saved.id]);
  assert.deepEqual(found.file, { text: "still here" });
  await again.close();
});

test("a second tab sees changes as they happen, and a stale edit is refused, not lost", async () => {
  const a = await tab("tabs");
  const b = await tab("tabs");
  await b.evaluate(() => {
    window.seen = [];
    window.stop = window.kiln.onChange((changes) => window.seen.push(...changes));
  });
  const saved = await call(a, (kiln) => kiln.memory.save("shared between tabs"));
  await b.waitForFunction((id) => window.seen.some((c) => c.table === "memories" && c.key === id), saved.id);
  const inB = await call(b, (kiln) => kiln.memory.list());
  assert.deepEqual(inB.map((m) => m.text), ["shared between tabs"]);

  // Both tabs hold version 1; A edits first, B's edit at version 1 is refused.
  const edited = await call(a, (kiln, id) => kiln.memory.edit(id, 1, "edited in tab A"), saved.id);
  assert.equal(edited.version, 2);
  const refused = await call(b, (kiln, id) => kiln.memory.edit(id, 1, "edited in tab B"), saved.id);
  assert.equal(refused.error.code, "conflict");
  assert.match(refused.error.message, new RegExp(`\`${saved.id}\` in memories was changed elsewhere \\(expected version 1, found 2\\); nothing was written`));
  assert.match(refused.error.hint, /reload it and apply the change again/);
  const kept = await call(b, (kiln, id) => kiln.memory.query("edited"), saved.id);
  assert.deepEqual(kept.map((m) => m.text), ["edited in tab A"]);

  // Marks from both tabs at once all count: a lost compare-and-swap retries.
  await Promise.all([
    call(a, (kiln, id) => Promise.all([1, 2, 3].map(() => kiln.memory.mark(id, "helpful"))), saved.id),
    call(b, (kiln, id) => Promise.all([1, 2, 3].map(() => kiln.memory.mark(id, "helpful"))), saved.id),
  ]);
  const marked = await call(a, (kiln) => kiln.memory.list());
  assert.equal(marked[0].helpful, 6);
  await a.close();
  await b.close();
});

test("a run left running by a tab that closed is marked interrupted when the workspace is next opened; another tab's is not", async () => {
  const a = await tab("interrupted");
  // Runs until its tab goes away; nothing awaits it.
  await a.evaluate(() => {
    window.kiln.run({ code: "// Waits for its tab to close\nwhile (true) await sleep(10000);", limits: { wall_ms: 120000 } });
  });
  const running = async (page) => (await call(page, (kiln) => kiln.history.jobs())).filter((job) => job.input.includes("Waits for its tab to close"));
  await a.waitForFunction(async () => (await window.kiln.history.jobs()).some((job) => job.status === "running"));

  // A second tab opens the workspace while tab A is alive: A's run goes on.
  const b = await tab("interrupted");
  assert.deepEqual((await running(b)).map((job) => job.status), ["running"]);
  // The browser lets go of a closed tab's locks once its worker has ended: wait for that.
  const held = () => navigator.locks.query().then((snapshot) => snapshot.held.length);
  const before = await b.evaluate(held);
  await a.close();
  await b.waitForFunction(async ({ source, before }) => (await eval(source)()) < before, { source: held.toString(), before });
  await b.close();

  // Tab A is gone: the next tab to open the workspace says its run was interrupted.
  const c = await tab("interrupted");
  const [job] = await running(c);
  assert.equal(job.status, "interrupted");
  assert.equal(job.output, "Interrupted: the tab or process that ran it ended before it finished.");
  assert.ok(job.finished_ms >= job.started_ms, JSON.stringify(job));
  await c.close();
});

test("a used-up quota is a clear error, and keeps every acknowledged write and nothing else", async () => {
  // Chromium holds the site's storage to the quota it had when the site first
  // stored anything, so this test has a fresh profile and sets the small
  // quota first: room for the empty workspace and some memories, not for all.
  const own = await launch();
  const cdp = await own.context.newCDPSession(own.page);
  const origin = new URL(APP_URL).origin;
  await cdp.send("Storage.overrideQuotaForOrigin", { origin, quotaSize: 300_000 });
  const page = await tab("quota", { context: own.context });
  const before = await call(page, (kiln) => kiln.memory.save("before the quota"));
  assert.ok(before.id, JSON.stringify(before));
  const memories = await page.evaluate(async () => {
    const acknowledged = [];
    for (let i = 0; i < 60; i++) {
      try {
        acknowledged.push((await window.kiln.memory.save(`memory ${i} ${"filler ".repeat(1100)}`)).id);
      } catch (error) {
        return { acknowledged, error: { code: error.code, message: error.message, hint: error.hint } };
      }
    }
    return { acknowledged };
  });
  const file = await call(page, (kiln) => kiln.files.write("big.bin", new Uint8Array(2_000_000)));
  await cdp.send("Storage.overrideQuotaForOrigin", { origin });
  assert.equal(memories.error?.code, "quota_exceeded", JSON.stringify(memories.error));
  assert.match(memories.error.message, /there is no room to store this: the browser's storage quota for this site is used up/);
  assert.match(memories.error.message, /nothing was written/);
  assert.match(memories.error.hint, /delete old files or memories/);
  assert.equal(file.error?.code, "quota_exceeded", JSON.stringify(file));
  await page.reload();
  await load(page, "quota");
  const after = await call(page, async (kiln) => ({ list: await kiln.memory.list(), stat: await kiln.files.stat("big.bin") }));
  assert.deepEqual(after.list.map((m) => m.id).sort(), [before.id, ...memories.acknowledged].sort());
  assert.equal(after.stat.exists && after.stat.size === 2_000_000, false, "no whole big file was acknowledged");
  await own.close();
});

test("blocked storage is named with a hint, and runs go on without the storage tools", async () => {
  const page = await tab("blocked", {
    init: () => {
      Object.defineProperty(window, "indexedDB", {
        get() {
          throw new DOMException("The user denied permission to access the database.", "SecurityError");
        },
      });
    },
  });
  const state = await page.evaluate(() => ({ code: window.kiln.storageError?.code, message: window.kiln.storageError?.message, hint: window.kiln.storageError?.hint }));
  assert.equal(state.code, "storage_unavailable");
  assert.match(state.message, /storage is not available here/);
  assert.match(state.hint, /private windows/);
  const refused = await call(page, (kiln) => kiln.memory.list());
  assert.equal(refused.error.code, "storage_unavailable");
  const result = await call(page, (kiln) => kiln.run({ code: "return typeof workspace" }));
  assert.equal(result.structuredContent.value, "undefined");
  assert.ok(result.structuredContent.warnings.some((w) => w.code === "storage_unavailable"));
  await page.close();
});

test("a database deleted underneath fails the next write with a hint to reload", async () => {
  const page = await tab("deleted");
  await call(page, (kiln) => kiln.memory.save("soon gone"));
  await page.evaluate(
    () =>
      new Promise((resolve, reject) => {
        const request = indexedDB.deleteDatabase("kiln-deleted");
        request.onsuccess = resolve;
        request.onerror = () => reject(request.error);
      }),
  );
  const refused = await call(page, (kiln) => kiln.memory.save("after the delete"));
  assert.equal(refused.error.code, "storage_closed");
  assert.match(refused.error.message, /`kiln-deleted` was deleted or upgraded by another tab/);
  assert.match(refused.error.hint, /reload the page/);
  await page.reload();
  await load(page, "deleted");
  const fresh = await call(page, (kiln) => kiln.memory.list());
  assert.deepEqual(fresh, []);
  await page.close();
});

test("programs cannot leave the workspace", async () => {
  const page = await tab("contained");
  const result = await call(page, (kiln) =>
    kiln.run({
      code: `
        const tries = ["../secret.txt", "/etc/passwd", "a/../../b"];
        const out = [];
        for (const path of tries) {
          try { await workspace.write(path, "x"); out.push("written"); } catch (e) { out.push(e.code + ": " + e.message); }
        }
        return { out, root: (await workspace.list("")).length };
      `,
    }),
  );
  const { out, root } = result.structuredContent.value;
  assert.equal(root, 0);
  assert.match(out[0], /^path_refused: .*`\.\.\/secret\.txt` contains `\.\.`/);
  assert.match(out[1], /^path_refused: .*`\/etc\/passwd` is absolute/);
  assert.match(out[2], /^path_refused: .*`a\/\.\.\/\.\.\/b` contains `\.\.`/);
  await page.close();
});

test("an export goes into another workspace; keys stay out unless asked; a bad import writes nothing", async () => {
  const page = await tab("export-a");
  await call(page, async (kiln) => {
    await kiln.memory.save("exported fact", { agent: "bob" });
    await kiln.files.write("docs/readme.txt", "hello");
    await kiln.run({ code: "return 1" });
  });
  const doc = await call(page, (kiln) => kiln.exportAll());
  assert.equal(doc.format, "kiln-export");
  assert.equal(doc.keys_included, false);
  assert.deepEqual(doc.files.map((f) => f.path), ["docs/readme.txt"]);
  await load(page, "export-b");
  const bad = structuredClone(doc);
  bad.tables.memories.push({ key: "m-broken", value: { id: "m-broken", text: "", agent: "x", created_ms: 1 } });
  const refused = await call(page, (kiln, doc) => kiln.importAll(doc), bad);
  assert.equal(refused.error.code, "invalid");
  assert.match(refused.error.message, /`m-broken` is not valid: .*nothing was imported/);
  assert.deepEqual(await call(page, (kiln) => kiln.memory.list()), []);
  const summary = await call(page, (kiln, doc) => kiln.importAll(doc), doc);
  assert.equal(summary.records.memories, 1);
  assert.equal(summary.files, 1);
  const found = await call(page, async (kiln) => ({
    memories: await kiln.memory.list(),
    file: await kiln.files.read("docs/readme.txt"),
    jobs: await kiln.history.jobs(),
  }));
  assert.deepEqual(found.memories.map((m) => [m.text, m.agent]), [["exported fact", "bob"]]);
  assert.deepEqual(found.file, { text: "hello" });
  assert.equal(found.jobs.length, 1);
  await page.close();
});
