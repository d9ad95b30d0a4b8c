// The in-browser model (SmolLM2-135M, run by Kiln itself) in the app, as a
// newcomer meets it on a plain static host: no model server, no
// local-provider.json, nothing configured. The chat's provider is the
// in-browser model, with its honest note by the message box; the first message
// shows the download as it goes (bytes and percent), then the loading, then a
// note that it loaded, and a reply; Stop ends a long generation like any other
// turn's; once downloaded it answers with the server gone (offline). Set
// KILN_SCREENSHOTS to a folder to keep pictures of the chat during the download
// and after the reply.
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { APP_URL, launch, openApp, show } from "../lib/browser.mjs";
import { startSite } from "../lib/site.mjs";

const LABEL = "In-browser SmolLM2 (135M)";
const SHOTS = process.env.KILN_SCREENSHOTS;

async function screenshot(page, name) {
  if (!SHOTS) return;
  mkdirSync(SHOTS, { recursive: true });
  await page.getByTestId("chat").screenshot({ path: join(SHOTS, `ui-${name}.png`) });
}

let browser;
before(async () => {
  // The app as `cargo xtask test` serves it: pkg/ as static files, which hold no
  // local-provider.json (only `cargo xtask serve` writes one).
  const local = await fetch(new URL("local-provider.json", APP_URL));
  assert.equal(local.status, 404, "this spec needs an app with no local model announced");
  browser = await launch();
  await browser.page.setViewportSize({ width: 1100, height: 1000 });
  await openApp(browser.page);
});
after(async () => {
  await browser?.close();
});

const replies = (page) => page.getByTestId("chat-assistant");

/**
 * Keeps every text the replies' model status lines show, in order, from now on:
 * a mutation observer sees each one, however briefly it is shown.
 */
async function recordStatusLines(page) {
  await page.evaluate(() => {
    window.kilnStatusLines = [];
    const record = () => {
      for (const line of document.querySelectorAll('[data-testid="chat-model-status"]')) {
        const text = line.textContent.trim();
        if (text && window.kilnStatusLines.at(-1) !== text) window.kilnStatusLines.push(text);
      }
    };
    new MutationObserver(record).observe(document.body, { subtree: true, childList: true, characterData: true });
  });
}

/** Sends `text` with Enter; resolves to the new reply's locator. */
async function send(page, text) {
  const before = await replies(page).count();
  await page.getByTestId("chat-input").fill(text);
  await page.getByTestId("chat-input").press("Enter");
  const reply = replies(page).nth(before);
  await reply.waitFor();
  return reply;
}

/**
 * Waits for the turn in flight to end (Stop goes), approving each action a small model
 * may ask to run; a turn that failed fails the test with the chat's own error.
 */
async function untilEnd(page, { within = 240_000 } = {}) {
  const deadline = Date.now() + within;
  while ((await page.getByTestId("chat-stop").count()) > 0) {
    assert.ok(Date.now() < deadline, `the in-browser model's turn did not end in ${within / 1000} s`);
    const approve = page.getByTestId("chat-cards").getByTestId("approve");
    if (await approve.count()) await approve.click();
    else await page.waitForTimeout(200);
  }
  await noError(page);
}

async function noError(page) {
  const error = page.getByTestId("chat-error");
  if (await error.count()) assert.fail(`the turn failed: ${(await error.last().innerText()).trim()}`);
}

test("a newcomer chats with the in-browser model, configuring nothing, and watches it download", async () => {
  const { page, errors } = browser;
  const provider = page.getByTestId("chat-provider");
  await provider.locator("option").first().waitFor({ state: "attached" });
  assert.equal(await provider.inputValue(), LABEL);
  assert.equal(await page.getByTestId("chat-send").isDisabled(), false);
  assert.equal(
    (await page.getByTestId("chat-model-note").textContent()).trim(),
    "The in-browser model is small (135M parameters): fine for short answers, poor at writing code. " +
      "For real work, add a provider with a key.",
  );

  // Settings' Providers panel lists it as built in: nothing to edit or remove, nothing configured.
  await show(page, "settings");
  const panel = page.getByTestId("providers");
  assert.equal((await panel.locator("summary").textContent()).trim(), "Providers (1)");
  await panel.locator("summary").click();
  const row = page.getByTestId("provider-builtin");
  assert.equal(await row.getAttribute("data-name"), LABEL);
  assert.match(await row.textContent(), /^In-browser SmolLM2 \(135M\) · runs in this browser, no key, no server · model smollm2-135m-instruct /);
  assert.equal(await page.getByTestId("provider-item").count(), 0);
  assert.equal(await page.getByTestId("provider-edit").count(), 0);
  await panel.locator("summary").click();
  await show(page, "chat");

  await recordStatusLines(page);
  const reply = await send(page, "What is the capital of France?");
  const status = reply.getByTestId("chat-model-status");
  assert.equal(await status.getAttribute("aria-live"), "polite");
  await status.filter({ hasText: /^Downloading the in-browser model: / }).waitFor({ timeout: 60_000 });
  await screenshot(page, "download");
  await untilEnd(page).finally(() => screenshot(page, "reply"));

  // The line went from the cache check through the download to the loading, and was
  // replaced by a note once the model was ready.
  const lines = await page.evaluate(() => window.kilnStatusLines);
  assert.match(lines[0], /^Checking this browser's cache for the in-browser model \(\d+\.\d MB\)…$/, lines.join("\n"));
  const downloads = lines.filter((line) => line.startsWith("Downloading"));
  assert.ok(downloads.length >= 3, lines.join("\n"));
  const figures = downloads.map((line) => {
    const match = line.match(/^Downloading the in-browser model: (\d+\.\d) of (\d+\.\d) MB \((\d+) %\)$/);
    assert.ok(match, line);
    return { loaded: Number(match[1]), total: Number(match[2]), percent: Number(match[3]) };
  });
  assert.ok(figures[0].total > 100, `${figures[0].total} MB`);
  for (const [before, next] of figures.slice(0, -1).map((figure, at) => [figure, figures[at + 1]])) {
    assert.ok(next.loaded >= before.loaded && next.percent >= before.percent, `${JSON.stringify(before)} then ${JSON.stringify(next)}`);
  }
  assert.equal(figures.at(-1).percent, 100);
  assert.ok(lines.includes("Loading the model…"), lines.join("\n"));
  assert.ok(lines.some((line) => /^Downloaded and loaded in \d+\.\d s$/.test(line)), lines.join("\n"));
  // Then the model reads the conversation (the agent's contract first), saying how far.
  assert.ok(lines.some((line) => /^Reading the conversation: \d+ of \d+ tokens…$/.test(line)), lines.join("\n"));
  assert.match(lines.at(-1), /^Read the conversation \(\d+ tokens\)$/);
  // The agent's contract is sized to the model's 4,096-token context: it leaves at
  // least 1,024 tokens to talk and answer.
  const read = Number(lines.at(-1).match(/\((\d+) tokens\)/)[1]);
  assert.ok(read <= 4096 - 1024, `the first turn's prompt is ${read} tokens`);
  assert.match(await status.textContent(), /^Read the conversation \(\d+ tokens\)$/);
  assert.equal(await reply.getByTestId("chat-model-warning").count(), 0);

  // The reply: not empty, and the line under it names the model.
  assert.equal(await reply.getByTestId("chat-stop-reason").textContent(), "Answered");
  const text = (await reply.getByTestId("chat-reply-text").allTextContents()).join("").trim();
  assert.ok(text.length > 0, "the reply is empty");
  assert.match(await reply.getByTestId("chat-end").textContent(), / · smollm2-135m-instruct$/);
  assert.deepEqual(errors, []);
});

test("Stop ends a long generation of the in-browser model, which then answers the next message", async () => {
  const { page, errors } = browser;
  await page.getByTestId("chat-clear").click();
  await page.getByTestId("chat-welcome").waitFor();
  const reply = await send(page, "Write a long story about a dragon who learns to fly, at least 1000 words.");
  const index = (await replies(page).count()) - 1;
  const text = reply.getByTestId("chat-reply-text").first();
  // The model is loaded already, and it kept its state after the agent's contract: it
  // reads only the new conversation's message. A failed turn fails at once.
  await text.or(page.getByTestId("chat-error")).first().waitFor({ timeout: 120_000 });
  await noError(page);
  // (The text is drawn again as it grows: no element of it is held.)
  await page.waitForFunction(
    (index) => (document.querySelectorAll('[data-testid="chat-assistant"]')[index]?.querySelector('[data-testid="chat-reply-text"]')?.textContent.length ?? 0) >= 40,
    index,
    { timeout: 120_000 },
  );
  await page.getByTestId("chat-stop").click();
  await reply.getByTestId("chat-end").waitFor({ timeout: 30_000 });
  assert.equal(await reply.getByTestId("chat-stop-reason").textContent(), "Stopped");
  // Only the note that the conversation was read may stay; no line still working.
  assert.match(await reply.getByTestId("chat-model-status").textContent(), /^(|Read the conversation \(\d+ tokens\))$/);
  assert.equal(await page.getByTestId("chat-stop").count(), 0);
  assert.equal(await page.getByTestId("chat-send").isDisabled(), false);
  // Nothing more arrives once stopped.
  const partial = await text.textContent();
  assert.ok(partial.length > 0);
  await page.waitForTimeout(1500);
  assert.equal(await text.textContent(), partial);
  await screenshot(page, "stopped");

  // The model worker is free again: the next message is answered.
  const next = await send(page, "What is 2 + 2?");
  await untilEnd(page);
  assert.match(await next.getByTestId("chat-stop-reason").textContent(), /^(Answered|Stopped by a guard \(\w+\))$/);
  assert.deepEqual(errors, []);
});

test("a download that breaks off is said in the chat; Retry downloads again; offline it answers from the cache; Clear cached model deletes the files", async () => {
  const site = await startSite();
  // With the app's service worker, which keeps the shell for the offline part.
  const fresh = await launch({ serviceWorkers: "allow" });
  try {
    const { page, errors } = fresh;
    site.cutAfter = 20_000_000;
    await openApp(page, { url: site.url });
    await page.getByTestId("chat-provider").locator("option").first().waitFor({ state: "attached" });
    await send(page, "What is 2 + 2?");
    const error = page.getByTestId("chat-error");
    await error.waitFor({ timeout: 120_000 });
    // Said once, in the model's words: which file, how far it came, what to do.
    assert.equal(await error.count(), 1);
    assert.match(await error.locator(".text").textContent(), /smollm2-135m-instruct\.q8_0\.gguf stopped after \d+ of 144811072 bytes/);
    assert.match(await error.getByTestId("chat-error-hint").textContent(), /^hint: .*retry/i);
    assert.equal(site.weightRequests, 1);

    site.cutAfter = null;
    await error.getByTestId("chat-model-retry").click();
    await page.getByTestId("chat-error").waitFor({ state: "detached" });
    await untilEnd(page);
    const reply = replies(page).last();
    assert.equal(await reply.getByTestId("chat-stop-reason").textContent(), "Answered");
    assert.ok((await reply.getByTestId("chat-reply-text").allTextContents()).join("").trim().length > 0);
    assert.equal(site.weightRequests, 2);

    // Offline: with the server gone, a reload opens the app from its service worker and the
    // model answers from this browser's cache, downloading nothing.
    await page.waitForFunction(() => navigator.serviceWorker.controller !== null, null, { timeout: 30_000 });
    site.down = true;
    try {
      await page.reload();
      await page.getByTestId("chat-input").waitFor();
      await recordStatusLines(page);
      const offline = await send(page, "What is 3 + 3?");
      await untilEnd(page);
      assert.equal(await offline.getByTestId("chat-stop-reason").textContent(), "Answered");
      assert.ok((await offline.getByTestId("chat-reply-text").allTextContents()).join("").trim().length > 0);
      const lines = await page.evaluate(() => window.kilnStatusLines);
      assert.ok(lines.includes("Loading the model…"), lines.join("\n"));
      assert.equal(lines.filter((line) => line.startsWith("Downloading")).length, 0, lines.join("\n"));
    } finally {
      site.down = false;
    }
    assert.equal(site.weightRequests, 2, "nothing downloaded offline");

    // Settings' Providers panel: the built-in row deletes the kept files.
    await show(page, "settings");
    await page.getByTestId("providers").locator("summary").click();
    await page.getByTestId("provider-clear-model").click();
    await page.getByTestId("provider-status").filter({ hasText: "cached files were deleted" }).waitFor();
    assert.equal(await page.evaluate(async () => (await caches.keys()).includes("kiln-model")), false);
    assert.deepEqual(errors, []);
  } finally {
    await fresh.close();
    await site.close();
  }
});
