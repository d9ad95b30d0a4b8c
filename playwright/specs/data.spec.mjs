// A person's data, over real Chromium profiles: the first kept conversation asks
// once whether the browser may keep the workspace, and why (never again after a
// reload or an answer); Settings → Your data exports the whole workspace as one
// file, which a fresh profile imports with its conversations, memories and files,
// and Delete everything (confirmed) empties it.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { addOpenAiProvider, launch, openApp, show } from "../lib/browser.mjs";
import { startAimock } from "../lib/servers.mjs";

let mock;
let first;
let folder;
before(async () => {
  mock = await startAimock();
  first = await launch();
  await openApp(first.page);
  folder = mkdtempSync(join(tmpdir(), "kiln-data-"));
});
after(async () => {
  await first?.close();
  await mock?.stop();
  if (folder) rmSync(folder, { recursive: true, force: true });
});

/** Sends `text` in a new conversation and waits for its reply to end. */
async function converse(page, text) {
  await show(page, "chat");
  await page.getByTestId("chat-input").fill(text);
  await page.getByTestId("chat-input").press("Enter");
  await page.getByTestId("chat-end").last().waitFor();
}

const threadTitles = (page) => page.getByTestId("thread").evaluateAll((rows) => rows.map((row) => row.querySelector('[data-testid="thread-link"]').textContent));

test("the first kept conversation asks once whether the browser may keep the workspace, and why", async () => {
  const { page, errors } = first;
  await addOpenAiProvider(page, { name: "aimock", baseUrl: `${mock.url}/v1`, key: "sk-test-data", model: "gpt-4o-mini" });
  await show(page, "chat");
  assert.equal(await page.getByTestId("keep-offer").count(), 0, "nothing is kept yet: nothing to ask about");
  await converse(page, "kiln-hello");
  const offer = page.getByTestId("keep-offer");
  await offer.waitFor();
  assert.match(await offer.textContent(), /lives only in this browser\. When space runs low, a browser may delete a site's data unless it was asked to keep it\./);
  await offer.getByTestId("keep-offer-yes").click();
  // Headless Chromium declines for a site it has no history with; whatever it says is said.
  const said = page.getByTestId("keep-offer-said");
  await said.waitFor();
  assert.match(
    await said.textContent(),
    /^(This browser keeps your workspace|This browser did not agree to keep it for now .* export it in Settings → Your data\.|This browser cannot be asked)/,
  );
  assert.equal(await offer.count(), 0);
  // Asked once: not after a reload, nor in the next conversation.
  await page.reload();
  await page.getByTestId("chat-clear").click();
  await page.getByTestId("chat-welcome").waitFor();
  await converse(page, "kiln-hello");
  assert.equal(await page.getByTestId("keep-offer").count(), 0);
  assert.deepEqual(errors, []);
});

test("the whole workspace goes into a fresh profile as one file, and Delete everything empties it", async () => {
  const { page, errors } = first;
  await show(page, "memory");
  await page.getByTestId("memory-new").fill("The glaze needs three coats");
  await page.getByTestId("memory-save").click();
  await page.getByTestId("memory-text").getByText("The glaze needs three coats", { exact: true }).waitFor();
  await show(page, "files");
  await page.getByTestId("files-upload").setInputFiles({ name: "notes.txt", mimeType: "text/plain", buffer: Buffer.from("fired at 1200 degrees\n") });
  await page.locator('[data-testid="file-item"][data-name="notes.txt"]').waitFor();
  const titles = await threadTitles(page);
  assert.equal(titles.length, 2, `two conversations: ${titles}`);

  await show(page, "settings");
  const data = page.getByTestId("data-settings");
  const download = page.waitForEvent("download");
  await data.getByTestId("export-workspace").click();
  const file = join(folder, "workspace.json");
  await (await download).saveAs(file);
  await data.getByTestId("data-status").waitFor();
  const doc = JSON.parse(readFileSync(file, "utf8"));
  assert.equal(doc.format, "kiln-export");
  assert.ok(!readFileSync(file, "utf8").includes("sk-test-data"), "no key unless asked");

  // A fresh profile: nothing, then everything after the import.
  const second = await launch();
  try {
    const fresh = second.page;
    await openApp(fresh);
    await show(fresh, "settings");
    await fresh.getByTestId("import-workspace").setInputFiles(file);
    await fresh.getByTestId("data-status").filter({ hasText: /^Imported \d+ records and 1 file\.$/ }).waitFor();
    await show(fresh, "chat");
    await fresh.waitForFunction((count) => document.querySelectorAll('[data-testid="thread"]').length === count, titles.length);
    assert.deepEqual((await threadTitles(fresh)).sort(), [...titles].sort());
    await show(fresh, "memory");
    await fresh.getByTestId("memory-text").getByText("The glaze needs three coats", { exact: true }).waitFor();
    await show(fresh, "files");
    await fresh.locator('[data-testid="file-item"][data-name="notes.txt"]').waitFor();
    // The conversation opens as it was.
    await show(fresh, "chat");
    await fresh.getByTestId("thread-link").first().click();
    await fresh.getByTestId("chat-assistant").first().getByText("Hello from the mock.").waitFor();

    // Delete everything asks first; then the page starts again, on an empty workspace.
    await show(fresh, "settings");
    await fresh.getByTestId("clear-workspace").click();
    const reloaded = fresh.waitForEvent("load");
    await fresh.getByTestId("clear-confirm").click();
    await reloaded;
    await fresh.getByTestId("chat-welcome").waitFor();
    await show(fresh, "memory");
    await fresh.getByTestId("memory-empty").waitFor();
    await show(fresh, "files");
    await fresh.getByTestId("files-empty").waitFor();
    assert.equal(await fresh.getByTestId("thread").count(), 0);
    assert.deepEqual(second.errors, []);
  } finally {
    await second.close();
  }
  assert.deepEqual(errors, []);
});
