// Conversation figures in headless Chromium: the write of one message into a
// kept thread (IndexedDB with strict durability, through the page API; aim
// ≤ 2 ms), beside raw IndexedDB doing the same writes in the same page; then
// the app opening a thread of 1,000 messages (navigation to the thread drawn;
// aim ≤ 500 ms) and the long tasks while it is scrolled from top to bottom
// (aim: none over 50 ms); and a reload served by the service worker beside
// the first load. Prints JSON lines that `cargo xtask bench` shows. Not a
// test: it asserts nothing about time.
import { chromium } from "playwright-core";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CHROMIUM_ARGS } from "../lib/browser.mjs";
import { serveIsolated } from "../lib/serve.mjs";

const MESSAGES = Number(process.env.KILN_BENCH_THREAD_MESSAGES ?? 1_000);
const OPENS = Number(process.env.KILN_BENCH_THREAD_OPENS ?? 5);

const server = await serveIsolated([process.env.KILN_PKG]);
const origin = `http://127.0.0.1:${server.address().port}`;
const profile = mkdtempSync(join(tmpdir(), "kiln-bench-threads-"));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.KILN_CHROMIUM ?? "/usr/bin/chromium",
  headless: true,
  args: CHROMIUM_ARGS,
});

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}
const round = (ms) => Math.round(ms * 100) / 100;

try {
  // A thread of MESSAGES messages in the app's workspace, written one by one.
  const writer = await context.newPage();
  await writer.goto(`${origin}/kiln.js`);
  const written = await writer.evaluate(async (MESSAGES) => {
    const { Kiln } = await import(new URL("kiln.js", location.href).href);
    const kiln = await Kiln.load({ poolSize: 1 });
    const thread = await kiln.threads.create("A long conversation about kilns and glazes");
    const reply = (n) =>
      `Here is answer ${n}. **Cone ${n % 12}** firing:\n\n- bisque first\n- then glaze\n\n\`\`\`js\nconst cone = ${n % 12};\nreturn cone * 100;\n\`\`\`\n`;
    const times = [];
    for (let n = 0; n < MESSAGES; n++) {
      const [role, text] = n % 2 ? ["assistant", reply(n)] : ["user", `Question ${n}: what about cone ${n % 12}?`];
      const t0 = performance.now();
      await kiln.threads.append(thread.id, role, text);
      times.push(performance.now() - t0);
    }
    return { id: thread.id, times };
  }, MESSAGES);
  // The peer, in the same page: raw IndexedDB doing the writes a kept message
  // needs — read the thread's record, then one strict transaction that puts
  // the message (with its words for the history's search, in a multi-entry
  // index, as Kiln keeps them) and the thread's new count — with no worker
  // between, no version check and no change feed.
  const raw = await writer.evaluate(async (MESSAGES) => {
    const db = await new Promise((resolve, reject) => {
      const open = indexedDB.open("kiln-bench-raw-thread", 1);
      open.onupgradeneeded = () => {
        open.result.createObjectStore("threads");
        open.result.createObjectStore("messages").createIndex("terms", "t", { multiEntry: true });
      };
      open.onsuccess = () => resolve(open.result);
      open.onerror = () => reject(open.error);
    });
    const done = (request) => new Promise((resolve, reject) => {
      request.onsuccess = () => resolve(request.result);
      request.onerror = () => reject(request.error);
    });
    const committed = (tx) => new Promise((resolve, reject) => {
      tx.oncomplete = resolve;
      tx.onerror = () => reject(tx.error);
      tx.onabort = () => reject(tx.error);
    });
    const words = (text) => [...new Set(text.toLowerCase().split(/[^\p{L}\p{N}]+/u).filter(Boolean))];
    const id = "t-raw";
    const tx0 = db.transaction("threads", "readwrite", { durability: "strict" });
    tx0.objectStore("threads").put({ k: id, v: 1, d: JSON.stringify({ id, n_messages: 0 }) }, id);
    await committed(tx0);
    const times = [];
    for (let n = 0; n < MESSAGES; n++) {
      const text = n % 2
        ? `Here is answer ${n}. **Cone ${n % 12}** firing:\n\n- bisque first\n- then glaze\n\n\`\`\`js\nconst cone = ${n % 12};\nreturn cone * 100;\n\`\`\`\n`
        : `Question ${n}: what about cone ${n % 12}?`;
      const t0 = performance.now();
      const stored = await done(db.transaction("threads", "readonly").objectStore("threads").get(id));
      const thread = JSON.parse(stored.d);
      const seq = thread.n_messages + 1;
      const tx = db.transaction(["threads", "messages"], "readwrite", { durability: "strict" });
      const key = `${id}/${String(seq).padStart(10, "0")}`;
      const message = { thread_id: id, seq, role: n % 2 ? "assistant" : "user", text, created_ms: Date.now() };
      tx.objectStore("messages").put({ k: key, v: 1, d: JSON.stringify(message), t: words(text) }, key);
      tx.objectStore("threads").put({ k: id, v: stored.v + 1, d: JSON.stringify({ ...thread, n_messages: seq, updated_ms: Date.now() }) }, id);
      await committed(tx);
      times.push(performance.now() - t0);
    }
    db.close();
    return times;
  }, MESSAGES);
  await writer.close();
  const sorted = [...written.times].sort((a, b) => a - b);
  console.log(
    JSON.stringify({
      figure: `thread write per message, ${MESSAGES} messages (median ms; aim ≤ 2)`,
      value: round(median(written.times)),
      p95: round(sorted[Math.floor(sorted.length * 0.95)]),
      raw_indexeddb_ms: round(median(raw)),
      ratio: round(median(written.times) / median(raw)),
    }),
  );

  // The app opening it: a fresh page each time, navigation to the thread drawn.
  const opens = [];
  let longTasks = [];
  for (let open = 0; open < OPENS; open++) {
    const page = await context.newPage();
    await page.goto(`${origin}/#/chat/${written.id}`);
    await page.waitForFunction(() => performance.getEntriesByName("kiln:thread-shown").length > 0, null, { timeout: 120_000 });
    opens.push(await page.evaluate(() => performance.getEntriesByName("kiln:thread-shown")[0].startTime));
    if (open === 0) {
      longTasks = await page.evaluate(async () => {
        const seen = [];
        const observer = new PerformanceObserver((list) => seen.push(...list.getEntries().map((entry) => entry.duration)));
        observer.observe({ type: "longtask" });
        const list = document.querySelector('[data-testid="chat-messages"]');
        for (let top = 0; top <= list.scrollHeight; top += list.clientHeight / 2) {
          list.scrollTop = top;
          await new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)));
        }
        observer.disconnect();
        return seen;
      });
    }
    await page.close();
  }
  console.log(
    JSON.stringify({
      figure: `open a thread of ${MESSAGES} messages: navigation to drawn (median ms; aim ≤ 500)`,
      value: round(median(opens)),
      samples: opens.map(round),
    }),
  );
  console.log(
    JSON.stringify({
      figure: "long tasks while scrolling it top to bottom (count over 50 ms; aim 0)",
      value: longTasks.filter((duration) => duration > 50).length,
      longest_ms: round(Math.max(0, ...longTasks)),
    }),
  );

  // A reload from the service worker beside the first load (the worker kept the shell).
  const page = await context.newPage();
  const interactive = async () => {
    await page.waitForFunction(() => performance.getEntriesByName("kiln:interactive").length > 0, null, { timeout: 60_000 });
    return page.evaluate(() => performance.getEntriesByName("kiln:interactive")[0].startTime);
  };
  await page.goto(`${origin}/#/chat`);
  const first = await interactive();
  await page.waitForFunction(() => navigator.serviceWorker.controller !== null, null, { timeout: 60_000 });
  const reloads = [];
  for (let n = 0; n < 5; n++) {
    await page.reload();
    reloads.push(await interactive());
  }
  console.log(
    JSON.stringify({
      figure: "navigation to interactive, reloaded from the service worker (median ms)",
      value: round(median(reloads)),
      first_load_ms: round(first),
    }),
  );
} finally {
  await context.close();
  server.close();
  rmSync(profile, { recursive: true, force: true });
}
