// The Providers panel (in Settings) and the Chat, as a person uses them: add a provider
// of each kind (against aimock), test its connection, chat with streamed
// replies, stop a reply, read an error with its hint, find the providers again
// after a reload; the chat is the agent: the model writes a program that calls
// the app's tool, the person approves it in the thread, watches its action
// block and the caps line, answers the agent's question, stops an action; and
// a newcomer chats with the local model (SmolLM2-135M) that `cargo xtask
// serve` announces in local-provider.json, with nothing to configure.
import assert from "node:assert/strict";
import http from "node:http";
import { after, before, test } from "node:test";
import { APP_URL, launch, openApp, show } from "../lib/browser.mjs";
import { freePort, startAimock, startLocalModel } from "../lib/servers.mjs";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

/** With KILN_SCREENSHOTS set, the page (or one element) as it is, into that folder, to look at. */
async function shot(target, name) {
  const folder = process.env.KILN_SCREENSHOTS;
  if (!folder) return;
  mkdirSync(folder, { recursive: true });
  await target.screenshot({ path: join(folder, `${name}.png`) });
}

/**
 * Serves the app at KILN_URL with `files` beside it: a path mapped to text is
 * answered with it, one mapped to null is a 404 (as when `cargo xtask serve`
 * started no local model); everything else comes from KILN_URL. The shared
 * pkg/ is not touched.
 */
async function serveApp(files) {
  const server = http.createServer(async (request, response) => {
    const path = new URL(request.url, "http://x").pathname.replace(/^\/+/, "");
    if (Object.hasOwn(files, path)) {
      if (files[path] === null) response.writeHead(404).end();
      else response.writeHead(200, { "content-type": "application/json", "cache-control": "no-cache" }).end(files[path]);
      return;
    }
    try {
      const upstream = await fetch(new URL(request.url.replace(/^\/+/, ""), APP_URL));
      response.writeHead(upstream.status, { "content-type": upstream.headers.get("content-type") ?? "application/octet-stream" });
      response.end(Buffer.from(await upstream.arrayBuffer()));
    } catch (error) {
      response.writeHead(502).end(String(error));
    }
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}/`,
    stop() {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(resolve));
    },
  };
}

let mock;
let site;
let browser;
before(async () => {
  mock = await startAimock();
  site = await serveApp({ "local-provider.json": null });
  browser = await launch();
  await openApp(browser.page, { url: site.url });
});
after(async () => {
  await browser?.close();
  await site?.stop();
  await mock?.stop();
});

/** Shows Settings with its Providers panel open. */
async function openProviders(page) {
  await show(page, "settings");
  const panel = page.getByTestId("providers");
  if (!(await panel.evaluate((details) => details.open))) await panel.locator("summary").click();
}

const status = (page) => page.getByTestId("provider-status");

/** Fills the provider form and presses Test connection; resolves to the status text. */
async function fillAndTest(page, { name, kind, baseUrl, key }) {
  await openProviders(page);
  await page.getByTestId("provider-name").fill(name);
  await page.getByTestId("provider-kind").selectOption(kind);
  await page.getByTestId("provider-base-url").fill(baseUrl);
  await page.getByTestId("provider-key").fill(key ?? "");
  await page.getByTestId("provider-test").click();
  await page.locator('[data-testid="provider-status"] :is(.ok, .failure)').waitFor();
  return (await status(page).textContent()).trim();
}

/** Adds a provider through the panel: Test connection, pick the model from the list, Save. */
async function addProvider(page, provider) {
  const said = await fillAndTest(page, provider);
  assert.equal(said, "Connected: 4 models");
  await page.getByTestId("provider-model").selectOption(provider.model);
  await page.getByTestId("provider-save").click();
  await status(page).filter({ hasText: "Saved" }).waitFor();
  assert.equal(
    (await status(page).textContent()).trim(),
    `Saved ${provider.name} (${provider.label}, model ${provider.model}); the chat uses it now.`,
  );
}

const replies = (page) => page.getByTestId("chat-assistant");

/** "New chat": resolves once the new conversation's welcome is shown. */
async function newChat(page) {
  await page.getByTestId("chat-clear").click();
  await page.getByTestId("chat-welcome").waitFor();
  assert.equal(new URL(page.url()).hash, "#/chat");
}

/** The open conversation's id, from the URL (`#/chat/ID`). */
function openThread(page) {
  const id = new URL(page.url()).hash.match(/^#\/chat\/([\w-]+)$/)?.[1];
  assert.ok(id, `no conversation is open at ${page.url()}`);
  return id;
}

/**
 * Back from another view to conversation `id`, as a person does: Chat, then the
 * conversation's row in the list; resolves once its `count` replies are shown again.
 */
async function reopen(page, id, count) {
  await show(page, "chat");
  await page.locator(`[data-testid="thread"][data-thread="${id}"]`).getByTestId("thread-link").click();
  await page.waitForFunction(
    ([id, count]) =>
      location.hash === `#/chat/${id}` &&
      document.querySelector('[data-testid="chat-opening"]') === null &&
      document.querySelectorAll('[data-testid="chat-assistant"]').length === count,
    [id, count],
  );
}

/**
 * Waits until reply `index` shows at least `length` characters of text (a streaming
 * reply's text is drawn again as it grows, so no element of it is held).
 */
async function textReaches(page, index, length, options) {
  await page.waitForFunction(
    ([index, length]) => {
      const reply = document.querySelectorAll('[data-testid="chat-assistant"]')[index];
      return (reply?.querySelector('[data-testid="chat-reply-text"]')?.textContent.length ?? 0) >= length;
    },
    [index, length],
    options,
  );
}

/** Sends `text` with Enter; resolves to the new reply's locator once its turn has ended. */
async function send(page, text, { waitForEnd = true } = {}) {
  const before = await replies(page).count();
  await page.getByTestId("chat-input").fill(text);
  await page.getByTestId("chat-input").press("Enter");
  const reply = replies(page).nth(before);
  await reply.waitFor();
  if (waitForEnd) await page.getByTestId("chat-send").and(page.locator(":enabled")).waitFor();
  return reply;
}

async function replyParts(reply) {
  const text = await reply.getByTestId("chat-reply-text").last().textContent();
  const end = reply.getByTestId("chat-end");
  if ((await end.count()) === 0) return { text };
  return {
    text,
    stop: await reply.getByTestId("chat-stop-reason").textContent(),
    usage: await reply.getByTestId("chat-usage").textContent(),
  };
}

/** The messages of a request after Kiln's system prompt. */
const conversation = (messages) => messages.filter((message) => message.role !== "system");

const OPENAI = { name: "aimock OpenAI", kind: "openai", label: "OpenAI-compatible", key: "sk-test-openai-1234", model: "gpt-4o-mini" };
const ANTHROPIC = { name: "aimock Anthropic", kind: "anthropic", label: "Anthropic", key: "sk-ant-test-5678", model: "claude-sonnet-4-5" };
const OLLAMA = { name: "aimock Ollama", kind: "ollama", label: "Ollama", model: "llama3.2" };

test("with no provider and no local model, the chat uses the in-browser model, and a provider can be added", async () => {
  const { page } = browser;
  const provider = page.getByTestId("chat-provider");
  await provider.locator("option").first().waitFor({ state: "attached" });
  assert.equal(await provider.inputValue(), "In-browser SmolLM2 (135M)");
  assert.equal(await page.getByTestId("chat-send").isDisabled(), false);
  assert.equal((await page.getByTestId("providers").locator("summary").textContent()).trim(), "Providers (1)");
  // A provider that is not there: the error and its hint, and the model is typed instead.
  const said = await fillAndTest(page, { name: "down", kind: "openai", baseUrl: `http://127.0.0.1:${await freePort()}/v1` });
  assert.match(said, /^OpenAI-compatible at http:\/\/127\.0\.0\.1:\d+\/v1\/models: cannot reach it: .*hint: check the base URL and that the server is up/);
  assert.equal(await page.getByTestId("provider-model").evaluate((field) => field.tagName), "INPUT");
  // Saving without a model asks for the list, fails the same way, and saves nothing.
  await page.getByTestId("provider-save").click();
  await status(page).filter({ hasText: "nothing was saved" }).waitFor();
  assert.equal(await page.getByTestId("provider-item").count(), 0);
});

test("OpenAI-compatible: added through the panel, tested, and a reply streams with its usage", async () => {
  const { page, errors } = browser;
  await addProvider(page, { ...OPENAI, baseUrl: `${mock.url}/v1` });
  const item = page.locator(`[data-testid="provider-item"][data-name="${OPENAI.name}"]`);
  assert.match(await item.textContent(), /aimock OpenAI · OpenAI-compatible · http:\/\/127\.0\.0\.1:\d+\/v1 · model gpt-4o-mini · key set/);
  // The key is never shown back, nor left in the form.
  assert.ok(!(await page.content()).includes(OPENAI.key));
  assert.equal(await page.getByTestId("chat-provider").inputValue(), OPENAI.name);
  // The chat is on the added provider, not the in-browser fallback: Send is
  // offered and the in-browser model's note is not shown.
  assert.equal(await page.getByTestId("chat-send").isEnabled(), true);
  assert.equal(await page.getByTestId("chat-model-note").count(), 0);

  // Send with the button: the focus goes back to the message box.
  await show(page, "chat");
  await page.getByTestId("chat-input").fill("kiln-hello");
  await page.getByTestId("chat-send").click();
  const reply = replies(page).first();
  await reply.getByTestId("chat-end").waitFor();
  assert.equal(await page.evaluate(() => document.activeElement?.id), "chat-input");
  assert.deepEqual(await replyParts(reply), { text: "Hello from the mock.", stop: "Answered", usage: "12 in · 5 out tokens" });
  assert.match(await reply.getByTestId("chat-end").textContent(), /^Answered · 12 in · 5 out tokens · gpt-4o-mini$/);
  assert.match(await reply.getByTestId("chat-caps").textContent(), /^This reply: 1 of its 50 model calls · 17 of 1,500,000 tokens · \$0\.\d{4} of \$2\.00$/);
  assert.equal(await page.getByTestId("chat-user").first().locator(".text").textContent(), "kiln-hello");
  assert.equal(await page.getByTestId("chat-messages").getAttribute("aria-live"), "polite");

  // A follow-up carries the conversation so far.
  const second = await send(page, "kiln-which-model");
  assert.equal((await replyParts(second)).text, "You asked for gpt-4o-mini.");
  const journal = await mock.journal();
  const last = journal.at(-1);
  assert.equal(last.path, "/v1/chat/completions");
  assert.equal(last.headers.authorization, "[REDACTED]", "the key was sent");
  assert.equal(last.body.stream, true);
  // Kiln's contract first (the agent's system prompt), then the conversation.
  assert.equal(last.body.messages[0].role, "system");
  assert.match(last.body.messages[0].content, /execute_code/);
  assert.deepEqual(
    conversation(last.body.messages).map((message) => [message.role, message.content]),
    [["user", "kiln-hello"], ["assistant", "Hello from the mock."], ["user", "kiln-which-model"]],
  );
  // The model is offered execute_code and the direct tools, the app's own among the program's.
  const offered = last.body.tools.map((tool) => tool.function.name);
  assert.ok(offered.includes("execute_code") && offered.includes("ask_user"), offered.join(", "));
  // The conversation is a thread in the workspace's history, found by its words.
  const found = await page.evaluate(async () => {
    const { Kiln } = await import(new URL("kiln.js", location.href).href);
    const kiln = await Kiln.load({ poolSize: 1 });
    return kiln.history.search("Hello from the mock");
  });
  assert.deepEqual([found[0].kind, found[0].title, found[0].excerpt], ["message", "kiln-hello", "Hello from the mock."]);
  assert.deepEqual(errors, []);
});

test("Anthropic and Ollama: the same, each with its own model", async () => {
  const { page, errors } = browser;
  await newChat(page);
  assert.equal(await replies(page).count(), 0);
  await addProvider(page, { ...ANTHROPIC, baseUrl: mock.url });
  assert.equal(await page.getByTestId("chat-provider").inputValue(), ANTHROPIC.name);
  await show(page, "chat");
  assert.deepEqual(await replyParts(await send(page, "kiln-hello")), { text: "Hello from the mock.", stop: "Answered", usage: "12 in · 5 out tokens" });
  assert.equal((await replyParts(await send(page, "kiln-which-model"))).text, "You asked for claude-sonnet-4-5.");
  const anthropic = (await mock.journal()).at(-1);
  assert.equal(anthropic.path, "/v1/messages");
  assert.equal(anthropic.headers["x-api-key"], "[REDACTED]");

  await newChat(page);
  await addProvider(page, { ...OLLAMA, baseUrl: mock.url });
  const item = page.locator(`[data-testid="provider-item"][data-name="${OLLAMA.name}"]`);
  assert.match(await item.textContent(), /· no key/);
  await show(page, "chat");
  // aimock's Ollama counts the prompt itself (Kiln's contract and the tool definitions).
  const ollama = await replyParts(await send(page, "kiln-hello"));
  assert.deepEqual([ollama.text, ollama.stop], ["Hello from the mock.", "Answered"]);
  assert.match(ollama.usage, /^\d+ in · \d+ out tokens$/);
  assert.equal((await replyParts(await send(page, "kiln-which-model"))).text, "You asked for llama3.2.");
  assert.equal((await mock.journal()).at(-1).path, "/api/chat");
  assert.equal((await page.getByTestId("providers").locator("summary").textContent()).trim(), "Providers (4)");
  assert.deepEqual(errors, []);
});

const SLOW_TEXT = "One two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty.";

test("Stop cuts a streaming reply: the partial text stays, marked Stopped", async () => {
  const { page, errors } = browser;
  await newChat(page);
  await page.getByTestId("chat-provider").selectOption(OPENAI.name);
  const reply = await send(page, "kiln-slow", { waitForEnd: false });
  const text = reply.getByTestId("chat-reply-text");
  // A few chunks in (6 characters each, 50 ms apart), press Stop.
  await textReaches(page, (await replies(page).count()) - 1, 12);
  await page.getByTestId("chat-stop").click();
  await reply.getByTestId("chat-end").waitFor();
  const partial = await text.textContent();
  assert.ok(partial.length > 0 && partial.length < SLOW_TEXT.length, partial);
  assert.ok(SLOW_TEXT.startsWith(partial), partial);
  assert.equal(await reply.getByTestId("chat-stop-reason").textContent(), "Stopped");
  assert.match(await reply.getByTestId("chat-end").textContent(), /^Stopped \(the turn was stopped\) · /);
  assert.equal(await page.getByTestId("chat-stop").count(), 0);
  assert.equal(await page.evaluate(() => document.activeElement?.id), "chat-input");
  // The request was cut: nothing more arrives after the full stream's time.
  await page.waitForTimeout(1500);
  assert.equal(await text.textContent(), partial);

  // The partial reply is part of the conversation.
  await send(page, "kiln-hello");
  const messages = conversation((await mock.journal()).at(-1).body.messages);
  assert.deepEqual(messages.map((message) => message.role), ["user", "assistant", "user"]);
  assert.equal(messages[1].content, partial);
  assert.deepEqual(errors, []);
});

test("a rejected key is an error in the conversation, with its hint", async () => {
  const { page, errors } = browser;
  await newChat(page);
  await page.getByTestId("chat-input").fill("kiln-401");
  await page.getByTestId("chat-input").press("Enter");
  const error = page.getByTestId("chat-error");
  await error.waitFor();
  assert.equal(await error.getAttribute("role"), "alert");
  assert.match(
    await error.textContent(),
    /OpenAI-compatible at http:\/\/127\.0\.0\.1:\d+\/v1\/chat\/completions \(model gpt-4o-mini\): the key was rejected \(HTTP 401\): Incorrect API key provided/,
  );
  assert.equal(
    await page.getByTestId("chat-error-hint").textContent(),
    "hint: check the API key of this provider (the Providers panel in the app; --key-env VAR for kiln chat)",
  );
  // A reply that never started is only the error.
  assert.equal(await replies(page).count(), 0);
  assert.equal(await page.getByTestId("chat-user").count(), 1);
  // The failed exchange is not sent again with the next message.
  await send(page, "kiln-hello");
  assert.deepEqual(conversation((await mock.journal()).at(-1).body.messages).map((message) => message.content), ["kiln-hello"]);
  assert.deepEqual(errors, []);
});

const chatCard = (page, testid) => page.getByTestId("chat-cards").getByTestId(testid);

test("the chat is the agent: it writes a program that calls the app's tool, the person approves it in the thread, and it answers", async () => {
  const { page, errors } = browser;
  await newChat(page);
  await page.getByTestId("chat-provider").selectOption(OPENAI.name);
  const reply = await send(page, "kiln-app-sum: add 20 and 30 with the add tool, then double it", { waitForEnd: false });
  // execute_code is an execute tool: in the default mode the person is asked, in the thread.
  const card = chatCard(page, "approval");
  await card.waitFor();
  assert.equal(await card.getByTestId("approval-title").textContent(), "Allow execute_code (call 1)?");
  // The program is shown as code, not as an escaped JSON string.
  assert.match(await card.getByTestId("approval-program").textContent(), /await tools\.add\(\{a: 20, b: 30\}\)/);
  assert.equal(await card.getByTestId("approval-args").count(), 0, "it has no other argument");
  // Beside the thread, the Activity panel shows the action waiting, live.
  const activity = page.getByTestId("activity");
  const nodes = activity.getByTestId("activity-node");
  await nodes.first().and(page.locator('[data-status="running"]')).waitFor();
  assert.match(await activity.getByTestId("activity-summary").textContent(), /^Running · This reply: 1 of its 50 model calls/);
  await page.getByTestId("chat").screenshot({ path: "/tmp/chat-agent-approval.png" });
  await card.getByTestId("approve").click();
  await reply.getByTestId("chat-end").waitFor();
  assert.equal(await chatCard(page, "approval").count(), 0);

  const texts = await reply.getByTestId("chat-reply-text").allTextContents();
  assert.deepEqual(texts, ["I will add them in code.", "Twice the sum is 100."]);
  const action = reply.getByTestId("chat-action");
  assert.equal(await action.count(), 1);
  assert.match(await action.getByTestId("chat-action-summary").textContent(), /^Action 1 · completed · 1 call \(add\) · \d+ ms$/);
  await action.getByTestId("chat-action-summary").click();
  assert.match(await action.getByTestId("chat-action-code").textContent(), /const sum = await tools\.add\(\{a: 20, b: 30\}\);/);
  assert.equal(await action.getByTestId("chat-action-console").textContent(), "sum is 50");
  assert.equal(await action.getByTestId("chat-action-result").textContent(), "100");
  assert.deepEqual(await action.getByTestId("chat-action-calls").locator("tbody td:nth-child(-n+2)").allTextContents(), ["add", "ok"]);
  assert.equal(await reply.getByTestId("chat-stop-reason").textContent(), "Answered");
  assert.match(await reply.getByTestId("chat-caps").textContent(), /^This reply: 2 of its 50 model calls · [\d,]+ of 1,500,000 tokens · \$0\.\d{4} of \$2\.00$/);
  await page.getByTestId("chat").screenshot({ path: "/tmp/chat-agent.png" });

  // The panel now shows the action's tree with its call, and its details: the program,
  // what it printed and returned, and what the model reads of it.
  const tree = () => nodes.evaluateAll((all) => all.map((node) => [node.querySelector(".label").textContent.replace(/\d+ ms/, "N ms"), node.dataset.status]));
  await nodes.first().and(page.locator('[data-status="completed"]')).waitFor();
  assert.deepEqual(await tree(), [["Action 1 · N ms", "completed"], ["add · N ms", "ok"]]);
  assert.match(await activity.getByTestId("activity-summary").textContent(), /^Answered · This reply: 2 of its 50 model calls/);
  assert.equal(await activity.getByTestId("activity-details-title").textContent(), "Action 1");
  assert.match(await activity.getByTestId("activity-code").textContent(), /const sum = await tools\.add/);
  assert.equal(await activity.getByTestId("activity-console").textContent(), "sum is 50");
  assert.equal(await activity.getByTestId("activity-result").textContent(), "100");
  assert.match(await activity.getByTestId("activity-reads").textContent(), /sum is 50/);
  await shot(page, "chat-activity");
  // The observation went back to the model as the call's result.
  const last = (await mock.journal()).at(-1).body.messages;
  const observed = last.find((message) => message.role === "tool");
  assert.match(observed.content, /sum is 50/);
  // The next turn continues from the whole thread: the call and its result included.
  await send(page, "kiln-hello");
  const next = conversation((await mock.journal()).at(-1).body.messages).map((message) => message.role);
  assert.deepEqual(next, ["user", "assistant", "tool", "assistant", "user"]);
  // The panel follows the newest reply, which ran nothing; "Details in Activity" on the
  // earlier action shows that one again, its call picked by a click in the tree.
  await activity.getByTestId("activity-empty").filter({ hasText: "This reply ran nothing" }).waitFor();
  await action.getByTestId("chat-action-inspect").click();
  await activity.getByTestId("activity-details-title").filter({ hasText: "Action 1" }).waitFor();
  await nodes.nth(1).click();
  assert.equal(await nodes.nth(1).getAttribute("aria-current"), "true");
  assert.equal(await activity.getByTestId("activity-details-title").textContent(), "Action 1");

  // At a phone's width the panel is a drawer: the Activity button opens it and takes the
  // focus in; Esc closes it and gives the focus back.
  await page.setViewportSize({ width: 390, height: 844 });
  assert.equal(await activity.isVisible(), false);
  await page.getByTestId("activity-toggle").click();
  await activity.waitFor();
  await page.waitForFunction(() => document.activeElement?.dataset.testid === "activity-close", null, { timeout: 5000 });
  assert.equal(await page.evaluate(() => document.documentElement.scrollWidth), 390, "nothing overflows");
  await shot(page, "chat-activity-390");
  await page.keyboard.press("Escape");
  await activity.waitFor({ state: "hidden" });
  await page.waitForFunction(() => document.activeElement?.dataset.testid === "activity-toggle", null, { timeout: 5000 });
  await page.setViewportSize({ width: 1280, height: 720 });
  assert.deepEqual(errors, []);
});

test("Settings' models and a reply's limits: the next reply stops at the limit set, its caps line counting against it", async () => {
  const { page, errors } = browser;
  await show(page, "settings");
  const section = page.getByTestId("models-limits");
  const said = section.getByTestId("models-limits-status");
  // Kiln's limits at first; the chat model is the chat's own pick.
  assert.equal(await section.getByTestId("limit-turns").inputValue(), "50");
  assert.equal(await section.getByTestId("limit-tokens").inputValue(), "1,500,000");
  assert.equal(await section.getByTestId("limit-usd").inputValue(), "2.00");
  assert.equal(await section.getByTestId("settings-chat-model").inputValue(), await page.getByTestId("chat-provider").inputValue());
  // A value that does not read is said by name, and nothing is kept.
  await section.getByTestId("limit-turns").fill("zero");
  await section.getByTestId("limits-save").click();
  assert.equal(await said.textContent(), "Model calls: zero is not a whole number");
  // The value it quotes is shown as code, not between backticks.
  assert.deepEqual(await said.locator("code").allTextContents(), ["zero"]);
  assert.equal(await section.getByTestId("limits-reset").isVisible(), false);
  await section.getByTestId("limit-turns").fill("1");
  await section.getByTestId("limit-usd").fill("$0.50");
  await section.getByTestId("limits-save").click();
  await said.filter({ hasText: "Saved: each reply may make 1 model calls, use 1,500,000 tokens and spend $0.50." }).waitFor();
  await section.getByTestId("settings-code-model").fill("gpt-4o");
  await section.getByTestId("settings-code-model").press("Enter");
  await said.filter({ hasText: "Code nodes are written with gpt-4o." }).waitFor();
  await shot(section, "settings-limits");

  // The next reply stops after its one model call, saying which limit, and counts against it.
  await show(page, "chat");
  await newChat(page);
  const reply = await send(page, "kiln-app-sum: add 20 and 30 with the add tool, then double it", { waitForEnd: false });
  const end = reply.getByTestId("chat-end");
  while (!(await end.isVisible())) {
    const card = chatCard(page, "approval");
    if (await card.isVisible()) await card.getByTestId("approve").click();
    else await page.waitForTimeout(100);
  }
  assert.equal(await reply.getByTestId("chat-stop-reason").textContent(), "Stopped by a guard (max_turns)");
  assert.match(await reply.getByTestId("chat-caps").textContent(), /^This reply: 1 of its 1 model calls · [\d,]+ of 1,500,000 tokens · \$0\.\d{4} of \$0\.50$/);

  // Back to Kiln's limits and the chat's model for code.
  await show(page, "settings");
  await section.getByTestId("limits-reset").click();
  await said.filter({ hasText: "Kiln's limits again: each reply may make 50 model calls" }).waitFor();
  await page.waitForFunction(() => document.querySelector('[data-testid="limit-turns"]').value === "50");
  await section.getByTestId("settings-code-model").fill("");
  await section.getByTestId("settings-code-model-save").click();
  await said.filter({ hasText: "Code nodes are written with the chat's model." }).waitFor();
  await show(page, "chat");
  // Read back after a reload, under Kiln's limits again, the reply still counts against the ones it ran under.
  await page.reload();
  const reopened = replies(page).first();
  await reopened.getByTestId("chat-end").waitFor();
  assert.match(await reopened.getByTestId("chat-caps").textContent(), /^This reply: 1 of its 1 model calls · [\d,]+ of 1,500,000 tokens · \$0\.\d{4} of \$0\.50$/);
  assert.deepEqual(errors, []);
});

test("a program's progress shows on its running action until its result comes", async () => {
  const { page, errors } = browser;
  await newChat(page);
  const reply = await send(page, "kiln-app-progress", { waitForEnd: false });
  const action = reply.getByTestId("chat-action");
  const summary = action.getByTestId("chat-action-summary");
  // Approved if this session still asks before a program runs.
  const deadline = Date.now() + 30_000;
  while (!/% · /.test((await summary.textContent().catch(() => "")) ?? "")) {
    assert.ok(Date.now() < deadline, "the action never showed its progress");
    const card = chatCard(page, "approval");
    if (await card.isVisible()) await card.getByTestId("approve").click();
    else await page.waitForTimeout(100);
  }
  assert.equal(await summary.textContent(), "Action 1 · running… 60% · reading the rows");
  assert.equal(await action.getByTestId("chat-action-progress").getAttribute("value"), "60");
  await page.getByTestId("chat").screenshot({ path: "/tmp/chat-progress.png" });
  await reply.getByTestId("chat-end").waitFor();
  assert.match(await summary.textContent(), /^Action 1 · completed · no tool calls · \d+ ms$/);
  assert.equal(await action.getByTestId("chat-action-progress").count(), 0);
  assert.equal((await replyParts(reply)).text, "Read them all.");
  assert.deepEqual(errors, []);
});

test("the agent asks the person in the thread, and a Stop mid-action ends the turn and its action", async () => {
  const { page, errors } = browser;
  await newChat(page);
  const reply = await send(page, "kiln-app-ask", { waitForEnd: false });
  const ask = chatCard(page, "chat-ask");
  await ask.waitFor();
  assert.equal(await ask.getByTestId("chat-ask-text").textContent(), "Which colour should the chart be?");
  assert.equal(await page.evaluate(() => document.activeElement?.id), "chat-ask-answer");
  await page.keyboard.type("blue");
  await page.keyboard.press("Enter");
  await reply.getByTestId("chat-end").waitFor();
  assert.equal((await replyParts(reply)).text, "You said blue.");
  assert.equal(await reply.getByTestId("chat-asked").textContent(), "Asked you: Which colour should the chart be?");
  assert.match(await reply.getByTestId("chat-tool-call").textContent(), /^Called ask_user\(.*Which colour.*\) → .*blue/);

  // Allowed for the session, the next action runs without a card; Stop cuts it while it waits.
  await newChat(page);
  const waiting = await send(page, "kiln-app-wait", { waitForEnd: false });
  await chatCard(page, "allow-session").click();
  await waiting.getByTestId("chat-action").waitFor();
  assert.equal(await waiting.getByTestId("chat-action-summary").textContent(), "Action 1 · running…");
  await page.getByTestId("chat-stop").click();
  await waiting.getByTestId("chat-end").waitFor();
  assert.equal(await waiting.getByTestId("chat-stop-reason").textContent(), "Stopped");
  assert.equal(await waiting.getByTestId("chat-action-summary").textContent(), "Action 1 · stopped");
  assert.equal(await waiting.getByTestId("chat-action").getAttribute("data-status"), "cancelled");
  // The cut call is answered in the thread, so the next turn can be sent.
  await send(page, "kiln-hello");
  const roles = conversation((await mock.journal()).at(-1).body.messages).map((message) => message.role);
  assert.deepEqual(roles, ["user", "assistant", "tool", "user"]);
  assert.equal((await replyParts(replies(page).last())).text, "Hello from the mock.");
  await newChat(page);
  assert.deepEqual(errors, []);
});

test("plan mode: the agent makes a plan and it shows before anything runs; once the mode allows it, the approval card shows the plan and its tree runs live", async () => {
  const { page, errors } = browser;
  await show(page, "settings");
  await page.getByTestId("tool-list").locator("summary").click();
  await page.getByTestId("permission-mode").selectOption("plan");
  await page.getByTestId("tool-list").locator("summary").click();
  await show(page, "chat");
  const planned = await send(page, "kiln-plan-report: count the words of two phrases and add them");
  const card = planned.getByTestId("plan-card");
  await card.waitFor();
  assert.equal(await card.locator("h4").textContent(), "Plan: Count the words");
  assert.match(await card.textContent(), /3 tasks, 3 steps, 2 parallelizable · nothing has run yet/);
  assert.deepEqual(
    (await card.getByTestId("plan-card-task").locator("strong").allTextContents()),
    ["Count phrase one", "Count phrase two", "Add the counts"],
  );
  assert.match(await card.getByTestId("plan-card-task").last().textContent(), /after count_a, count_b/);
  assert.match((await replyParts(planned)).text, /^Here is the plan/);
  assert.equal(await planned.getByTestId("plan-tree").count(), 0, "nothing ran");
  await page.getByTestId("chat").screenshot({ path: "/tmp/chat-plan-card.png" });

  // The person changes the mode in Settings, comes back to the conversation and asks
  // to run it: one approval, for the plan.
  const thread = openThread(page);
  await show(page, "settings");
  await page.getByTestId("tool-list").locator("summary").click();
  await page.getByTestId("permission-mode").selectOption("default");
  await page.getByTestId("tool-list").locator("summary").click();
  await reopen(page, thread, 1);
  const ran = await send(page, "kiln-plan-run", { waitForEnd: false });
  const approval = chatCard(page, "approval");
  await approval.waitFor();
  assert.equal(await approval.getByTestId("approval-title").textContent(), "Allow execute_plan (call 1)?");
  assert.equal(await approval.getByTestId("plan-card-task").count(), 3);
  assert.match(await approval.textContent(), /3 tasks, 3 steps; each step is a sub-agent/);
  await page.getByTestId("chat").screenshot({ path: "/tmp/chat-plan-approval.png" });
  await approval.getByTestId("approve").click();
  await ran.getByTestId("chat-end").waitFor();
  assert.equal(await chatCard(page, "approval").count(), 0, "the steps' programs ran under the plan's approval");

  const tree = ran.getByTestId("plan-tree");
  assert.equal(await tree.getAttribute("data-status"), "completed");
  assert.match(await tree.locator(":scope > h4").textContent(), /◆ Plan: Count the words · 3\/3 tasks · completed/);
  assert.deepEqual(
    await tree.getByTestId("plan-task").evaluateAll((tasks) => tasks.map((task) => task.dataset.status)),
    ["completed", "completed", "completed"],
  );
  // A step opens to its result and to what its loop did.
  const total = tree.getByTestId("plan-step").last();
  await total.locator(":scope > summary").click();
  assert.match(await total.getByTestId("plan-step-result").textContent(), /"words": 5/);
  await total.getByTestId("chat-action-summary").click();
  assert.match(await total.getByTestId("chat-action-code").textContent(), /tools\.read_shared\(\{keys: \['task:count_a', 'task:count_b'\]\}\)/);
  assert.equal((await replyParts(ran)).text, "Phrase one has 3 words and phrase two has 2: 5 words in all.");
  await page.getByTestId("chat").screenshot({ path: "/tmp/chat-plan-tree.png" });
  await newChat(page);
  assert.deepEqual(errors, []);
});

test("after a reload the providers are still there (the workspace's storage), by name", async () => {
  const { page, errors } = browser;
  await page.getByTestId("chat-provider").selectOption(ANTHROPIC.name);
  await page.reload();
  await page.getByTestId("chat").waitFor();
  await openProviders(page);
  const names = await page.getByTestId("provider-item").evaluateAll((items) => items.map((item) => item.dataset.name));
  // Kept in the configuration (IndexedDB), listed by name.
  assert.deepEqual(names, [ANTHROPIC.name, OLLAMA.name, OPENAI.name]);
  const keys = await page.getByTestId("provider-key-state").allTextContents();
  assert.deepEqual(keys, ["key set", "no key", "key set"]);
  assert.equal(await page.getByTestId("chat-provider").inputValue(), ANTHROPIC.name);
  await show(page, "chat");
  assert.equal((await replyParts(await send(page, "kiln-which-model"))).text, "You asked for claude-sonnet-4-5.");

  // Editing keeps the key unless a new one is typed.
  const thread = openThread(page);
  await show(page, "settings");
  await page.getByRole("button", { name: `Edit ${ANTHROPIC.name}` }).click();
  assert.equal(await page.getByTestId("provider-name").inputValue(), ANTHROPIC.name);
  assert.equal(await page.getByTestId("provider-key").inputValue(), "");
  assert.equal(await page.getByTestId("provider-form-key-state").textContent(), "key set (leave empty to keep it)");
  // The saved key goes only to the address it was saved for.
  const savedUrl = await page.getByTestId("provider-base-url").inputValue();
  await page.getByTestId("provider-base-url").fill("http://192.0.2.1:11434");
  assert.equal(
    await page.getByTestId("provider-form-key-state").textContent(),
    "the saved key is not sent to this kind or address: type it again",
  );
  await page.getByTestId("provider-base-url").fill(savedUrl);
  assert.equal(await page.getByTestId("provider-form-key-state").textContent(), "key set (leave empty to keep it)");
  await page.getByTestId("provider-model").fill("claude-sonnet-4-5-20250929");
  await page.getByTestId("provider-save").click();
  await status(page).filter({ hasText: "Saved" }).waitFor();
  const item = page.locator(`[data-testid="provider-item"][data-name="${ANTHROPIC.name}"]`);
  assert.match(await item.textContent(), /model claude-sonnet-4-5-20250929 · key set/);
  // aimock matches the model id as a prefix followed by a dated suffix.
  await reopen(page, thread, 1);
  assert.equal((await replyParts(await send(page, "kiln-which-model"))).text, "You asked for claude-sonnet-4-5.");

  // Nothing is kept in localStorage any more (an earlier Kiln's list is imported once:
  // storage-ui.spec.mjs).
  assert.equal(await page.evaluate(() => localStorage.getItem("kiln.providers.v1")), null);
  assert.deepEqual(errors, []);
});

test("a newcomer chats with the local model that local-provider.json announces, configuring nothing", async () => {
  const model = await startLocalModel();
  const local = await serveApp({
    "local-provider.json": JSON.stringify({ name: "Local SmolLM2 (135M)", kind: "openai", base_url: `${model.url}/v1`, model: model.model }),
  });
  const newcomer = await launch();
  try {
    const { page, errors } = newcomer;
    await page.setViewportSize({ width: 1100, height: 900 });
    await openApp(page, { url: local.url });
    await page.getByTestId("chat-provider").locator("option").first().waitFor({ state: "attached" });
    assert.equal(await page.getByTestId("chat-provider").inputValue(), "Local SmolLM2 (135M)");
    assert.equal(await page.getByTestId("chat-send").isEnabled(), true);
    assert.equal(await page.getByTestId("chat-model-note").count(), 0, "the announced local model, not the in-browser one, is the chat's");
    await openProviders(page);
    assert.match(await page.getByTestId("provider-item").textContent(), /Local SmolLM2 \(135M\) · OpenAI-compatible · .* · model smollm2-135m-instruct · no key from cargo xtask serve, read at each load/);
    assert.equal(await page.getByTestId("provider-edit").count(), 0, "the local model is not edited");
    await page.getByTestId("providers").locator("summary").click();

    await show(page, "chat");
    const reply = await send(page, "Say hi", { waitForEnd: false });
    // A small model may write code: each action it asks to run is approved, until the turn ends.
    const deadline = Date.now() + 240_000;
    while ((await reply.getByTestId("chat-end").count()) === 0) {
      assert.ok(Date.now() < deadline, "the local model's turn did not end in 4 minutes");
      const approve = page.getByTestId("chat-cards").getByTestId("approve");
      if (await approve.count()) await approve.click();
      else await page.waitForTimeout(200);
    }
    // It ends by an answer or by a guard, never hanging; either way the line says how.
    const stop = await reply.getByTestId("chat-stop-reason").textContent();
    assert.match(stop, /^(Answered|Stopped by a guard \(\w+\))$/);
    if (stop === "Answered") assert.ok((await replyParts(reply)).text.trim().length > 0);
    assert.match(await reply.getByTestId("chat-usage").textContent(), /^\d+ in · \d+ out tokens$/);
    assert.equal(await page.evaluate(() => localStorage.getItem("kiln.providers.v1")), null, "the local model is not stored");
    await page.getByTestId("chat").screenshot({ path: "/tmp/chat.png" });
    assert.deepEqual(errors, []);
  } finally {
    await newcomer.close();
    await local.stop();
    await model.stop();
  }
});
