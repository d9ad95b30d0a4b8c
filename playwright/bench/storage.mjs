// Storage figures in headless Chromium: 10,000 durable memories and 1,000
// workspace files written through the page API (IndexedDB with strict
// durability, OPFS), then list, full-text query and the cold open of the
// database; beside a peer doing the same jobs with raw IndexedDB and OPFS from
// JavaScript (one strict `put` per write, a `prev` cursor for the newest 100,
// a scan of every record for a query, `indexedDB.open`; a `createWritable`
// per file, a folder's entries with every file's `getFile()` for size and
// time, as the Files panel needs them). Prints JSON lines
// that `cargo xtask bench` shows. Not a test: it asserts nothing about time.
import { launch } from "../lib/browser.mjs";
import { serveIsolated } from "../lib/serve.mjs";

const MEMORIES = Number(process.env.KILN_BENCH_MEMORIES ?? 10_000);
const FILES = Number(process.env.KILN_BENCH_FILES ?? 1_000);
const OPENS = Number(process.env.KILN_BENCH_OPENS ?? 7);

const server = await serveIsolated([process.env.KILN_PKG]);
const url = `http://127.0.0.1:${server.address().port}/kiln.js`;
const browser = await launch();

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}
const round = (ms) => Math.round(ms * 100) / 100;
function print(figure, kiln, peer, extra = {}) {
  const line = { figure, kiln_ms: round(kiln) };
  if (peer !== undefined) {
    line.peer_ms = round(peer);
    line.ratio = Math.round((kiln / peer) * 100) / 100;
  }
  console.log(JSON.stringify({ ...line, ...extra }));
}

// Deterministic sentences of about 12 words from a 400-word vocabulary.
const page = await browser.context.newPage();
await page.goto(url);
const kilnFigures = await page.evaluate(
  async ({ MEMORIES, FILES }) => {
    const { Kiln } = await import(new URL("kiln.js", location.href).href);
    const kiln = await Kiln.load({ workspace: "bench", poolSize: 1 });
    let seed = 7;
    const random = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
    const vocabulary = Array.from({ length: 400 }, (_, i) => `w${i.toString(36)}${"abcdefgh"[i % 8]}`);
    const sentence = () => Array.from({ length: 12 }, () => vocabulary[Math.floor(random() * vocabulary.length)]).join(" ");
    const write = [];
    for (let i = 0; i < MEMORIES; i++) {
      const text = sentence();
      const t0 = performance.now();
      await kiln.memory.save(text, { agent: i % 2 ? "ada" : "bob" });
      write.push(performance.now() - t0);
    }
    const fileWrite = [];
    for (let i = 0; i < FILES; i++) {
      const t0 = performance.now();
      await kiln.files.write(`files/f${String(i).padStart(4, "0")}.txt`, `${sentence()}\n${sentence()}\n`);
      fileWrite.push(performance.now() - t0);
    }
    const time = async (fn, n) => {
      const samples = [];
      for (let i = 0; i < n; i++) {
        const t0 = performance.now();
        await fn(i);
        samples.push(performance.now() - t0);
      }
      return samples;
    };
    const list = await time(() => kiln.memory.list({ limit: 100 }), 20);
    const listFiles = await time(() => kiln.files.list("files"), 10);
    const queries = Array.from({ length: 20 }, () => `${vocabulary[Math.floor(random() * 400)]} ${vocabulary[Math.floor(random() * 400)]}`);
    const query = await time((i) => kiln.memory.query(queries[i]), 20);
    const hits = (await kiln.memory.query(queries[0], { limit: 50 })).length;
    return { write, fileWrite, list, listFiles, query, hits };
  },
  { MEMORIES, FILES },
);

// The peer: raw IndexedDB and OPFS, the same records, files and jobs.
const peerFigures = await page.evaluate(
  async ({ MEMORIES, FILES }) => {
    const open = () =>
      new Promise((resolve, reject) => {
        const request = indexedDB.open("peer-bench", 1);
        request.onupgradeneeded = () => request.result.createObjectStore("memories", { keyPath: "id" });
        request.onsuccess = () => resolve(request.result);
        request.onerror = () => reject(request.error);
      });
    const db = await open();
    const done = (tx) => new Promise((resolve, reject) => { tx.oncomplete = resolve; tx.onerror = () => reject(tx.error); tx.onabort = () => reject(tx.error); });
    let seed = 7;
    const random = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
    const vocabulary = Array.from({ length: 400 }, (_, i) => `w${i.toString(36)}${"abcdefgh"[i % 8]}`);
    const sentence = () => Array.from({ length: 12 }, () => vocabulary[Math.floor(random() * vocabulary.length)]).join(" ");
    const write = [];
    for (let i = 0; i < MEMORIES; i++) {
      const text = sentence();
      const t0 = performance.now();
      const tx = db.transaction("memories", "readwrite", { durability: "strict" });
      tx.objectStore("memories").put({ id: `m-${String(Date.now()).padStart(13, "0")}-${i}`, text, agent: i % 2 ? "ada" : "bob", helpful: 0, outdated: false, created_ms: Date.now() });
      await done(tx);
      write.push(performance.now() - t0);
    }
    const time = async (fn, n) => {
      const samples = [];
      for (let i = 0; i < n; i++) {
        const t0 = performance.now();
        await fn(i);
        samples.push(performance.now() - t0);
      }
      return samples;
    };
    const newest = () =>
      new Promise((resolve, reject) => {
        const out = [];
        const request = db.transaction("memories").objectStore("memories").openCursor(null, "prev");
        request.onsuccess = () => {
          const cursor = request.result;
          if (cursor && out.length < 100) {
            out.push(cursor.value);
            cursor.continue();
          } else resolve(out);
        };
        request.onerror = () => reject(request.error);
      });
    const list = await time(newest, 20);
    const queries = Array.from({ length: 20 }, () => [vocabulary[Math.floor(random() * 400)], vocabulary[Math.floor(random() * 400)]]);
    const scan = (words) =>
      new Promise((resolve, reject) => {
        const request = db.transaction("memories").objectStore("memories").getAll();
        request.onsuccess = () => resolve(request.result.filter((m) => words.some((w) => m.text.includes(w))).slice(0, 10));
        request.onerror = () => reject(request.error);
      });
    const query = await time((i) => scan(queries[i]), 20);
    db.close();

    const root = await navigator.storage.getDirectory();
    const folder = await (await root.getDirectoryHandle("peer-bench", { create: true })).getDirectoryHandle("files", { create: true });
    const fileWrite = [];
    for (let i = 0; i < FILES; i++) {
      const text = `${sentence()}\n${sentence()}\n`;
      const t0 = performance.now();
      const handle = await folder.getFileHandle(`f${String(i).padStart(4, "0")}.txt`, { create: true });
      const writable = await handle.createWritable();
      await writable.write(text);
      await writable.close();
      fileWrite.push(performance.now() - t0);
    }
    const listFolder = async () => {
      const handles = [];
      for await (const handle of folder.values()) handles.push(handle);
      const files = await Promise.all(handles.filter((h) => h.kind === "file").map((h) => h.getFile()));
      return files.map((file) => ({ name: file.name, size: file.size, modified: file.lastModified })).sort((a, b) => (a.name < b.name ? -1 : 1));
    };
    const listFiles = await time(listFolder, 10);
    return { write, list, query, fileWrite, listFiles };
  },
  { MEMORIES, FILES },
);
await page.close();

// Cold opens: a fresh page each time, nothing of the database open in it.
const kilnOpen = [];
const kilnFirstRead = [];
const peerOpen = [];
for (let i = 0; i < OPENS; i++) {
  const fresh = await browser.context.newPage();
  await fresh.goto(url);
  const figures = await fresh.evaluate(async () => {
    const { Kiln } = await import(new URL("kiln.js", location.href).href);
    // The workspace opens in the runtime worker: `storage_open` opens another one there, cold.
    const runtime = await Kiln.load({ poolSize: 1 });
    const kiln = await runtime.bench("storage_open", { workspace: "bench" });
    const t0 = performance.now();
    const db = await new Promise((resolve, reject) => {
      const request = indexedDB.open("peer-bench", 1);
      request.onsuccess = () => resolve(request.result);
      request.onerror = () => reject(request.error);
    });
    await new Promise((resolve) => { const r = db.transaction("memories").objectStore("memories").count(); r.onsuccess = resolve; });
    const peer = performance.now() - t0;
    db.close();
    return { kiln, peer };
  });
  kilnOpen.push(figures.kiln.open_ms);
  kilnFirstRead.push(figures.kiln.first_read_ms);
  peerOpen.push(figures.peer);
  await fresh.close();
}

print(`durable memory write (save, one strict transaction), median of ${MEMORIES}`, median(kilnFigures.write), median(peerFigures.write), { p90_ms: round([...kilnFigures.write].sort((a, b) => a - b)[Math.floor(MEMORIES * 0.9)]) });
print(`workspace file write (OPFS, whole-file swap), median of ${FILES}`, median(kilnFigures.fileWrite), median(peerFigures.fileWrite));
print(`list metadata: newest 100 of ${MEMORIES} memories, median of 20`, median(kilnFigures.list), median(peerFigures.list));
print(`list a folder of ${FILES} files with size and time, median of 10`, median(kilnFigures.listFiles), median(peerFigures.listFiles));
print(`full-text query (2 words, BM25 over the term index) of ${MEMORIES}, median of 20 (peer: scan every record)`, median(kilnFigures.query), median(peerFigures.query), { hits_first_query: kilnFigures.hits });
print(`cold open of the database + first read, median of ${OPENS} fresh pages`, median(kilnOpen.map((open, i) => open + kilnFirstRead[i])), median(peerOpen), { open_ms: round(median(kilnOpen)) });

await browser.close();
server.close();
