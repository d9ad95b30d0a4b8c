// Conversations that last, as a person keeps them (against aimock, on the
// built app from a plain static server): an agent turn with an approved action
// survives a reload step for step and the next message continues it; the list
// starts, renames, pins, searches and deletes (with Undo) conversations, and a
// second tab sees it change; a reply in Markdown is drawn sanitized; editing a
// message forks the conversation and Regenerate asks for the last reply again.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { addOpenAiProvider, APP_URL, launch, openApp, show } from "../lib/browser.mjs";
import { startAimock } from "../lib/servers.mjs";

let mock;
let browser;
before(async () => {
  mock = await startAimock();
  browser = await launch();
  const { page } = browser;
  await openApp(page);
  // The OpenAI-compatible mock, added as a person does (Settings → Providers).
  await addOpenAiProvider(page, { name: "mock", baseUrl: `${mock.url}/v1`, key: "sk-threads-test", model: "gpt-4o-mini" });
});
after(async () => {
  await browser?.close();
  await mock?.stop();
});

const replies = (page) => page.getByTestId("chat-assistant");
const threadRows = (page) => page.getByTestId("thread");

/** The open conversation's id, from the URL (`#/chat/ID`). */
function openId(page) {
  const id = new URL(page.url()).hash.match(/^#\/chat\/([\w-]+)$/)?.[1];
  assert.ok(id, `no conversation is open at ${page.url()}`);
  return id;
}

/** Starts a new conversation from the list. */
async function newChat(page) {
  await show(page, "chat");
  await page.getByTestId("thread-new").click();
  await page.getByTestId("chat-welcome").waitFor();
}

/** Sends `text` and waits for its reply's end line (the `n`th reply of the conversation). */
async function send(page, text, n) {
  await page.getByTestId("chat-input").fill(text);
  await page.getByTestId("chat-input").press("Enter");
  await replies(page).nth(n).getByTestId("chat-end").waitFor({ timeout: 30_000 });
}

/** The conversation as shown: who said what, action blocks and end lines, in order. */
async function transcript(page) {
  return page.getByTestId("chat-messages").evaluate((list) =>
    [...list.children].filter((item) => item.dataset.testid).map((item) => ({
      who: item.dataset.testid,
      text: item.querySelector(".text, .markdown")?.textContent?.trim() ?? "",
      actions: [...item.querySelectorAll('[data-testid="chat-action-code"]')].map((code) => code.textContent),
      end: item.querySelector('[data-testid="chat-stop-reason"]')?.textContent ?? null,
    })),
  );
}

test("a conversation survives a reload step for step, and the next message continues it", async () => {
  const { page } = browser;
  await newChat(page);
  await page.getByTestId("chat-input").fill("kiln-app-sum");
  await page.getByTestId("chat-input").press("Enter");
  // The program calls the page's `add`: approved in the thread.
  const card = page.getByTestId("chat-cards").getByTestId("approval");
  await card.getByTestId("approve").click();
  await replies(page).first().getByTestId("chat-end").waitFor({ timeout: 30_000 });
  const id = openId(page);
  const before = await transcript(page);
  assert.equal(before.length, 2);
  assert.match(before[1].actions[0] ?? "", /tools\.add/);
  assert.equal(before[1].end, "Answered");
  // The list has it, titled by the first message.
  const row = page.locator(`[data-testid="thread"][data-thread="${id}"]`);
  assert.equal((await row.getByTestId("thread-link").textContent()).trim(), "kiln-app-sum");
  assert.equal(await row.getByTestId("thread-link").getAttribute("aria-current"), "page");

  await page.reload();
  await replies(page).first().getByTestId("chat-end").waitFor();
  assert.equal(openId(page), id, "the same conversation is open after the reload");
  assert.deepEqual(await transcript(page), before, "its steps are shown as they were");

  // The next message continues it: the model is sent the earlier exchange.
  const sent = (await mock.journal()).length;
  await send(page, "kiln-which-model", 1);
  assert.equal((await replies(page).nth(1).getByTestId("chat-reply-text").textContent()).trim(), "You asked for gpt-4o-mini.");
  const request = (await mock.journal()).slice(sent).at(-1).body;
  const said = JSON.stringify(request.messages);
  assert.ok(said.includes("kiln-app-sum") && said.includes("sum is 50"), `the earlier turn was sent: ${said}`);

  // History's row of the turn opens its conversation.
  await show(page, "history");
  const link = page.getByTestId("history-item").first().getByTestId("history-open-thread");
  assert.equal(await link.getAttribute("href"), `#/chat/${id}`);
  await show(page, "chat");

  // Another view and back: the navigation's Chat returns to this conversation.
  await show(page, "settings");
  await page.getByTestId("nav-chat").click();
  await page.waitForFunction((id) => location.hash === `#/chat/${id}`, id);
  await replies(page).nth(1).getByTestId("chat-end").waitFor();

  // A bare visit (no fragment) opens the conversation this browser had open last.
  await page.goto(APP_URL);
  await replies(page).nth(1).getByTestId("chat-end").waitFor();
  assert.equal(openId(page), id);
});

test("the list starts, renames, pins, finds and deletes conversations, and another tab follows", async () => {
  const { page } = browser;
  await newChat(page);
  await send(page, "kiln-hello", 0);
  const hello = openId(page);
  await threadRows(page).first().waitFor();
  assert.equal(await threadRows(page).first().getAttribute("data-thread"), hello, "newest first");

  // A second tab of the same browser sees the list and its changes live.
  const other = await browser.context.newPage();
  await openApp(other, { view: "chat" });
  await other.locator(`[data-testid="thread"][data-thread="${hello}"]`).waitFor();

  // Rename.
  const row = page.locator(`[data-testid="thread"][data-thread="${hello}"]`);
  await row.hover();
  await row.getByTestId("thread-rename").click();
  await page.getByTestId("thread-rename-input").fill("Greetings");
  await page.getByTestId("thread-rename-input").press("Enter");
  await row.getByTestId("thread-link").filter({ hasText: "Greetings" }).waitFor();
  await other.locator(`[data-testid="thread"][data-thread="${hello}"]`).getByTestId("thread-link").filter({ hasText: "Greetings" }).waitFor();

  // Pin: it goes under "Pinned", first.
  await row.getByTestId("thread-pin").click();
  await page.locator(".threads-group", { hasText: "Pinned" }).waitFor();
  await page.waitForFunction((id) => document.querySelector('[data-testid="thread"]')?.dataset.thread === id, hello);

  // Search finds what was said, not only titles.
  await page.getByTestId("thread-search").fill("mock");
  await page.waitForFunction(
    (id) => [...document.querySelectorAll('[data-testid="thread"]')].map((row) => row.dataset.thread).join() === id,
    hello,
  );
  await page.getByTestId("thread-search").fill("");

  // Delete, then Undo: it comes back (and, being open, opens again).
  await row.getByTestId("thread-delete").click();
  await page.getByTestId("thread-undo").waitFor();
  await row.waitFor({ state: "detached" });
  await other.locator(`[data-testid="thread"][data-thread="${hello}"]`).waitFor({ state: "detached" });
  assert.equal(new URL(page.url()).hash, "#/chat", "the deleted conversation is no longer open");
  await page.getByTestId("thread-undo-button").click();
  await row.waitFor();
  await page.waitForFunction((id) => location.hash === `#/chat/${id}`, hello);
  await replies(page).first().getByTestId("chat-end").waitFor();
  await other.locator(`[data-testid="thread"][data-thread="${hello}"]`).waitFor();
  await other.close();
});

test("a reply in Markdown is drawn, with nothing of the model's HTML, scripts, hostile links or images", async () => {
  const { page } = browser;
  await newChat(page);
  await send(page, "kiln-markdown", 0);
  const reply = replies(page).first().getByTestId("chat-reply-text");
  // The model's `##` sits under the page's own headings: an h4.
  assert.equal((await reply.locator("h4").textContent()).trim(), "Your answer");
  assert.equal(await reply.locator("strong").textContent(), "bold");
  assert.equal((await reply.locator(".code-block-language").textContent()).trim(), "js");
  assert.match(await reply.locator("pre code").textContent(), /const answer = 6 \* 7;/);
  assert.equal(await reply.getByTestId("md-copy").count(), 1);
  assert.equal(await reply.locator("table th").count(), 2);
  const links = await reply.locator("a").evaluateAll((anchors) =>
    anchors.map((a) => ({ text: a.textContent, href: a.getAttribute("href"), rel: a.rel, target: a.target })),
  );
  assert.deepEqual(
    links.filter((link) => link.text === "safe link"),
    [{ text: "safe link", href: "https://example.com/docs", rel: "noopener noreferrer", target: "_blank" }],
  );
  assert.ok(links.every((link) => !/^\s*javascript:/i.test(link.href ?? "")), JSON.stringify(links));
  assert.equal(await reply.locator("img, script, iframe").count(), 0, "no element from the model's HTML");
  // The image is not loaded: it is a link the person may follow, named as an image.
  assert.equal((await reply.locator("a.md-image").textContent()).trim(), "image: tracking pixel");
  assert.match(await reply.textContent(), /<img src=x onerror=/, "the HTML is shown as text");
  assert.notEqual(await page.title(), "pwned");
});

test("editing a message forks the conversation; Regenerate asks for the last reply again", async () => {
  const { page } = browser;
  await newChat(page);
  await send(page, "kiln-hello", 0);
  const original = openId(page);
  // Regenerate: the same conversation, its last exchange asked again.
  const sent = (await mock.journal()).length;
  const first = await replies(page).first().elementHandle();
  await replies(page).first().getByTestId("chat-regenerate").click();
  // The reply is replaced by a new one, which ends.
  await page.waitForFunction((reply) => !reply.isConnected, first);
  await replies(page).first().getByTestId("chat-end").waitFor();
  assert.equal(await replies(page).count(), 1);
  assert.equal((await mock.journal()).length, sent + 1, "the model was asked once more");
  assert.equal(openId(page), original);
  assert.equal(await page.getByTestId("chat-user").count(), 1);

  // Edit the first message and send it: a new conversation from there.
  const user = page.getByTestId("chat-user").first();
  await user.hover();
  await user.getByTestId("chat-edit").click();
  await page.getByTestId("chat-edit-input").fill("kiln-which-model");
  await page.getByTestId("chat-edit-input").press("Enter");
  await page.waitForFunction((id) => /^#\/chat\/[\w-]+$/.test(location.hash) && location.hash !== `#/chat/${id}`, original);
  await replies(page).first().getByTestId("chat-end").waitFor({ timeout: 30_000 });
  assert.equal((await replies(page).first().getByTestId("chat-reply-text").textContent()).trim(), "You asked for gpt-4o-mini.");
  const fork = openId(page);
  assert.notEqual(fork, original);
  // The original is as it was.
  await page.locator(`[data-testid="thread"][data-thread="${original}"]`).getByTestId("thread-link").click();
  await page.waitForFunction((id) => location.hash === `#/chat/${id}`, original);
  await replies(page).first().getByTestId("chat-end").waitFor();
  assert.equal((await page.getByTestId("chat-user").first().textContent()).includes("kiln-hello"), true);
});

test("a long conversation opens on its last messages and draws the earlier ones when asked", async () => {
  const { page } = browser;
  // 130 messages written through the page API, in this browser's workspace.
  const writer = await browser.context.newPage();
  await writer.goto(new URL("kiln.js", page.url()).href);
  const id = await writer.evaluate(async () => {
    const { Kiln } = await import(new URL("kiln.js", location.href).href);
    const kiln = await Kiln.load({ poolSize: 1 });
    const thread = await kiln.threads.create("A long one");
    for (let n = 0; n < 130; n++) await kiln.threads.append(thread.id, n % 2 ? "assistant" : "user", `message ${n}`);
    return thread.id;
  });
  await writer.close();
  await page.goto(new URL(`#/chat/${id}`, page.url()).href);
  const drawn = () => page.locator('[data-testid="chat-user"], [data-testid="chat-assistant"], [data-testid="chat-error"]').count();
  const earlier = page.getByTestId("chat-earlier");
  await earlier.waitFor();
  assert.equal(await drawn(), 60);
  assert.equal((await earlier.textContent()).trim(), "Show earlier messages (70 more)");
  assert.match(await page.getByTestId("chat-user").last().textContent(), /message 128/);
  await earlier.click();
  await page.waitForFunction(() => document.querySelectorAll('[data-testid="chat-user"], [data-testid="chat-assistant"]').length === 120);
  // The drawn messages keep their place: the list is scrolled by what was added.
  await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))));
  assert.ok(await page.getByTestId("chat-messages").evaluate((list) => list.scrollTop > 0), "the place is kept");
  // The same button, from the keyboard, draws the rest; then it goes.
  await earlier.focus();
  await page.keyboard.press("Enter");
  await earlier.waitFor({ state: "hidden" });
  assert.equal(await drawn(), 130);
  assert.match(await page.getByTestId("chat-user").first().textContent(), /message 0/);
});
