// MCP tools from the browser: the page API and the app reach the real
// reference server over Streamable HTTP with fetch, through the ladder.
import assert from "node:assert/strict";
import { test } from "node:test";
import { runProgram, show, useApp } from "../lib/browser.mjs";
import { freePort, startEverything, startResuming } from "../lib/servers.mjs";

const app = useApp();

async function load(page) {
  await page.evaluate(async () => {
    const { Kiln } = await import("./kiln.js");
    window.kiln ??= await Kiln.load();
  });
}

test("a page runs a full MCP session: listed tools, calls, structured content, argument errors", async () => {
  const server = await startEverything();
  try {
    const { page } = app();
    await load(page);
    const result = await page.evaluate(
      (url) =>
        window.kiln.run({
          code: `const sum = await tools.everything_get_sum({a: 2, b: 3});
const echo = await tools.everything_echo("from the browser");
const weather = await tools.everything_get_structured_content({location: "Chicago"});
let bad; try { await tools.everything_get_sum({a: "2", b: 3}) } catch (e) { bad = e.code + ": " + e.message }
let missing; try { await tools.everything_get_sum({a: 2, c: 3}) } catch (e) { missing = e.code + ": " + e.message }
return {sum, echo, weather, bad, missing, mounted: Object.keys(tools).filter((n) => n.startsWith("everything_")).length};`,
          mcp: { everything: url },
        }),
      server.url,
    );
    const s = result.structuredContent;
    assert.equal(s.status, "completed", result.content[0].text);
    assert.equal(s.value.sum, "The sum of 2 and 3 is 5.");
    assert.equal(s.value.echo, "Echo: from the browser");
    assert.deepEqual(s.value.weather, { temperature: 36, conditions: "Light rain / drizzle", humidity: 82 });
    assert.match(s.value.bad, /^invalid_arguments: everything_get_sum \(call 4\): argument `\/a` must be a number; got a string/);
    assert.equal(s.value.missing, "missing_arguments: everything_get_sum (call 5) is missing required argument `b`; it was passed `a`, `c` instead");
    assert.ok(s.value.mounted >= 10, s.value.mounted);
    assert.deepEqual(s.warnings.map((w) => w.code), ["keyless"]);
  } finally {
    await server.stop();
  }
});

test("a reply stream that ends before its answer is resumed from the browser, as the transport says", async () => {
  const server = await startResuming();
  try {
    const { page } = app();
    await load(page);
    const result = await page.evaluate(
      (url) =>
        window.kiln.run({
          code: "return [await tools.resuming_echo({text: 'one'}), await tools.resuming_echo({text: 'two'})]",
          mcp: { resuming: url },
        }),
      server.url,
    );
    assert.equal(result.structuredContent.status, "completed", result.content[0].text);
    assert.deepEqual(result.structuredContent.value, ["resumed: one", "resumed: two"]);
    // Each call resumed once, with the stream's last event id, after its `retry`.
    assert.deepEqual(server.resumes.map((resume) => resume.lastEventId), ["call-1", "call-2"]);
    for (const resume of server.resumes) assert.ok(resume.afterMs >= 450, `resumed after ${resume.afterMs} ms`);
  } finally {
    await server.stop();
  }
});

test("a server that is down is a tools_unavailable warning, not a failed run", async () => {
  const { page } = app();
  await load(page);
  const port = await freePort();
  const result = await page.evaluate(
    (url) => window.kiln.run({ code: "return Object.keys(tools)", mcp: { down: url } }),
    `http://127.0.0.1:${port}/mcp`,
  );
  const s = result.structuredContent;
  assert.equal(s.status, "completed");
  // The workspace's storage tools, no network (it was not asked for), none of the server's.
  assert.ok(!s.value.includes("http_request") && s.value.includes("file_read"), JSON.stringify(s.value));
  assert.deepEqual(s.value.filter((name) => name.startsWith("down_")), []);
  const warning = s.warnings.find((w) => w.code === "tools_unavailable");
  assert.match(warning.message, /MCP server `down` at `http:\/\/127\.0\.0\.1:\d+\/mcp` is unreachable/);
});

test("a server that dies mid-session fails the call by name; back again, the client reconnects", async () => {
  let server = await startEverything();
  const port = server.port;
  try {
    const { page } = app();
    await load(page);
    // The program stops at each checkpoint until the test has changed the server.
    await page.evaluate((url) => {
      window.checkpoints = [];
      window.mcpRun = window.kiln.run({
        code: `const out = [await tools.everything_get_sum({a: 1, b: 1})];
await tools.checkpoint({});
try { await tools.everything_get_sum({a: 1, b: 2}) } catch (e) { out.push(e.code + ": " + e.message) }
await tools.checkpoint({});
out.push(await tools.everything_get_sum({a: 1, b: 3}));
return out;`,
        mcp: { everything: url },
        tools: { checkpoint: { category: "read", call: () => new Promise((resolve) => window.checkpoints.push(resolve)) } },
      });
    }, server.url);
    const reached = (n) => page.waitForFunction((n) => window.checkpoints.length >= n, n, { timeout: 15_000 });
    await reached(1);
    await server.stop();
    await page.evaluate(() => window.checkpoints[0]());
    await reached(2);
    server = await startEverything(port);
    await page.evaluate(() => window.checkpoints[1]());
    const result = await page.evaluate(() => window.mcpRun);
    const [first, lost, again] = result.structuredContent.value;
    assert.equal(first, "The sum of 1 and 1 is 2.");
    assert.match(lost, /^mcp_unavailable: MCP server `everything` at `http:\/\/127\.0\.0\.1:\d+\/mcp` is unreachable/);
    assert.equal(again, "The sum of 1 and 3 is 4.");
  } finally {
    await server.stop();
  }
});

test("in the app a person adds a server by URL, sees its tools, and approves, denies or allows a call", async () => {
  const server = await startEverything();
  try {
    const { page, errors } = app();
    // Settings holds the MCP servers and the tool list.
    await show(page, "settings");
    await page.getByTestId("mcp-servers").locator("summary").click();
    // A server that is not there is named, with what to check.
    await page.getByTestId("mcp-name").fill("down");
    await page.getByTestId("mcp-url").fill(`http://127.0.0.1:${await freePort()}/mcp`);
    await page.getByTestId("mcp-add").click();
    await page.getByTestId("mcp-status").filter({ hasText: "Could not add" }).waitFor();
    assert.match(await page.getByTestId("mcp-status").textContent(), /Could not add down: MCP server down at .* is unreachable.*Check the URL, that the server is running, and that it allows this page's origin \(CORS\)\./);
    await page.getByTestId("mcp-name").fill("everything");
    await page.getByTestId("mcp-url").fill(server.url);
    await page.getByTestId("mcp-add").click();
    await page.getByTestId("mcp-server-everything").waitFor();
    assert.match(await page.getByTestId("mcp-status").textContent(), /everything: mcp-servers\/everything 2\.0\.0 — \d+ tools/);
    await page.getByTestId("tool-list").locator("summary").click();
    const row = page.getByTestId("tool-everything_get_sum");
    assert.match(await row.textContent(), /external.*mcp:everything/);

    const code = `const out = [];
for (const b of [1, 2, 3]) { try { out.push(await tools.everything_get_sum({a: 1, b})) } catch (e) { out.push(e.code) } }
return out;`;
    await show(page, "editor");
    await page.getByTestId("code-editor").fill(code);
    await page.getByTestId("run-button").click();
    const card = page.getByTestId("approval");
    await card.waitFor();
    assert.equal(await card.getAttribute("role"), "alertdialog");
    assert.match(await page.getByTestId("approval-title").textContent(), /Allow everything_get_sum \(call 1\)\?/);
    assert.match(await page.getByTestId("approval-args").textContent(), /"a": 1,\s+"b": 1/);
    // The card takes the focus on Approve, its primary action: Enter approves.
    await page.waitForFunction(() => document.activeElement?.dataset.testid === "approve");
    await page.keyboard.press("Enter");
    await page.getByTestId("approval-title").filter({ hasText: "(call 2)" }).waitFor();
    await page.keyboard.press("Escape");
    await page.getByTestId("approval-title").filter({ hasText: "(call 3)" }).waitFor();
    await page.getByTestId("allow-session").click();
    await page.locator('[data-testid="run-status"]:not(.running)').waitFor();
    assert.match(await page.getByTestId("result-value").textContent(), /"The sum of 1 and 1 is 2\.",\s+"denied",\s+"The sum of 1 and 3 is 4\."/);
    const rows = await page.locator('[data-testid="tool-calls"] tbody tr').evaluateAll((rows) =>
      rows.map((row) => [...row.querySelectorAll("td")].slice(1, 4).map((cell) => cell.textContent)),
    );
    assert.deepEqual(rows, [
      ["everything_get_sum", "ok", "yes"],
      ["everything_get_sum", "denied", "yes"],
      ["everything_get_sum", "ok", "yes"],
    ]);
    const text = await page.getByTestId("model-text").textContent();
    assert.match(text, /everything_get_sum \| ok \| true/);
    assert.match(text, /everything_get_sum \| denied \| true/);

    // Allowed for the session: the next run is not asked.
    const status = await runProgram(page, "return await tools.everything_get_sum({a: 5, b: 5})");
    assert.match(status, /^Completed/, status);
    assert.equal(await card.count(), 0);

    // Plan mode refuses it; a blocked read tool is refused too.
    await show(page, "settings");
    await page.getByTestId("permission-mode").selectOption("plan");
    await page.getByTestId("setting-echo").selectOption("block");
    await runProgram(page, `const out = [];
try { await tools.everything_get_sum({a: 1, b: 1}) } catch (e) { out.push(e.code) }
try { await tools.echo({}) } catch (e) { out.push(e.message) }
return out;`);
    const value = await page.getByTestId("result-value").textContent();
    assert.match(value, /"refused"/);
    assert.match(value, /the person has blocked echo for this agent/);
    await show(page, "settings");
    await page.getByTestId("permission-mode").selectOption("default");
    await page.getByTestId("setting-echo").selectOption("");
    assert.deepEqual(errors, []);
  } finally {
    await server.stop();
  }
});
