// Page figures in headless Chromium: navigation to interactive, navigation to the
// first result of a trivial program, and warm run round trips. Prints JSON lines
// that `cargo xtask bench` shows. Not a test: it asserts nothing about time.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { launch, openApp, runProgram } from "../lib/browser.mjs";

// Where `cargo xtask bench` built the app: the first-paint figure gzips the files
// the page fetched before it was interactive, as a static host would send them.
const PKG = process.env.KILN_PKG;

const RUNS = Number(process.env.KILN_BENCH_RUNS ?? 20);
const LOADS = Number(process.env.KILN_BENCH_LOADS ?? 5);

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

const interactive = [];
const firstResult = [];
const warm = [];
let firstPaint = null;
for (let load = 0; load < LOADS; load++) {
  const browser = await launch();
  const { page } = browser;
  await openApp(page);
  await page.waitForFunction(() => performance.getEntriesByName("kiln:interactive").length > 0);
  await runProgram(page, "return 1 + 1");
  const marks = await page.evaluate(() => ({
    interactive: performance.getEntriesByName("kiln:interactive")[0].startTime,
    result: performance.getEntriesByName("kiln:result")[0].startTime,
  }));
  interactive.push(marks.interactive);
  if (load === 0 && PKG) {
    // The document and everything it fetched before the interactive mark; worker
    // scripts (and what they fetch, on their own timelines) load beside the page.
    const fetched = await page.evaluate(() => {
      const at = performance.getEntriesByName("kiln:interactive")[0].startTime;
      return [location.href, ...performance.getEntriesByType("resource").filter((entry) => entry.startTime < at).map((entry) => entry.name)];
    });
    const files = [...new Set(fetched.map((url) => new URL(url).pathname))]
      .filter((path) => !path.startsWith("/workers/"))
      .map((path) => (path.endsWith("/") ? `${path}index.html` : path))
      // A file the host does not have (`local-provider.json` without `cargo xtask serve`) is a 404.
      .filter((path) => existsSync(join(PKG, path)));
    const sizes = files.map((path) => ({ path, gzip: gzipSync(readFileSync(join(PKG, path)), { level: 9 }).length }));
    firstPaint = { bytes: sizes.reduce((sum, file) => sum + file.gzip, 0), files: sizes };
  }
  firstResult.push(marks.result);
  if (load === 0) {
    for (let run = 0; run < RUNS; run++) {
      const before = await page.evaluate(() => performance.getEntriesByName("kiln:result").length);
      await page.getByTestId("code-editor").fill(`return ${run}`);
      const t0 = await page.evaluate(() => performance.now());
      await page.getByTestId("run-button").click();
      await page.waitForFunction((n) => performance.getEntriesByName("kiln:result").length > n, before);
      const t1 = await page.evaluate(() => performance.getEntriesByName("kiln:result").at(-1).startTime);
      warm.push(t1 - t0);
    }
  }
  await browser.close();
}

const round = (ms) => Math.round(ms * 10) / 10;
if (firstPaint) {
  console.log(JSON.stringify({ figure: "first paint: bytes fetched before interactive, gzip -9 (target 300 KB)", value: firstPaint.bytes, files: firstPaint.files }));
}
console.log(JSON.stringify({ figure: "navigation to interactive page (median ms)", value: round(median(interactive)), samples: interactive.map(round) }));
console.log(JSON.stringify({ figure: "navigation to first result of `return 1 + 1` (median ms)", value: round(median(firstResult)), samples: firstResult.map(round) }));
console.log(JSON.stringify({ figure: `warm run: click to result shown, median of ${RUNS} (ms)`, value: round(median(warm)) }));
