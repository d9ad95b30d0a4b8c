// The scenario end to end, with real parts. (a) An MCP server that
// wants a bearer token (the reference server behind a small proxy written
// here, which answers 401 without `Authorization: Bearer <token>` and
// records what it saw); the token kept as a vault secret allowed to the
// proxy's origin; an agent made in the Agents view with a system prompt, a
// skill, that secret, and the server with "Authorization from secret"; a
// chat with it (aimock) whose program calls the server's tool: the system
// message starts with the agent's prompt and lists the skill, the proxy saw
// the token, the program's result came back, and the token is in no DOM and
// no message the page received from its runtime worker; after a reload the
// agent is all there. (b) A schedule that fires while tabs are open: made in
// the agent's editor, fired once the minute turns, shown `ok` with a link
// that opens its job in History (a link to a job the workspace lacks says
// so), and run once although two tabs were looking. Set
// KILN_SCREENSHOTS to a folder to keep pictures (desktop and 390 px wide).
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import http from "node:http";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { addOpenAiProvider, launch, openApp, show } from "../lib/browser.mjs";
import { startAimock, startEverything } from "../lib/servers.mjs";

const SHOTS = process.env.KILN_SCREENSHOTS;
const PROMPT = "kiln-scenario-prompt: you are the docs agent; answer in one line.";
const TOKEN = "kiln-scenario-token-5f1c0e9a7b";
const SKILL_LINE = "- `web-research`: Look something up on the web with http_request and answer with what was found and where. (assigned)";

/**
 * A proxy in front of `upstream` that wants `Authorization: Bearer <token>`:
 * 401 without it, the request forwarded (without the header) with it. CORS
 * is answered here so that a page may send the header. `seen` is every
 * request but the preflights: its method, path and Authorization.
 */
async function startBearerProxy(upstream, token) {
  const target = new URL(upstream);
  const seen = [];
  const server = http.createServer((request, response) => {
    const cors = {
      "access-control-allow-origin": "*",
      "access-control-allow-methods": "GET, POST, DELETE, OPTIONS",
      "access-control-allow-headers": request.headers["access-control-request-headers"] ?? "*",
      "access-control-expose-headers": "mcp-session-id, mcp-protocol-version, www-authenticate",
      "access-control-max-age": "600",
    };
    if (request.method === "OPTIONS") {
      response.writeHead(204, cors).end();
      return;
    }
    seen.push({ method: request.method, path: request.url, authorization: request.headers.authorization ?? null });
    if (request.headers.authorization !== `Bearer ${token}`) {
      response
        .writeHead(401, { ...cors, "content-type": "application/json", "www-authenticate": 'Bearer realm="docs"' })
        .end(JSON.stringify({ error: "this server wants a bearer token" }));
      return;
    }
    const headers = { ...request.headers, host: target.host };
    delete headers.authorization;
    const forward = http.request(
      { host: target.hostname, port: target.port, method: request.method, path: request.url, headers },
      (answer) => {
        response.writeHead(answer.statusCode, { ...answer.headers, ...cors });
        answer.pipe(response);
      },
    );
    forward.on("error", (error) => {
      if (!response.headersSent) response.writeHead(502, cors);
      response.end(String(error));
    });
    request.pipe(forward);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const origin = `http://127.0.0.1:${server.address().port}`;
  return {
    origin,
    url: `${origin}${target.pathname}`,
    seen,
    stop() {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(resolve));
    },
  };
}

/** Every message event a page gets from a worker it made, as text (an init script). */
function recordWorkerMessages() {
  const Original = window.Worker;
  const received = [];
  Object.defineProperty(window, "__kilnWorkerMessages", { value: received });
  window.Worker = class extends Original {
    constructor(...args) {
      super(...args);
      this.addEventListener("message", (event) => {
        let text;
        try {
          text = JSON.stringify(event.data);
        } catch {
          text = String(event.data);
        }
        received.push(text ?? "");
      });
    }
  };
}

let mock;
let everything;
let proxy;
let browser;
before(async () => {
  mock = await startAimock();
  everything = await startEverything();
  proxy = await startBearerProxy(everything.url, TOKEN);
  browser = await launch();
  await browser.context.addInitScript(recordWorkerMessages);
  await openApp(browser.page);
});
after(async () => {
  await browser?.close();
  await proxy?.stop();
  await everything?.stop();
  await mock?.stop();
});

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const row = (page, slug) => page.locator(`[data-testid="agent-row"][data-slug="${slug}"]`);
const check = (page, what, name) => page.locator(`[data-testid="agent-${what}"][data-name="${name}"]`);
const line = (page, what, name) => page.locator(`[data-testid="agent-${what}-line"][data-name="${name}"]`);

async function screenshot(page, name) {
  if (!SHOTS) return;
  mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: join(SHOTS, `agent-scenario-${name}.png`), fullPage: true });
}

/** Shows the Agents view with the navigation, once its list is read. */
async function showAgents(page) {
  const panel = page.getByTestId("agents-panel");
  if (!(await panel.isVisible())) await page.getByTestId("nav-agents").click();
  await panel.waitFor();
  await row(page, "default").waitFor();
}

/** Opens agent `slug`'s form, its skills and vault read. */
async function editAgent(page, slug) {
  await showAgents(page);
  await row(page, slug).getByTestId("agent-edit").click();
  await page.getByTestId("agent-form").waitFor();
  await page.getByTestId("agent-skill").first().waitFor();
}

/** The page API, loaded once per page (its own runtime worker). */
async function pageApi(page, body, arg) {
  return page.evaluate(
    async ([body, arg]) => {
      const { Kiln } = await import(new URL("kiln.js", location.href).href);
      window.kilnApi ??= await Kiln.load({ poolSize: 1 });
      return new Function("kiln", "arg", `return (async () => { ${body} })()`)(window.kilnApi, arg);
    },
    [body, arg],
  );
}

/** The requests aimock got whose last user message contains `marker`. */
async function asked(marker) {
  return (await mock.journal()).filter((entry) => {
    const users = (entry.body?.messages ?? []).filter((message) => message.role === "user");
    const last = users.at(-1)?.content;
    return (typeof last === "string" ? last : JSON.stringify(last ?? "")).includes(marker);
  });
}

/** Whether `text` is in the page's DOM or any field's value. */
function inDom(page, text) {
  return page.evaluate(
    (text) =>
      document.documentElement.outerHTML.includes(text) ||
      [...document.querySelectorAll("input, textarea, select")].some((field) => field.value.includes(text)),
    text,
  );
}

test("an agent with a prompt, a skill, a vault secret and an MCP server behind a bearer token answers through the server, and the token never reaches the page", async () => {
  const { page, errors } = browser;
  await addOpenAiProvider(page, { name: "aimock", baseUrl: `${mock.url}/v1`, key: "sk-scenario", model: "gpt-4o-mini" });

  // Without the token the server refuses: the proxy is real.
  const bare = await fetch(proxy.url, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
  assert.equal(bare.status, 401);
  proxy.seen.length = 0;

  // The vault gets the token through the page API, allowed to the proxy's origin only.
  const put = await pageApi(page, "return kiln.secrets.put(arg)", { name: "DOCS_TOKEN", value: TOKEN, origins: [proxy.origin], agents: [] });
  assert.equal(typeof put.version, "number");

  // The agent, made in the Agents view.
  await showAgents(page);
  await page.getByTestId("agent-new").click();
  await page.getByTestId("agent-form").waitFor();
  await page.getByTestId("agent-name").fill("Docs agent");
  assert.equal(await page.getByTestId("agent-slug").inputValue(), "docs-agent");
  await page.getByTestId("agent-prompt").fill(PROMPT);
  await page.getByTestId("agent-provider").selectOption("aimock");
  // Skills: the catalog's, the shipped ones marked, each saying what it unlocks.
  await check(page, "skill", "web-research").waitFor();
  const research = line(page, "skill", "web-research");
  assert.equal(await research.getByTestId("agent-skill-system").textContent(), "system");
  assert.match(await research.getByTestId("agent-skill-note").textContent(), /Unlocks http_request\.$/);
  assert.match(await page.getByTestId("agent-skills").locator(".hint").first().textContent(), /unlocks the built-in tools it names/);
  await check(page, "skill", "web-research").check();
  // Secrets: the vault's names and where each may go, never a value.
  await check(page, "secret", "DOCS_TOKEN").waitFor();
  assert.equal(await line(page, "secret", "DOCS_TOKEN").getByTestId("agent-secret-note").textContent(), `Sent only to ${proxy.origin}.`);
  assert.equal(await page.getByTestId("agent-secrets-none").count(), 0);
  await check(page, "secret", "DOCS_TOKEN").check();
  // The MCP server with its Authorization from that secret.
  await page.getByTestId("agent-server-add").click();
  await page.getByTestId("agent-server-name").fill("docs");
  await page.getByTestId("agent-server-url").fill(proxy.url);
  const auth = page.getByTestId("agent-server-auth");
  assert.deepEqual(await auth.locator("option").allTextContents(), ["None: no Authorization header", "DOCS_TOKEN"]);
  await auth.selectOption("DOCS_TOKEN");
  assert.equal(await page.getByTestId("agent-server-auth-problem").count(), 0, "the vault sends it to the proxy's origin");
  await page.getByTestId("agent-save").click();
  await row(page, "docs-agent").waitFor();
  assert.equal(
    await row(page, "docs-agent").getByTestId("agent-row-meta").textContent(),
    "Agent · aimock, its saved model · 1 skill · 1 secret · 1 MCP server",
  );
  const kept = await pageApi(page, "return kiln.agents.get('docs-agent')");
  assert.deepEqual(kept.mcp, [{ name: "docs", url: proxy.url, auth_secret: "DOCS_TOKEN" }]);
  assert.deepEqual([kept.skills, kept.secrets], [["web-research"], ["DOCS_TOKEN"]]);

  // A chat with it: the model's program calls the server's tool by its mounted name.
  await show(page, "chat");
  await page.getByTestId("thread-new").click();
  await page.getByTestId("chat-welcome").waitFor();
  await page.getByTestId("chat-agent").selectOption("docs-agent");
  await page.getByTestId("chat-input").fill("kiln-agent-mcp: ask the docs server to echo");
  await page.getByTestId("chat-input").press("Enter");
  const reply = page.getByTestId("chat-assistant").last();
  const end = reply.getByTestId("chat-end");
  // The default mode asks before a program runs and before it reaches out: the person approves.
  const asks = [];
  while (!(await end.isVisible())) {
    const card = page.getByTestId("chat-cards").getByTestId("approval");
    if (await card.isVisible()) {
      asks.push(await card.getByTestId("approval-title").textContent());
      // This card going, not "no card": the next ask may replace it between two polls.
      const shown = await card.elementHandle();
      await card.getByTestId("approve").click();
      await shown.waitForElementState("hidden");
    } else {
      await sleep(100);
    }
  }
  assert.ok(asks.some((title) => title.startsWith("Allow execute_code")), asks.join(" | "));
  assert.equal(await reply.getByTestId("chat-reply-text").last().textContent(), "The docs server answered: Echo: kiln-scenario-hi.");
  assert.equal(await reply.getByTestId("chat-stop-reason").textContent(), "Answered");

  // The system message starts with the agent's prompt and lists its skill as assigned.
  const turn = await asked("kiln-agent-mcp");
  assert.equal(turn.length, 2, "the program's turn, then the answer");
  const system = turn[0].body.messages[0];
  assert.equal(system.role, "system");
  assert.ok(system.content.startsWith(PROMPT), system.content.slice(0, 200));
  assert.ok(system.content.includes(SKILL_LINE), "the skill is listed, assigned");
  // The program's result came back to the model.
  const result = turn[1].body.messages.filter((message) => message.role === "tool").at(-1);
  assert.match(result.content, /Echo: kiln-scenario-hi/);
  // The server saw the token on every request, and nothing without it.
  assert.ok(proxy.seen.length > 0, "the server was reached");
  assert.deepEqual(
    proxy.seen.filter((request) => request.authorization !== `Bearer ${TOKEN}`),
    [],
    "every request carried the token",
  );
  assert.ok(proxy.seen.some((request) => request.method === "POST"));

  // The token is in no DOM (the chat, the agent's form, the job in History) and no message from a worker.
  assert.equal(await inDom(page, TOKEN), false, "the chat");
  await editAgent(page, "docs-agent");
  assert.equal(await inDom(page, TOKEN), false, "the agent's form");
  await page.getByTestId("agent-cancel").click();
  await show(page, "history");
  await page.getByTestId("history-item").first().locator(".job-title").click();
  await page.getByTestId("history-detail").waitFor();
  assert.equal(await inDom(page, TOKEN), false, "History");
  const messages = await page.evaluate(() => window.__kilnWorkerMessages);
  assert.ok(messages.some((text) => text.includes("kiln-scenario-hi")), "the recorder saw the turn's messages");
  assert.deepEqual(messages.filter((text) => text.includes(TOKEN)), [], "no message from a worker has the token");

  // After a reload, the agent is all there.
  await page.reload();
  await editAgent(page, "docs-agent");
  assert.equal(await page.getByTestId("agent-prompt").inputValue(), PROMPT);
  assert.equal(await page.getByTestId("agent-provider").inputValue(), "aimock");
  assert.equal(await check(page, "skill", "web-research").isChecked(), true);
  assert.equal(await check(page, "skill", "big-jobs").isChecked(), false);
  assert.equal(await check(page, "secret", "DOCS_TOKEN").isChecked(), true);
  assert.equal(await page.getByTestId("agent-server-name").inputValue(), "docs");
  assert.equal(await page.getByTestId("agent-server-url").inputValue(), proxy.url);
  assert.equal(await page.getByTestId("agent-server-auth").inputValue(), "DOCS_TOKEN");
  await screenshot(page, "form");
  // At a phone's width the form fits.
  const size = page.viewportSize();
  await page.setViewportSize({ width: 390, height: 844 });
  try {
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(width <= 390, `the Agents view is ${width} px wide at 390`);
    await screenshot(page, "form-390");
  } finally {
    await page.setViewportSize(size);
  }
  await page.getByTestId("agent-cancel").click();
  assert.deepEqual(errors, []);
});

/**
 * Waits until the time is between `from` and `to` ms past a minute boundary.
 * A runtime worker looks at the schedules once when it starts, then every
 * minute from then: one started here does not look in the seconds after a
 * boundary, so a tab reloaded then is never killed while running the job.
 */
/** Whether `locator`'s element is in the viewport and uncovered (by the sticky header, say). */
function inView(locator) {
  return locator.evaluate((element) => {
    const box = element.getBoundingClientRect();
    const hit = document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2);
    return box.top >= 0 && box.bottom <= window.innerHeight && hit !== null && element.contains(hit);
  });
}

/**
 * Reloads `page` to its DOMContentLoaded; if that does not come in 60 s, the
 * error names the requests of the new document that had not finished and the
 * page's last console lines (a reload once hung this long in CI and could not be
 * made to again: the next one should say where it waited).
 */
async function reloadSaying(page) {
  const pending = new Map();
  const consoled = [];
  const started = (request) => pending.set(request, `${request.method()} ${request.url()} (${request.resourceType()})`);
  const ended = (request) => pending.delete(request);
  const logged = (message) => consoled.push(`${message.type()}: ${message.text()}`.slice(0, 300));
  page.on("request", started);
  page.on("requestfinished", ended);
  page.on("requestfailed", ended);
  page.on("console", logged);
  try {
    await page.reload({ waitUntil: "domcontentloaded", timeout: 60_000 });
  } catch (error) {
    await screenshot(page, "reload-hung").catch(() => {});
    error.message += `\nnot finished: ${[...pending.values()].join(" | ") || "nothing"}\nconsole: ${consoled.slice(-10).join(" | ") || "nothing"}`;
    throw error;
  } finally {
    page.off("request", started);
    page.off("requestfinished", ended);
    page.off("requestfailed", ended);
    page.off("console", logged);
  }
}

async function awayFromTheMinute({ from = 5_000, to = 45_000 } = {}) {
  const phase = Date.now() % 60_000;
  if (phase < from) await sleep(from - phase);
  else if (phase > to) await sleep(60_000 - phase + from);
}

test("a schedule made in the agent's editor fires while tabs are open, once, and its link opens its job in History", async () => {
  const { page, context, errors } = browser;
  await awayFromTheMinute();
  await page.reload();
  await showAgents(page);
  await page.getByTestId("agent-new").click();
  await page.getByTestId("agent-name").fill("Pinger");
  await page.getByTestId("agent-provider").selectOption("aimock");
  await page.getByTestId("agent-save").click();
  await row(page, "pinger").waitFor();
  await editAgent(page, "pinger");
  const section = page.getByTestId("agent-schedules");
  await section.getByTestId("schedules-none").waitFor();
  assert.equal(await section.locator("h3").textContent(), "Schedules of Pinger");
  assert.match(await page.locator("#schedule-cron-hint").textContent(), /^minute hour day month weekday — 0 7 \* \* \* is every day at 07:00/);
  // The zone starts as the browser's.
  const zone = await page.evaluate(() => Intl.DateTimeFormat().resolvedOptions().timeZone);
  assert.equal(await page.getByTestId("schedule-zone").inputValue(), zone);

  // What does not read is refused with the runtime's sentence; nothing is kept.
  await page.getByTestId("schedule-id").fill("ping");
  await page.getByTestId("schedule-cron").fill("61 * * * *");
  await page.getByTestId("schedule-prompt").fill("kiln-schedule-ping");
  await page.getByTestId("schedule-add").click();
  const refused = page.getByTestId("schedule-form-error");
  await refused.waitFor();
  assert.match(await refused.textContent(), /^Not added: schedule ping: cron 61 \* \* \* \* does not read/);
  await page.getByTestId("schedule-cron").fill("* * * * *");
  await page.getByTestId("schedule-zone").fill("Mars/Olympus");
  await page.getByTestId("schedule-add").click();
  await refused.filter({ hasText: "Mars/Olympus is not an IANA time zone" }).waitFor();
  await page.getByTestId("schedule-zone").fill("UTC");
  // A second tab of the workspace is open too.
  const second = await context.newPage();
  await awayFromTheMinute();
  await second.goto(`${new URL(page.url()).origin}/#/agents`);
  await showAgents(second);
  // Made well before the minute turns, so that its first occurrence is the next boundary.
  await awayFromTheMinute();
  await page.getByTestId("schedule-add").click();
  const ping = section.locator('[data-testid="schedule-row"][data-id="ping"]');
  await ping.waitFor();
  assert.equal(await refused.count(), 0);
  assert.equal((await section.getByTestId("schedules-status").textContent()).trim(), "Added the schedule ping.");
  assert.equal(await ping.getByTestId("schedule-row-cron").textContent(), "* * * * *");
  assert.match(await ping.getByTestId("schedule-when").textContent(), /, UTC time$/);
  assert.match(await ping.getByTestId("schedule-next").textContent(), /^Next: \d{4}-\d\d-\d\d \d\d:\d\d \(your time\)$/);
  assert.equal(await ping.getByTestId("schedule-no-firings").count(), 1);
  await screenshot(page, "schedules");

  try {
    // Once the first occurrence has passed, both tabs start a worker that looks at once.
    const [listed] = await pageApi(page, "return kiln.schedules.list()");
    const due = Math.floor(listed.schedule.since_ms / 60_000) * 60_000 + 60_000;
    await sleep(Math.max(0, due - Date.now()) + 1_000);
    // One after the other, and not waiting for every subresource: two tabs
    // loading the app at once on a busy two-core machine passed the default
    // 30 s "load" wait once in CI. Both new workers still look within the
    // occurrence's grace; the store lets only one of them run it.
    await reloadSaying(page);
    await reloadSaying(second);
    await editAgent(page, "pinger");
    const firing = ping.locator('[data-testid="schedule-firing"][data-status="ok"]');
    await firing.waitFor({ timeout: 30_000 });
    assert.match(await firing.textContent(), /^ok \d{4}-\d\d-\d\d \d\d:\d\d · Pong from the schedule\. Its job in History$/);
    // Switched off before the next minute: nothing more fires.
    await ping.getByTestId("schedule-on").uncheck();
    await section.locator('[data-testid="schedule-row"][data-id="ping"][data-enabled="false"]').waitFor();
    assert.match(await ping.getByTestId("schedule-next").textContent(), /^Off: nothing fires/);
    assert.equal((await section.getByTestId("schedules-status").textContent()).trim(), "The schedule ping is off.");
    assert.equal(await ping.getByTestId("schedule-firing").count(), 1, "one occurrence, run once");
    assert.equal((await asked("kiln-schedule-ping")).length, 1, "two tabs looked; one ran it");
    await screenshot(page, "schedules-fired");

    // Its link opens its job in History: expanded, in view and focused, with its answer.
    const job = await firing.getByTestId("schedule-job").getAttribute("data-job");
    await firing.getByTestId("schedule-job").click();
    await page.getByTestId("history-panel").waitFor();
    assert.equal(new URL(page.url()).hash, `#/history/${job}`);
    const item = page.locator(`[data-testid="history-item"][data-id="${job}"]`);
    await item.getByTestId("history-detail").waitFor();
    assert.equal(await item.getAttribute("data-status"), "ok");
    assert.equal(await item.locator(".job-title").getAttribute("aria-expanded"), "true");
    assert.match(await item.getByTestId("history-output").textContent(), /Pong from the schedule\./);
    await page.waitForFunction(
      (id) => document.activeElement?.closest('[data-testid="history-item"]')?.dataset.id === id,
      job,
    );
    assert.ok(await inView(item.locator(".job-title")), "the job is scrolled into view");
    assert.equal(await page.getByTestId("history-missing").count(), 0);
    await screenshot(page, "history-job");
    // A link to a job this workspace does not have says so, over the list.
    const nowhere = "j-0000000000001-00000000";
    await page.evaluate((id) => {
      location.hash = `#/history/${id}`;
    }, nowhere);
    const missing = page.getByTestId("history-missing");
    await missing.waitFor();
    assert.equal(await missing.textContent(), `No job ${nowhere} in this workspace's history.`);
    assert.equal(await page.getByTestId("history-error").count(), 0);
    await item.waitFor();
    await screenshot(page, "history-missing");
    // At a phone's width a followed link brings its job into view too.
    const wide = page.viewportSize();
    await page.setViewportSize({ width: 390, height: 844 });
    try {
      await page.evaluate(() => window.scrollTo(0, 0));
      await page.evaluate((id) => {
        location.hash = `#/history/${id}`;
      }, job);
      await item.getByTestId("history-detail").waitFor();
      await page.waitForFunction(
        (id) => document.activeElement?.closest('[data-testid="history-item"]')?.dataset.id === id,
        job,
      );
      assert.ok(await inView(item.locator(".job-title")), "the job is scrolled into view at 390 px");
      const width = await page.evaluate(() => document.documentElement.scrollWidth);
      assert.ok(width <= 390, `History is ${width} px wide at 390`);
      await screenshot(page, "history-job-390");
    } finally {
      await page.setViewportSize(wide);
    }
    // A linked job the list does not show (here, not a hit of the search typed) is listed above it.
    await page.getByTestId("history-search").fill("docs");
    await page.getByTestId("history-hit").first().waitFor();
    assert.equal(await page.locator(`[data-testid="history-list"] [data-id="${job}"]`).count(), 0);
    await page.evaluate(() => {
      location.hash = "#/history";
    });
    await page.getByTestId("history-linked").waitFor({ state: "detached" });
    await page.evaluate((id) => {
      location.hash = `#/history/${id}`;
    }, job);
    const linked = page.getByTestId("history-linked").locator(`[data-testid="history-item"][data-id="${job}"]`);
    await linked.getByTestId("history-detail").waitFor();
    assert.match(await linked.getByTestId("history-output").textContent(), /Pong from the schedule\./);
    await page.getByTestId("history-search").fill("");

    // At a phone's width the schedules fit.
    await editAgent(page, "pinger");
    const size = page.viewportSize();
    await page.setViewportSize({ width: 390, height: 844 });
    try {
      await section.scrollIntoViewIfNeeded();
      const width = await page.evaluate(() => document.documentElement.scrollWidth);
      assert.ok(width <= 390, `the schedules are ${width} px wide at 390`);
      await screenshot(page, "schedules-390");
    } finally {
      await page.setViewportSize(size);
    }
  } finally {
    await second.close();
  }
  assert.deepEqual(errors, []);
});
