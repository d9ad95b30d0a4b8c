// A person types a program, runs it, and reads the answer; a program that never
// ends is stopped, and the next run works.
import assert from "node:assert/strict";
import { test } from "node:test";
import { VIEWS, runProgram, show, useApp } from "../lib/browser.mjs";

const app = useApp();

test("runs a program and shows its value and console lines", async () => {
  const { page } = app();
  const status = await runProgram(
    page,
    'console.log("hello from the sandbox", {n: 1});\nconst x = await Promise.resolve(20);\nreturn {answer: x + 22};',
  );
  assert.match(status, /^Completed in \d+(\.\d+)? m?s\.$/);
  const value = JSON.parse(await page.getByTestId("result-value").textContent());
  assert.deepEqual(value, { answer: 42 });
  assert.equal(await page.getByTestId("console-output").textContent(), "hello from the sandbox { n: 1 }");
  // What the model would read: the run's text, without the `keyless` warning, which
  // speaks to a caller that could key a run (the app's runs are never kept in custody).
  const text = await page.getByTestId("model-text").textContent();
  assert.match(text, /^completed · \d+ ms · 0 calls · person wait 0 ms\n\nReturn value:\n\{\n {2}"answer": 42\n\}\n\nOutput:\nhello from the sandbox \{ n: 1 \}\n$/);
  assert.doesNotMatch(text, /keyless/);
});

test("shows a thrown error and a syntax error as readable messages", async () => {
  const { page } = app();
  assert.match(await runProgram(page, 'throw new TypeError("no such thing")'), /threw an error/);
  assert.equal(await page.getByTestId("run-error").textContent(), "TypeError: no such thing");
  assert.match(await runProgram(page, "return ("), /syntax error/);
  assert.match(await page.getByTestId("run-error").textContent(), /^SyntaxError: /);
});

test("stops a program that never ends, then runs the next one", async () => {
  const { page } = app();
  const started = Date.now();
  const status = await runProgram(page, "console.log('before the loop'); while (true) {}", { timeout: 30_000 });
  const elapsed = Date.now() - started;
  assert.match(status, /^Stopped after 10\.\d s: the program ran JavaScript for longer than its CPU budget\./);
  assert.ok(elapsed >= 9_900, `stopped after ${elapsed} ms, before the 10 s CPU budget`);
  assert.match(await page.getByTestId("run-error").textContent(), /budget_exhausted:js_cpu/);
  // Its worker was ended in the middle of the loop, never idle since it printed:
  // the line it printed still reached the page.
  assert.equal(await page.getByTestId("console-output").textContent(), "before the loop");

  // The page kept serving, and the next run gets a fresh worker.
  assert.match(await runProgram(page, "return 6 * 7"), /^Completed/);
  assert.equal(await page.getByTestId("result-value").textContent(), "42");
});

test("Stop ends a running program at once, keeps what it printed, and the next run works", async () => {
  const { page } = app();
  await show(page, "editor");
  await page.getByTestId("code-editor").fill("console.log('spinning'); while (true) {}");
  await page.getByTestId("run-button").click();
  await page.getByTestId("stop-run").waitFor();
  // Nothing on the page shows a line before the run ends, so the test gives the
  // warm worker a second to reach its first statement, long past it: the line
  // is printed in the loop's stretch of JavaScript, which never goes idle.
  await page.waitForTimeout(1_000);
  await page.getByTestId("stop-run").click();
  await page.locator('[data-testid="run-status"]:not(.running)').waitFor();
  assert.match(await page.getByTestId("run-status").textContent(), /^Stopped after .*: you stopped the program\./);
  assert.match(await page.getByTestId("run-error").textContent(), /^cancelled: /);
  assert.equal(await page.getByTestId("console-output").textContent(), "spinning");
  assert.equal(await page.getByTestId("stop-run").count(), 0, "Stop goes with the run");
  assert.match(await runProgram(page, "return 6 * 7"), /^Completed/);
});

test("a permission change reaches a program already running: its next call decides by it", async () => {
  const { page } = app();
  await show(page, "settings");
  await page.getByTestId("setting-echo").waitFor({ state: "attached" });
  await page.getByTestId("tool-list").locator("summary").click();
  await show(page, "editor");
  await page.getByTestId("code-editor").fill(`const before = await tools.echo({n: 1}).then(() => "ran", (e) => e.message);
await tools.ask({question: "Go on?"});
const after = await tools.echo({n: 2}).then(() => "ran", (e) => e.message);
return {before, after};`);
  await page.getByTestId("run-button").click();
  // The program waits on the person; meanwhile the person goes to Settings and
  // blocks echo. The question stays on show there, above the view.
  await page.getByTestId("question").waitFor();
  await show(page, "settings");
  await page.getByTestId("setting-echo").selectOption("block");
  await page.getByTestId("answer-yes").click();
  await show(page, "editor");
  await page.locator('[data-testid="run-status"]:not(.running)').waitFor();
  const value = JSON.parse(await page.getByTestId("result-value").textContent());
  assert.equal(value.before, "ran");
  assert.match(value.after, /the person has blocked echo for this agent/);
  await show(page, "settings");
  await page.getByTestId("setting-echo").selectOption("");
  await page.getByTestId("tool-list").locator("summary").click();
});

test("the main thread stays free while a program makes 200 tool calls", async () => {
  const { page } = app();
  // The page's own start-up (storage opening, the panels' first reads, the tool
  // list with the storage tools) is over before the watch begins.
  await page.locator('[data-testid="memory-empty"], [data-testid="memory-item"]').first().waitFor({ state: "attached" });
  await page.getByTestId("tool-save_memory").waitFor({ state: "attached" });
  await page.evaluate(() => {
    window.longTasks = [];
    new PerformanceObserver((list) => window.longTasks.push(...list.getEntries().map((entry) => Math.round(entry.duration)))).observe({ type: "longtask" });
  });
  const status = await runProgram(page, "let n = 0;\nfor (let i = 0; i < 200; i++) n += await tools.add({a: i, b: 0});\nreturn n;");
  assert.match(status, /^Completed/, status);
  assert.equal(await page.getByTestId("result-value").textContent(), "19900");
  assert.equal(await page.locator('[data-testid="tool-calls"] tbody tr').count(), 50);
  assert.equal(await page.getByTestId("more-calls").textContent(), "150 more calls — every call is in the model text below.");
  // The control: one task of 80 ms on purpose, which the observer must see.
  await page.evaluate(() => new Promise((resolve) => setTimeout(() => { const start = performance.now(); while (performance.now() - start < 80); resolve(); }, 0)));
  await page.waitForFunction(() => window.longTasks.some((ms) => ms >= 80));
  const tasks = await page.evaluate(() => window.longTasks);
  assert.equal(tasks.length, 1, `long tasks on the main thread during the run: ${JSON.stringify(tasks)}`);
});

test("Ctrl+Enter in the editor runs the program", async () => {
  const { page } = app();
  await show(page, "editor");
  await page.getByTestId("code-editor").fill('return "keyboard"');
  await page.getByTestId("code-editor").press("Control+Enter");
  await page.locator('[data-testid="run-status"].success').waitFor();
  assert.equal(await page.getByTestId("result-value").textContent(), '"keyboard"');
});

test("the page never evaluated guest code on the main thread and raised no errors", async () => {
  const { page, errors } = app();
  // A program that would mark the main thread's global if it ran there.
  await runProgram(page, "globalThis.__kiln_guest_was_here = true; return typeof window");
  assert.equal(await page.getByTestId("result-value").textContent(), '"undefined"');
  assert.equal(await page.evaluate(() => globalThis.__kiln_guest_was_here), undefined);
  assert.deepEqual(errors, []);
});

test("at a phone's width the page never scrolls sideways: wide tables scroll in their panel", async () => {
  const { page } = app();
  const before = page.viewportSize();
  await page.setViewportSize({ width: 390, height: 844 });
  // Every view, as the one stacked page held them all.
  for (const view of Object.keys(VIEWS)) {
    await show(page, view);
    const widths = await page.evaluate(() => ({ page: document.documentElement.scrollWidth, viewport: document.documentElement.clientWidth }));
    assert.ok(widths.page <= widths.viewport, `${view}: the page is ${widths.page} px wide in a ${widths.viewport} px viewport`);
  }
  await show(page, "settings");
  await page.getByTestId("setting-echo").waitFor({ state: "attached" });
  // Open whichever way an earlier test left it.
  await page.getByTestId("tool-list").evaluate((details) => {
    details.open = true;
  });
  await page.getByTestId("setting-echo").waitFor();
  const widths = await page.evaluate(() => ({
    page: document.documentElement.scrollWidth,
    viewport: document.documentElement.clientWidth,
    table: document.querySelector(".tool-table").scrollWidth,
  }));
  assert.ok(widths.page <= widths.viewport, `the page is ${widths.page} px wide in a ${widths.viewport} px viewport`);
  assert.ok(widths.table > widths.viewport, "the tool table is wider than a phone: it must scroll, not squeeze");
  await page.setViewportSize(before);
});
