// The Agents view and the chat's agent picker, as a person uses them: make an
// agent with a system prompt, an MCP server (the reference server) and a tool
// set to Block, and find it all kept after a reload; duplicate and delete one
// (the default agent cannot be deleted, and says why); a second tab sees a new
// agent appear without a reload; chat with the agent (aimock), whose system
// message starts with the agent's prompt, and find each conversation's agent
// again when it is reopened; the view at a phone's width. Set KILN_SCREENSHOTS
// to a folder to keep pictures of the view (desktop and 390 px wide).
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { addOpenAiProvider, launch, openApp, show } from "../lib/browser.mjs";
import { startAimock, startEverything } from "../lib/servers.mjs";

const AXE = createRequire(import.meta.url).resolve("axe-core/axe.min.js");
const SHOTS = process.env.KILN_SCREENSHOTS;
const PROMPT = "kiln-agent-prompt-marker: you are the docs helper; answer in one line.";

let mock;
let everything;
let browser;
before(async () => {
  mock = await startAimock();
  everything = await startEverything();
  browser = await launch();
  await openApp(browser.page);
});
after(async () => {
  await browser?.close();
  await everything?.stop();
  await mock?.stop();
});

async function screenshot(page, name) {
  if (!SHOTS) return;
  mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: join(SHOTS, `agents-${name}.png`), fullPage: true });
}

/** Shows the Agents view with the navigation, as a person does. */
async function showAgents(page) {
  const panel = page.getByTestId("agents-panel");
  if (!(await panel.isVisible())) await page.getByTestId("nav-agents").click();
  await panel.waitFor();
  // The list is read once storage is open: the default agent is always there.
  await row(page, "default").waitFor();
}

const row = (page, slug) => page.locator(`[data-testid="agent-row"][data-slug="${slug}"]`);
const status = (page) => page.getByTestId("agents-status");

/** Opens the tool table of the form, whichever way it was left. */
async function openTools(page) {
  const list = page.getByTestId("agent-tool-list");
  if (!(await list.evaluate((details) => details.open))) await list.locator("summary").click();
}

/** Fills a new agent's form (New agent pressed) and saves it; resolves once it is listed. */
async function createAgent(page, { name, prompt = "", avatar = "", provider }) {
  await showAgents(page);
  await page.getByTestId("agent-new").click();
  await page.getByTestId("agent-form").waitFor();
  await page.getByTestId("agent-name").fill(name);
  await page.getByTestId("agent-avatar").fill(avatar);
  await page.getByTestId("agent-prompt").fill(prompt);
  if (provider) await page.getByTestId("agent-provider").selectOption(provider);
  const slug = await page.getByTestId("agent-slug").inputValue();
  await page.getByTestId("agent-save").click();
  await row(page, slug).waitFor();
  return slug;
}

async function violations(page) {
  if (!(await page.evaluate(() => typeof window.axe === "object"))) await page.addScriptTag({ path: AXE });
  const found = await page.evaluate(async () => {
    const result = await window.axe.run(document.querySelector('[data-testid="agents-panel"]'), { resultTypes: ["violations"] });
    return result.violations.map((violation) => ({
      id: violation.id,
      impact: violation.impact,
      nodes: violation.nodes.slice(0, 3).map((node) => node.target.join(" ")),
    }));
  });
  return found
    .filter((violation) => violation.impact === "serious" || violation.impact === "critical")
    .map((violation) => `${violation.impact} ${violation.id}: ${violation.nodes.join(", ")}`);
}

test("an agent made in the Agents view keeps its prompt, its MCP server and a blocked tool across a reload", async () => {
  const { page, errors } = browser;
  await showAgents(page);
  // A new workspace has one agent, which cannot be deleted and says why.
  assert.equal(await page.getByTestId("agent-row").count(), 1);
  assert.equal(await row(page, "default").getByTestId("agent-delete").count(), 0);
  assert.match(await row(page, "default").getByTestId("agent-kept").textContent(), /^Cannot be deleted: every workspace has a default agent/);

  await page.getByTestId("agent-new").click();
  // The form takes the focus on its first field.
  await page.waitForFunction(() => document.activeElement?.id === "agent-name");
  await page.keyboard.type("Docs helper");
  // The slug follows the name until it is typed.
  assert.equal(await page.getByTestId("agent-slug").inputValue(), "docs-helper");
  await page.getByTestId("agent-avatar").fill("📚");
  await page.getByTestId("agent-prompt").fill(PROMPT);
  assert.match(await page.locator("#agent-prompt-hint").textContent(), /before Kiln’s own contract.*cannot replace it/);
  await page.getByTestId("agent-role-orchestrator").check();
  assert.equal(await page.getByTestId("agent-team").isChecked(), false, "may change its team is off by default");
  // An MCP server: a name the record refuses is said in the form, nothing is saved.
  await page.getByTestId("agent-server-add").click();
  await page.waitForFunction(() => document.activeElement?.dataset.testid === "agent-server-name");
  await page.getByTestId("agent-server-name").fill("Everything");
  await page.getByTestId("agent-server-url").fill(everything.url);
  // Each tool's setting: return_result cannot be blocked, with the reason on its row.
  await openTools(page);
  const unblockable = page.getByTestId("agent-tool-return_result");
  assert.equal(await unblockable.locator('option[value="block"]').isDisabled(), true);
  assert.match(await unblockable.getByTestId("agent-unblockable").textContent(), /^return_result cannot be blocked: it is how a job reports/);
  await page.getByTestId("agent-setting-file_write").selectOption("block");
  await page.getByTestId("agent-save").click();
  const refused = page.getByTestId("agent-form-error");
  await refused.waitFor();
  assert.equal(await refused.getAttribute("role"), "alert");
  assert.match(await refused.textContent(), /agent docs-helper: mcp: server name Everything must be 1 to 32 of a-z/);
  assert.equal(await row(page, "docs-helper").count(), 0);
  await page.getByTestId("agent-server-name").fill("everything");
  await page.getByTestId("agent-save").click();
  await row(page, "docs-helper").waitFor();
  assert.equal((await status(page).textContent()).trim(), "Saved Docs helper (docs-helper).");
  assert.equal(await status(page).getAttribute("aria-live"), "polite");
  assert.equal(await page.getByTestId("agent-form").count(), 0);
  const saved = row(page, "docs-helper");
  assert.equal(await saved.getByTestId("agent-row-name").textContent(), "Docs helper");
  assert.equal(await saved.getByTestId("agent-row-meta").textContent(), "Orchestrator · the chat’s provider and model · 1 MCP server");

  // After a reload, the form shows it all again.
  await page.reload();
  await showAgents(page);
  await row(page, "docs-helper").getByTestId("agent-edit").click();
  await page.getByTestId("agent-form").waitFor();
  assert.equal(await page.locator("#agent-form-title").textContent(), "Edit Docs helper");
  assert.equal(await page.getByTestId("agent-name").inputValue(), "Docs helper");
  assert.equal(await page.getByTestId("agent-slug").inputValue(), "docs-helper");
  assert.equal(await page.getByTestId("agent-slug").getAttribute("readonly"), "", "a saved agent's slug is fixed");
  assert.equal(await page.getByTestId("agent-avatar").inputValue(), "📚");
  assert.equal(await page.getByTestId("agent-prompt").inputValue(), PROMPT);
  assert.equal(await page.getByTestId("agent-role-orchestrator").isChecked(), true);
  assert.equal(await page.getByTestId("agent-team").isChecked(), false);
  assert.equal(await page.getByTestId("agent-server").count(), 1);
  assert.equal(await page.getByTestId("agent-server-name").inputValue(), "everything");
  assert.equal(await page.getByTestId("agent-server-url").inputValue(), everything.url);
  await openTools(page);
  assert.equal(await page.getByTestId("agent-setting-file_write").inputValue(), "block");
  assert.equal(await page.getByTestId("agent-setting-echo").inputValue(), "");
  assert.match(await page.getByTestId("agent-tool-list").locator("summary").textContent(), /, 1 set here\)$/);
  assert.deepEqual(await violations(page), [], "the Agents view with its form open");
  await screenshot(page, "form");
  // Escape leaves the form as it was, and the focus goes back to New agent.
  await page.getByTestId("agent-prompt").press("Escape");
  await page.getByTestId("agent-form").waitFor({ state: "detached" });
  await page.waitForFunction(() => document.activeElement?.id === "agent-new");
  assert.deepEqual(errors, []);
});

test("duplicate names a copy with a free slug; delete has Undo; a stale edit is read again", async () => {
  const { page, errors } = browser;
  await showAgents(page);
  await row(page, "docs-helper").getByTestId("agent-duplicate").click();
  await row(page, "docs-helper-copy").waitFor();
  assert.equal((await status(page).textContent()).trim(), "Duplicated Docs helper as Docs helper (copy) (docs-helper-copy).");
  await row(page, "docs-helper").getByTestId("agent-duplicate").click();
  await row(page, "docs-helper-copy-2").waitFor();
  assert.equal(await row(page, "docs-helper-copy-2").getByTestId("agent-row-name").textContent(), "Docs helper (copy)");
  // The copy has everything the original has.
  await row(page, "docs-helper-copy-2").getByTestId("agent-edit").click();
  assert.equal(await page.getByTestId("agent-prompt").inputValue(), PROMPT);
  assert.equal(await page.getByTestId("agent-server-url").inputValue(), everything.url);
  await page.getByTestId("agent-cancel").click();

  // Delete, Undo, delete again.
  await row(page, "docs-helper-copy-2").getByTestId("agent-delete").click();
  await row(page, "docs-helper-copy-2").waitFor({ state: "detached" });
  assert.match(await status(page).textContent(), /^Deleted Docs helper \(copy\) \(docs-helper-copy-2\)\./);
  await page.waitForFunction(() => document.activeElement?.dataset.testid === "agent-undo");
  await page.getByTestId("agent-undo").click();
  await row(page, "docs-helper-copy-2").waitFor();
  await row(page, "docs-helper-copy-2").getByTestId("agent-delete").click();
  await row(page, "docs-helper-copy-2").waitFor({ state: "detached" });
  // The page API agrees; and it refuses to remove the default agent.
  const kept = await page.evaluate(async () => {
    const { Kiln } = await import(new URL("kiln.js", location.href).href);
    const kiln = await Kiln.load({ poolSize: 1 });
    let refused;
    try {
      await kiln.agents.remove("default", 0);
    } catch (error) {
      refused = error.message;
    }
    return { slugs: (await kiln.agents.list()).map((agent) => agent.slug), refused };
  });
  assert.deepEqual(kept.slugs, ["default", "docs-helper", "docs-helper-copy"]);
  assert.match(kept.refused, /the `default` agent cannot be removed/);

  // An edit of a version another writer changed meanwhile: not saved, the form reads it again.
  await row(page, "docs-helper-copy").getByTestId("agent-edit").click();
  await page.getByTestId("agent-name").fill("My edit");
  await page.evaluate(async () => {
    const { Kiln } = await import(new URL("kiln.js", location.href).href);
    const kiln = await Kiln.load({ poolSize: 1 });
    const agent = await kiln.agents.get("docs-helper-copy");
    await kiln.agents.put({ ...agent, name: "Changed elsewhere" });
  });
  await page.getByTestId("agent-save").click();
  await page.getByTestId("agent-form-error").filter({ hasText: "was changed in another tab" }).waitFor();
  assert.equal(await page.getByTestId("agent-name").inputValue(), "Changed elsewhere");
  // Saving again now writes at the version read.
  await page.getByTestId("agent-name").fill("Docs helper copy");
  await page.getByTestId("agent-save").click();
  await page.getByTestId("agent-form").waitFor({ state: "detached" });
  await row(page, "docs-helper-copy").filter({ hasText: "Docs helper copy" }).waitFor();
  assert.deepEqual(errors, []);
});

test("a second tab sees a new agent appear, in the view and in the chat's picker, without a reload", async () => {
  const { page, context, errors } = browser;
  const second = await context.newPage();
  try {
    await second.goto(`${new URL(page.url()).origin}/#/agents`);
    await showAgents(second);
    assert.equal(await row(second, "second-tab").count(), 0);
    await createAgent(page, { name: "Second tab", avatar: "ST" });
    await row(second, "second-tab").waitFor();
    assert.equal(await row(second, "second-tab").locator(".agent-badge").textContent(), "ST");
    await second.getByTestId("nav-chat").click();
    await second.getByTestId("chat-agent").locator('option[value="second-tab"]').waitFor({ state: "attached" });
    assert.equal(await second.getByTestId("chat-agent").locator('option[value="second-tab"]').textContent(), "ST Second tab");
    // Deleted here, it leaves the other tab's picker too.
    await showAgents(page);
    await row(page, "second-tab").getByTestId("agent-delete").click();
    await second.getByTestId("chat-agent").locator('option[value="second-tab"]').waitFor({ state: "detached" });
  } finally {
    await second.close();
  }
  assert.deepEqual(errors, []);
});

test("the chat's picker sends the turn to the chosen agent: its prompt comes first, and each conversation keeps its agent", async () => {
  const { page, errors } = browser;
  await addOpenAiProvider(page, { name: "aimock", baseUrl: `${mock.url}/v1`, key: "sk-agents-test-1", model: "gpt-4o-mini" });
  await addOpenAiProvider(page, { name: "aimock two", baseUrl: `${mock.url}/v1`, key: "sk-agents-test-2", model: "gpt-4o-mini" });
  // An agent with its own provider: its replies are headed with it.
  const own = await createAgent(page, { name: "Own provider", provider: "aimock two" });
  assert.match(await row(page, own).getByTestId("agent-row-meta").textContent(), /aimock two, its saved model/);

  await show(page, "chat");
  await page.getByTestId("thread-new").click();
  await page.getByTestId("chat-welcome").waitFor();
  await page.getByTestId("chat-provider").selectOption("aimock");
  const picker = page.getByTestId("chat-agent");
  assert.equal(await picker.inputValue(), "default");
  assert.equal(await picker.locator('option[value="docs-helper"]').textContent(), "📚 Docs helper");
  await picker.selectOption("docs-helper");

  const replies = page.getByTestId("chat-assistant");
  const send = async (text) => {
    const before = await replies.count();
    await page.getByTestId("chat-input").fill(text);
    await page.getByTestId("chat-input").press("Enter");
    const reply = replies.nth(before);
    await reply.getByTestId("chat-end").waitFor();
    return reply;
  };
  const reply = await send("kiln-hello");
  assert.equal(await reply.getByTestId("chat-reply-text").last().textContent(), "Hello from the mock.");
  const sent = (await mock.journal()).at(-1);
  assert.equal(sent.path, "/v1/chat/completions");
  const system = sent.body.messages[0];
  assert.equal(system.role, "system");
  assert.ok(system.content.startsWith(PROMPT), `the system message starts with the agent's prompt: ${system.content.slice(0, 200)}`);
  assert.ok(system.content.indexOf("execute_code") > PROMPT.length, "Kiln's contract comes after the prompt");
  const docsThread = new URL(page.url()).hash.slice("#/chat/".length);

  // A new conversation with the default agent: no prompt of the agent's.
  await page.getByTestId("chat-clear").click();
  await page.getByTestId("chat-welcome").waitFor();
  assert.equal(await picker.inputValue(), "docs-helper", "a new conversation takes the agent last picked in this tab");
  await picker.selectOption("default");
  await send("kiln-hello");
  const plain = (await mock.journal()).at(-1).body.messages[0].content;
  assert.ok(!plain.includes("kiln-agent-prompt-marker"), plain.slice(0, 200));
  const defaultThread = new URL(page.url()).hash.slice("#/chat/".length);

  // Each kept conversation comes back with its own agent.
  const open = async (id) => {
    await page.locator(`[data-testid="thread"][data-thread="${id}"]`).getByTestId("thread-link").click();
    await page.waitForFunction((id) => location.hash === `#/chat/${id}` && document.querySelector('[data-testid="chat-opening"]') === null, id);
  };
  await open(docsThread);
  await page.waitForFunction(() => document.querySelector('[data-testid="chat-agent"]').value === "docs-helper");
  await open(defaultThread);
  await page.waitForFunction(() => document.querySelector('[data-testid="chat-agent"]').value === "default");

  // The agent with its own provider: the reply is headed with it, not the chat's.
  await page.getByTestId("chat-clear").click();
  await page.getByTestId("chat-welcome").waitFor();
  await picker.selectOption(own);
  assert.equal(await page.getByTestId("chat-agent-model").textContent(), "uses aimock two");
  const headed = await send("kiln-hello");
  assert.equal(await headed.locator(".who").textContent(), "aimock two");
  assert.equal((await mock.journal()).at(-1).headers.authorization, "[REDACTED]");
  assert.deepEqual(errors, []);
});

test("at a phone's width the Agents view and its form fit the screen", async () => {
  const { page } = browser;
  const size = page.viewportSize();
  await page.setViewportSize({ width: 390, height: 844 });
  try {
    await showAgents(page);
    await screenshot(page, "list-390");
    await row(page, "docs-helper").getByTestId("agent-edit").click();
    await page.getByTestId("agent-form").waitFor();
    await openTools(page);
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(width <= 390, `the Agents view is ${width} px wide at 390`);
    await page.getByTestId("agent-form").scrollIntoViewIfNeeded();
    await screenshot(page, "form-390");
    await page.getByTestId("agent-cancel").click();
    await show(page, "chat");
    const chatWidth = await page.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(chatWidth <= 390, `the chat with its agent picker is ${chatWidth} px wide at 390`);
    if (SHOTS) await page.screenshot({ path: join(SHOTS, "agents-chat-390.png") });
  } finally {
    await page.setViewportSize(size);
  }
});
