// The Skills view and Settings' secrets, web search, team changes and MCP
// servers, as a person uses them: the four shipped skills listed read-only,
// a skill made, edited, renamed, kept over a reload, a shipped one duplicated,
// one deleted (with Undo), and a shipped name refused with its sentence; a
// secret set whose value is, once saved, in no element or field of the page
// and in no message the page received from a worker during the whole spec,
// after a reload too; the web search and team-change settings saved and read
// back after a reload, a bad one refused with its sentence; an MCP server
// added in Settings, kept as the default agent's (its other fields kept too),
// listed again after a reload with its tools in the tool list. Set
// KILN_SCREENSHOTS to a folder to keep pictures (desktop and 390 px wide).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { launch, openApp, show } from "../lib/browser.mjs";
import { startEverything } from "../lib/servers.mjs";

const SHOTS = process.env.KILN_SCREENSHOTS;
const SHIPPED = ["big-jobs", "tidy-data", "web-research", "workspace-notes"];
const RESERVED = "is a system skill that ships with Kiln: it cannot be created, changed or deleted; copy it under another name to make your own";
// Unique to this run, so that a hit is this value and nothing else.
const VALUE = `s3cret-VALUE-${randomUUID()}`;
const NEW_VALUE = `s3cret-VALUE-${randomUUID()}-replaced`;

let everything;
let browser;
// Every message a worker posted to the page, across reloads (each document
// records its own; `collect` keeps them here before a reload).
const received = [];

before(async () => {
  everything = await startEverything();
  browser = await launch();
  // Each worker the page starts (the runtime worker among them) is wrapped
  // before any of the app's script runs: every `message` it posts is kept.
  await browser.context.addInitScript(() => {
    const Original = window.Worker;
    window.__workerMessages = [];
    window.Worker = class extends Original {
      constructor(url, options) {
        super(url, options);
        const from = String(url);
        this.addEventListener("message", (event) => {
          let data;
          try {
            data = typeof event.data === "string" ? event.data : JSON.stringify(event.data);
          } catch {
            data = String(event.data);
          }
          window.__workerMessages.push({ from, data });
        });
      }
    };
  });
  await openApp(browser.page);
});
after(async () => {
  await browser?.close();
  await everything?.stop();
});

/** Moves this document's recorded worker messages into `received`. */
async function collect(page) {
  const messages = await page.evaluate(() => window.__workerMessages.splice(0));
  received.push(...messages);
  return received;
}

/** Reloads the page (its recorded messages kept first) and waits for `view`. */
async function reload(page, view) {
  await collect(page);
  await page.reload();
  await page.getByTestId(view === "skills" ? "skills-panel" : "settings").waitFor({ state: "visible" });
}

async function screenshot(page, name) {
  if (!SHOTS) return;
  mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: join(SHOTS, `skills-secrets-${name}.png`), fullPage: true });
  await page.setViewportSize({ width: 390, height: 844 });
  await page.screenshot({ path: join(SHOTS, `skills-secrets-${name}-390.png`), fullPage: true });
  await page.setViewportSize({ width: 1280, height: 800 });
}

/** Opens a Settings section (a `<details>`) unless it is open. */
async function openSection(page, testid) {
  const section = page.getByTestId(testid);
  await section.waitFor();
  if (!(await section.evaluate((details) => details.open))) await section.locator("summary").click();
  return section;
}

const skillRow = (page, name) => page.locator(`[data-testid="skill-row"][data-name="${name}"]`);
const secretRow = (page, name) => page.locator(`[data-testid="secret-row"][data-name="${name}"]`);

/** Fills the skill form (New skill or Edit pressed) and saves it. */
async function fillSkill(page, { name, description, body, tools }) {
  const form = page.getByTestId("skill-form");
  await form.waitFor();
  if (name !== undefined) await page.getByTestId("skill-name").fill(name);
  if (description !== undefined) await page.getByTestId("skill-description").fill(description);
  if (body !== undefined) await page.getByTestId("skill-body-input").fill(body);
  if (tools !== undefined) await page.getByTestId("skill-tools").fill(tools);
  await page.getByTestId("skill-save").click();
}

test("skills: the shipped ones are read-only; one made, edited, renamed, kept, duplicated, deleted", async () => {
  const { page, errors } = browser;
  await show(page, "skills");
  for (const name of SHIPPED) await skillRow(page, name).waitFor();
  assert.match(await page.getByTestId("skills-slash").textContent(), /In a message, \/name loads that skill into the turn/);
  // The shipped skills: marked, with Read and Duplicate, never Edit or Delete.
  for (const name of SHIPPED) {
    const row = skillRow(page, name);
    assert.equal(await row.getAttribute("data-system"), "true", name);
    assert.equal(await row.getByTestId("skill-shipped").textContent(), "ships with Kiln");
    assert.equal(await row.getByTestId("skill-edit").count(), 0, name);
    assert.equal(await row.getByTestId("skill-delete").count(), 0, name);
  }
  assert.match(await skillRow(page, "web-research").getByTestId("skill-row-meta").textContent(), /^Unlocks http_request/);
  // Read: the body as Markdown (a heading and a code block).
  const tidy = skillRow(page, "tidy-data");
  await tidy.getByTestId("skill-read").click();
  assert.equal(await tidy.getByTestId("skill-read").getAttribute("aria-expanded"), "true");
  const body = tidy.getByTestId("skill-body");
  await body.locator("h3").filter({ hasText: "Tidy data in a program" }).waitFor();
  assert.ok((await body.locator("pre code").count()) > 0, "its code block is code");
  await screenshot(page, "skills");
  await tidy.getByTestId("skill-read").click();
  await body.waitFor({ state: "hidden" });

  // A new skill; the check's sentence first, for a bad name.
  await page.getByTestId("skill-new").click();
  await fillSkill(page, { name: "Packing List", description: "Pack for a trip.", body: "x" });
  assert.match(await page.getByTestId("skill-form-error").textContent(), /skill name Packing List must be 1 to 64 of a-z, 0-9 and -/);
  await fillSkill(page, { name: "packing", body: "# Packing\n\nRoll, **do not** fold.", tools: "http_request" });
  await page.getByTestId("skills-status").filter({ hasText: "Saved packing." }).waitFor();
  const packing = skillRow(page, "packing");
  await packing.waitFor();
  assert.equal(await packing.getAttribute("data-system"), "false");
  assert.equal(await packing.getByTestId("skill-shipped").count(), 0);
  assert.equal(await packing.getByTestId("skill-row-description").textContent(), "Pack for a trip.");
  await packing.getByTestId("skill-read").click();
  assert.equal(await packing.getByTestId("skill-body").locator("strong").textContent(), "do not");
  // Edit it, then rename it.
  await packing.getByTestId("skill-edit").click();
  assert.equal(await page.getByTestId("skill-name").inputValue(), "packing");
  assert.equal(await page.getByTestId("skill-tools").inputValue(), "http_request");
  await fillSkill(page, { description: "Pack light for a trip." });
  await packing.getByTestId("skill-row-description").filter({ hasText: "Pack light for a trip." }).waitFor();
  await skillRow(page, "packing").getByTestId("skill-edit").click();
  await fillSkill(page, { name: "travel-packing" });
  await page.getByTestId("skills-status").filter({ hasText: "Saved packing as travel-packing." }).waitFor();
  await skillRow(page, "travel-packing").waitFor();
  assert.equal(await skillRow(page, "packing").count(), 0, "the old name is gone");
  // A rename onto a shipped name is refused with the runtime's sentence.
  await skillRow(page, "travel-packing").getByTestId("skill-edit").click();
  await fillSkill(page, { name: "big-jobs" });
  assert.equal(await page.getByTestId("skill-form-error").locator(".error-message").textContent(), `Not saved: big-jobs ${RESERVED}`);
  await page.getByTestId("skill-cancel").click();
  await page.getByTestId("skill-form").waitFor({ state: "detached" });
  // So is a new skill with one.
  await page.getByTestId("skill-new").click();
  await fillSkill(page, { name: "web-research", description: "Mine.", body: "x" });
  await page.getByTestId("skill-form-error").filter({ hasText: RESERVED }).waitFor();
  assert.match(await page.getByTestId("skill-form-error").textContent(), /web-research is a system skill that ships with Kiln/);
  await page.getByTestId("skill-cancel").click();

  // Kept over a reload.
  await reload(page, "skills");
  const renamed = skillRow(page, "travel-packing");
  await renamed.waitFor();
  assert.equal(await renamed.getByTestId("skill-row-description").textContent(), "Pack light for a trip.");
  assert.match(await renamed.getByTestId("skill-row-meta").textContent(), /^Unlocks http_request · assigned to no agent$/);
  assert.equal(await skillRow(page, "packing").count(), 0);

  // A shipped skill duplicated into an editable copy, with its body.
  await skillRow(page, "tidy-data").getByTestId("skill-duplicate").click();
  assert.equal(await page.locator("#skill-form-title").textContent(), "New skill, copied from /tidy-data");
  assert.equal(await page.getByTestId("skill-name").inputValue(), "tidy-data-copy");
  await fillSkill(page, {});
  const copy = skillRow(page, "tidy-data-copy");
  await copy.waitFor();
  assert.equal(await copy.getAttribute("data-system"), "false");
  await copy.getByTestId("skill-edit").waitFor();
  await copy.getByTestId("skill-read").click();
  await copy.getByTestId("skill-body").locator("h3").filter({ hasText: "Tidy data in a program" }).waitFor();

  // Delete with Undo, then delete for good.
  await renamed.getByTestId("skill-delete").click();
  await page.getByTestId("skills-status").filter({ hasText: "Deleted travel-packing." }).waitFor();
  await renamed.waitFor({ state: "detached" });
  await page.getByTestId("skill-undo").click();
  await page.getByTestId("skills-status").filter({ hasText: "travel-packing is back." }).waitFor();
  await skillRow(page, "travel-packing").waitFor();
  await skillRow(page, "travel-packing").getByTestId("skill-delete").click();
  await page.getByTestId("skill-undo").waitFor();
  await copy.getByTestId("skill-delete").click();
  await copy.waitFor({ state: "detached" });
  await reload(page, "skills");
  for (const name of SHIPPED) await skillRow(page, name).waitFor();
  assert.deepEqual(
    await page.locator('[data-testid="skill-row"]').evaluateAll((rows) => rows.map((row) => row.dataset.name)),
    SHIPPED,
  );
  assert.deepEqual(errors, []);
});

/** Every place of the page a value could be read from: the document's markup, each field's value, local storage. */
async function pageText(page) {
  return page.evaluate(() => {
    const fields = [...document.querySelectorAll("input, textarea, select")].map((field) => field.value);
    return [document.documentElement.outerHTML, ...fields, JSON.stringify({ ...localStorage }), JSON.stringify({ ...sessionStorage })].join("\n");
  });
}

async function assertNowhere(page, what) {
  assert.ok(!(await pageText(page)).includes("s3cret-VALUE"), `${what}: a value is in the page`);
  const messages = await collect(page);
  const leaked = messages.filter((message) => message.data.includes("s3cret-VALUE"));
  assert.deepEqual(leaked, [], `${what}: a worker sent a value to the page`);
}

test("secrets: a value set is in no element, field or worker message, before and after a reload", async () => {
  const { page, errors } = browser;
  await show(page, "settings");
  const section = await openSection(page, "secrets");
  assert.equal(
    await page.getByTestId("secrets-sealed").textContent(),
    "Values are sealed in this browser with a key no script can read; they go only to the origins listed, and only to agents whose profile names them.",
  );
  await page.getByTestId("secret-add").click();
  const value = page.getByTestId("secret-value");
  assert.equal(await value.getAttribute("type"), "password");
  assert.equal(await value.getAttribute("autocomplete"), "off");
  // The check's sentences, before anything is sent.
  await page.getByTestId("secret-name").fill("DOCS_TOKEN");
  await page.getByTestId("secret-origins").fill("api.example.com");
  await page.getByTestId("secret-save").click();
  assert.match(await page.getByTestId("secret-form-error").textContent(), /secret DOCS_TOKEN: the value must be 1 to 16384 bytes/);
  await value.fill(VALUE);
  // The check can fail: while the value is typed, the field holds it.
  assert.ok((await pageText(page)).includes(VALUE), "the typed value is seen in its field");
  await page.getByTestId("secret-save").click();
  await page.getByTestId("secret-form-error").filter({ hasText: "api.example.com is not an origin" }).waitFor();
  await page.getByTestId("secret-origins").fill("https://API.example.com/\nhttp://127.0.0.1:9");
  await page.getByTestId("secret-agent-default").check();
  await page.getByTestId("secret-save").click();
  await page.getByTestId("secrets-status").filter({ hasText: "Saved DOCS_TOKEN: its value is sealed and will not be shown again." }).waitFor();
  // The form is gone, and its field with it.
  assert.equal(await page.getByTestId("secret-value").count(), 0);
  const row = secretRow(page, "DOCS_TOKEN");
  await row.waitFor();
  assert.equal(await row.getByTestId("secret-row-origins").textContent(), "https://api.example.com, http://127.0.0.1:9");
  assert.equal(await row.getByTestId("secret-row-agents").textContent(), "only default");
  assert.match(await row.getByTestId("secret-row-set").textContent(), /^set \d{4}-\d{2}-\d{2} \d{2}:\d{2}$/);
  assert.equal(await row.getByTestId("secret-row-used").textContent(), "never given to a job");
  assert.match(await section.locator("summary").textContent(), /Secrets \(1\)/);
  await assertNowhere(page, "after saving");
  // The recording works: the runtime worker's answers are in it (the list, by name).
  assert.ok(received.some((message) => message.data.includes("DOCS_TOKEN")), "the worker's answers were recorded");

  // Edit: the origins and agents change, the value is neither shown nor sent.
  await row.getByTestId("secret-edit").click();
  assert.equal(await page.getByTestId("secret-value").count(), 0);
  assert.equal(await page.getByTestId("secret-value-kept").textContent(), "Kept sealed; not shown. ");
  assert.equal(await page.getByTestId("secret-name").getAttribute("readonly"), "");
  await page.getByTestId("secret-origins").fill("https://api.example.com");
  await page.getByTestId("secret-agent-default").uncheck();
  await page.getByTestId("secret-save").click();
  await page.getByTestId("secrets-status").filter({ hasText: "Saved DOCS_TOKEN; its value is unchanged." }).waitFor();
  await row.getByTestId("secret-row-agents").filter({ hasText: "every agent that names it" }).waitFor();
  assert.equal(await row.getByTestId("secret-row-origins").textContent(), "https://api.example.com");
  // Replace value: a new, empty field; the old value never comes back.
  await row.getByTestId("secret-edit").click();
  await page.getByTestId("secret-replace").click();
  assert.equal(await page.getByTestId("secret-value").inputValue(), "");
  await page.getByTestId("secret-value").fill(NEW_VALUE);
  await page.getByTestId("secret-save").click();
  await page.getByTestId("secrets-status").filter({ hasText: "its value is sealed" }).waitFor();
  assert.equal(await page.getByTestId("secret-value").count(), 0);
  await assertNowhere(page, "after replacing the value");
  await screenshot(page, "settings");

  // A second secret, to remove (Remove asks first).
  await page.getByTestId("secret-add").click();
  await page.getByTestId("secret-name").fill("OLD_TOKEN");
  await page.getByTestId("secret-value").fill(`${VALUE}-old`);
  await page.getByTestId("secret-origins").fill("https://old.example.com");
  await page.getByTestId("secret-save").click();
  const old = secretRow(page, "OLD_TOKEN");
  await old.waitFor();
  await old.getByTestId("secret-remove").click();
  assert.match(await old.locator(".secret-confirm").textContent(), /Remove OLD_TOKEN\? Its value cannot be brought back\./);
  await old.getByTestId("secret-remove-cancel").click();
  await old.getByTestId("secret-remove").click();
  await old.getByTestId("secret-remove-confirm").click();
  await old.waitFor({ state: "detached" });

  await reload(page, "settings");
  await openSection(page, "secrets");
  const kept = secretRow(page, "DOCS_TOKEN");
  await kept.waitFor();
  assert.equal(await kept.getByTestId("secret-row-origins").textContent(), "https://api.example.com");
  assert.match(await kept.getByTestId("secret-row-set").textContent(), /^set \d{4}-/);
  assert.equal(await secretRow(page, "OLD_TOKEN").count(), 0);
  await assertNowhere(page, "after a reload");
  assert.deepEqual(errors, []);
});

test("web search and team changes are saved and read back after a reload; a bad setting says why", async () => {
  const { page, errors } = browser;
  await show(page, "settings");
  const section = await openSection(page, "web-search");
  const provider = page.getByTestId("web-search-provider");
  const error = page.getByTestId("web-search-error");
  await provider.selectOption("searxng");
  await page.getByTestId("web-search-save").click();
  assert.equal(await error.locator(".error-message").textContent(), "web search: searxng needs base_url, the instance's address (https://searx.example.org)");
  await page.getByTestId("web-search-base-url").fill("searx.example.org");
  await page.getByTestId("web-search-save").click();
  await error.filter({ hasText: "web search: base_url must be an http:// or https:// address, not searx.example.org" }).waitFor();
  await page.getByTestId("web-search-base-url").fill("");
  await provider.selectOption("brave");
  await page.getByTestId("web-search-save").click();
  await error.filter({ hasText: "web search: brave needs its key: put it in the vault and name it in key_secret" }).waitFor();
  // The key is a secret of the vault, chosen by name.
  await page.getByTestId("web-search-key").selectOption("DOCS_TOKEN");
  await page.getByTestId("web-search-save").click();
  await page.getByTestId("web-search-status").filter({ hasText: "Saved: agents search with Brave at https://api.search.brave.com." }).waitFor();
  assert.equal(await error.count(), 0);
  const team = page.getByTestId("team-changes-allow");
  assert.equal(await team.isChecked(), false, "off for a new workspace");
  assert.match(await page.getByTestId("team-changes").textContent(), /Agents marked ‘may change its team’ may add agents/);
  await team.check();
  // Kept: the page API reads both back.
  await page.waitForFunction(async () => {
    const { Kiln } = await import("./kiln.js");
    window.kilnApi ??= await Kiln.load();
    const settings = (await window.kilnApi.config.get()).settings;
    return settings.allow_team_changes === true && settings.web_search?.provider === "brave";
  });

  await reload(page, "settings");
  await openSection(page, "web-search");
  await page.waitForFunction(() => document.querySelector('[data-testid="web-search-provider"]').value === "brave");
  assert.equal(await page.getByTestId("web-search-key").inputValue(), "DOCS_TOKEN");
  assert.equal(await section.locator("summary").textContent(), "Web search (Brave)");
  await page.waitForFunction(() => document.querySelector('[data-testid="team-changes-allow"]').checked);

  // SearXNG at an address, then off; team changes off again.
  await provider.selectOption("searxng");
  await page.getByTestId("web-search-base-url").fill("https://searx.example.org/");
  await page.getByTestId("web-search-key").selectOption("");
  await page.getByTestId("web-search-save").click();
  await page.getByTestId("web-search-status").filter({ hasText: "Saved: agents search with SearXNG at https://searx.example.org." }).waitFor();
  await page.getByTestId("team-changes-allow").uncheck();
  await reload(page, "settings");
  await openSection(page, "web-search");
  await page.waitForFunction(() => document.querySelector('[data-testid="web-search-provider"]').value === "searxng");
  assert.equal(await page.getByTestId("web-search-base-url").inputValue(), "https://searx.example.org/");
  assert.equal(await page.getByTestId("team-changes-allow").isChecked(), false);
  await provider.selectOption("off");
  await page.getByTestId("web-search-save").click();
  await page.getByTestId("web-search-status").filter({ hasText: "Saved: web search is off." }).waitFor();
  await section.locator("summary").filter({ hasText: "Web search (off)" }).waitFor();
  assert.deepEqual(errors, []);
});

test("an MCP server added in Settings is kept as the default agent's and comes back after a reload", async () => {
  const { page, errors } = browser;
  const api = async (fn, arg) =>
    page.evaluate(
      async ([body, arg]) => {
        const { Kiln } = await import("./kiln.js");
        window.kilnApi ??= await Kiln.load();
        return new Function("kiln", "arg", `return (async () => { ${body} })()`)(window.kilnApi, arg);
      },
      [fn, arg],
    );
  // The default agent's other fields must survive the write.
  await api(`const agent = await kiln.agents.get("default");
    await kiln.agents.put({ ...agent, system_prompt: "kiln-keep-me: answer briefly." });`);
  await show(page, "settings");
  await openSection(page, "mcp-servers");
  await page.getByTestId("mcp-name").fill("Everything");
  await page.getByTestId("mcp-url").fill(everything.url);
  await page.getByTestId("mcp-add").click();
  await page.getByTestId("mcp-status").filter({ hasText: "The server name Everything must be 1 to 32 of a-z" }).waitFor();
  await page.getByTestId("mcp-name").fill("everything");
  await page.getByTestId("mcp-add").click();
  await page.getByTestId("mcp-server-everything").waitFor();
  assert.match(await page.getByTestId("mcp-status").textContent(), /everything: mcp-servers\/everything 2\.0\.0 — \d+ tools; kept in this workspace\./);
  const kept = await api(`return await kiln.agents.get("default");`);
  assert.deepEqual(kept.mcp, [{ name: "everything", url: everything.url }]);
  assert.equal(kept.system_prompt, "kiln-keep-me: answer briefly.");

  await reload(page, "settings");
  await openSection(page, "mcp-servers");
  const listed = page.getByTestId("mcp-server-everything");
  await listed.waitFor();
  await listed.getByTestId("mcp-server-tools").filter({ hasText: /— \d+ tools/ }).waitFor();
  await openSection(page, "tool-list");
  assert.match(await page.getByTestId("tool-everything_get_sum").textContent(), /external.*mcp:everything/);
  assert.match(await page.getByTestId("mcp-servers").locator("summary").textContent(), /MCP servers \(1\)/);

  // Removed, it stays removed; the agent's prompt stays.
  await listed.getByRole("button", { name: "Remove everything" }).click();
  await listed.waitFor({ state: "detached" });
  await page.getByTestId("tool-everything_get_sum").waitFor({ state: "detached" });
  await reload(page, "settings");
  await openSection(page, "mcp-servers");
  await page.getByTestId("mcp-status").waitFor({ state: "attached" });
  const after = await api(`return await kiln.agents.get("default");`);
  assert.deepEqual(after.mcp, []);
  assert.equal(after.system_prompt, "kiln-keep-me: answer briefly.");
  assert.equal(await page.getByTestId("mcp-server-everything").count(), 0);
  // The whole spec: no value reached the page from any worker.
  await assertNowhere(page, "at the end");
  assert.deepEqual(errors, []);
});
