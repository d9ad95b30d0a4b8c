// A program calls the page's tools: each call crosses from the sandbox worker
// to the page and back, and the result panel lists the calls.
import assert from "node:assert/strict";
import { test } from "node:test";
import { runProgram, show, useApp } from "../lib/browser.mjs";

const app = useApp();

async function callRows(page) {
  return page.locator('[data-testid="tool-calls"] tbody tr').evaluateAll((rows) =>
    rows.map((row) => [...row.querySelectorAll("td")].slice(1, 3).map((cell) => cell.textContent)),
  );
}

test("the page lists the tools a program can call, with their category and setting", async () => {
  const { page } = app();
  // Settings lists them.
  await show(page, "settings");
  await page.getByTestId("tool-list").locator("summary").click();
  // The page's 5, and the workspace's 16 storage tools once storage is open;
  // no network until the person allows it.
  await page.getByTestId("tool-list").locator("summary").filter({ hasText: "Tools and permissions (21 tools)" }).waitFor();
  assert.match(await page.getByTestId("tool-add").textContent(), /tools\.addAdds two numbers.*read.*page/);
  assert.equal(await page.getByTestId("tool-http_request").count(), 0);
  assert.equal(await page.getByTestId("network-reach").inputValue(), "off");
  assert.equal(await page.getByTestId("setting-add").inputValue(), "");
  // Allowing the network adds http_request, and the workspace keeps the setting.
  await allowNetwork(page, new URL(page.url()).origin);
  await page.getByTestId("tool-list").locator("summary").filter({ hasText: "Tools and permissions (22 tools)" }).waitFor();
  assert.match(await page.getByTestId("tool-http_request").textContent(), /external.*builtin/);
  // The reload opens Settings again (its URL).
  await page.reload();
  await page.getByTestId("settings").waitFor();
  await page.getByTestId("tool-list").locator("summary").filter({ hasText: "(22 tools)" }).waitFor();
  assert.equal(await page.getByTestId("network-reach").inputValue(), "only");
  assert.equal(await page.getByTestId("network-origins").inputValue(), new URL(page.url()).origin);
  // An origin that is not one is refused by name, and nothing changes.
  await page.getByTestId("network-origins").fill("ftp://files.example.com");
  await page.getByTestId("network-save").click();
  assert.match(await page.getByTestId("network-error").textContent(), /ftp:\/\/files\.example\.com/);
  await page.getByTestId("network-reach").selectOption("off");
  await page.getByTestId("tool-list").locator("summary").filter({ hasText: "(21 tools)" }).waitFor();
});

/** Lets the app's programs reach `origin` (and nothing else) with http_request. */
async function allowNetwork(page, origin) {
  await page.getByTestId("network-reach").selectOption("only");
  await page.getByTestId("network-origins").fill(origin);
  await page.getByTestId("network-save").click();
}

test("a program awaits tools across the worker boundary", async () => {
  const { page } = app();
  const status = await runProgram(
    page,
    [
      "const [sum, waited, echoed] = await Promise.all([",
      "  tools.add({a: 2, b: 40}), tools.wait({ms: 50}), tools.echo({bytes: [1, 2], nested: {ok: true}}),",
      "]);",
      "return {sum, waited, echoed};",
    ].join("\n"),
  );
  assert.match(status, /^Completed/);
  assert.deepEqual(JSON.parse(await page.getByTestId("result-value").textContent()), {
    sum: 42,
    waited: { waited_ms: 50 },
    echoed: { bytes: [1, 2], nested: { ok: true } },
  });
  assert.deepEqual(await callRows(page), [
    ["add", "ok"],
    ["wait", "ok"],
    ["echo", "ok"],
  ]);
});

test("an uncaught tool failure names the tool and the call", async () => {
  const { page } = app();
  const status = await runProgram(page, 'await tools.echo({});\nawait tools.add({a: 1, b: "x"});');
  assert.match(status, /^A tool call failed and the program did not catch it/);
  assert.match(await page.getByTestId("run-error").textContent(), /^add \(call 2\) failed: add \(call 2\): argument `\/b` must be a number; got a string/);
  assert.deepEqual(await callRows(page), [
    ["echo", "ok"],
    ["add", "error"],
  ]);
});

test("a caught tool failure does not fail the run, and an unknown tool is named", async () => {
  const { page } = app();
  await runProgram(page, "try { await tools.add({}) } catch (e) { return e.code }");
  assert.equal(await page.getByTestId("result-value").textContent(), '"invalid_arguments"');
  await runProgram(page, "return await tools.weather()");
  assert.equal(
    await page.getByTestId("run-error").textContent(),
    "TypeError: tools.weather is not available in this codemode run. Available tools: add, ask, clock, echo, file_edit, file_list, file_mkdir, file_read, file_remove, file_search, file_stat, file_write, list_shared, mark_memory_helpful, mark_memory_outdated, query_memory, read_shared, save_memory, search_history, share_result, wait (21). Not every tool is available inside programs yet.",
  );
});

test("a run stopped while a tool call is out leaves the page working", async () => {
  const { page } = app();
  // The call goes out when the guest first goes idle (the sleep); then the
  // worker is ended (out of memory) while the page still serves `wait`.
  const program = [
    "const pending = tools.wait({ms: 10000});",
    "await sleep(1);",
    "const a = []; while (true) a.push('x'.repeat(1e6) + a.length);",
  ].join("\n");
  const status = await runProgram(page, program, { timeout: 20_000 });
  assert.match(status, /^Stopped: the program needed more memory than its budget allows\./);
  assert.match(await page.getByTestId("run-error").textContent(), /budget_exhausted:memory/);
  assert.deepEqual(await callRows(page), [["wait", "outcome_unknown"]]);
  assert.match(await runProgram(page, "return await tools.add({a: 1, b: 1})"), /^Completed/);
  assert.equal(await page.getByTestId("result-value").textContent(), "2");
});

test("a program asks the person, and the time they take counts as person wait", async () => {
  const { page } = app();
  await show(page, "editor");
  await page.getByTestId("code-editor").fill('const r = await tools.ask({question: "Deploy to production?"});\nreturn r;');
  await page.getByTestId("run-button").click();
  await page.getByTestId("question").waitFor();
  assert.equal(await page.getByTestId("question-text").textContent(), "Deploy to production?");
  await page.waitForTimeout(400);
  await page.getByTestId("answer-yes").click();
  await page.locator('[data-testid="run-status"].success').waitFor();
  assert.equal(await page.getByTestId("question").count(), 0, "the card goes once answered");
  assert.deepEqual(JSON.parse(await page.getByTestId("result-value").textContent()), { answer: true });
  const text = await page.getByTestId("model-text").textContent();
  const wait = Number(text.match(/· person wait (\d+) ms/)[1]);
  assert.ok(wait >= 350, `person wait ${wait} ms`);
  assert.match(text, /\nask \| ok \| true \| \d+\n/);
});

test("calls that ask at once wait in line, and allowing one for the session answers the rest", async () => {
  const { page } = app();
  const url = new URL("kiln.css", page.url()).href;
  await show(page, "settings");
  await allowNetwork(page, new URL(page.url()).origin);
  await page.getByTestId("tool-list").locator("summary").filter({ hasText: "(22 tools)" }).waitFor();
  await show(page, "editor");
  await page.getByTestId("code-editor").fill(
    `return await Promise.all([1, 2, 3].map((i) => tools.http_request({url: ${JSON.stringify(url)} + "?" + i}).then((r) => r.status)));`,
  );
  await page.getByTestId("run-button").click();
  await page.getByTestId("approval").waitFor();
  assert.equal(await page.getByTestId("approval-waiting").textContent(), "2 more calls waiting for an answer after this one.");
  await page.getByTestId("approve").click();
  await page.getByTestId("approval-title").filter({ hasText: "(call 2)" }).waitFor();
  assert.equal(await page.getByTestId("approval-waiting").textContent(), "1 more call waiting for an answer after this one.");
  await page.getByTestId("allow-session").click();
  await page.locator('[data-testid="run-status"]:not(.running)').waitFor();
  assert.equal(await page.getByTestId("approval").count(), 0);
  assert.deepEqual(JSON.parse(await page.getByTestId("result-value").textContent()), [200, 200, 200]);
});
