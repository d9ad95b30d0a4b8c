// Page figures in headless Chromium: navigation to interactive, navigation to the
// first result of a trivial program, and warm run round trips. Prints JSON lines
// that `cargo xtask bench` shows. Not a test: it asserts nothing about time.
import { launch, openApp, runProgram } from "../lib/browser.mjs";

const RUNS = Number(process.env.KILN_BENCH_RUNS ?? 20);
const LOADS = Number(process.env.KILN_BENCH_LOADS ?? 5);

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

const interactive = [];
const firstResult = [];
const warm = [];
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
console.log(JSON.stringify({ figure: "navigation to interactive page (median ms)", value: round(median(interactive)), samples: interactive.map(round) }));
console.log(JSON.stringify({ figure: "navigation to first result of `return 1 + 1` (median ms)", value: round(median(firstResult)), samples: firstResult.map(round) }));
console.log(JSON.stringify({ figure: `warm run: click to result shown, median of ${RUNS} (ms)`, value: round(median(warm)) }));
