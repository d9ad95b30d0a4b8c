// The app's storage panels as a person uses them, over a real Chromium
// profile (IndexedDB `kiln-default` + OPFS): a memory saved in the Memory
// panel, a file uploaded in Files and a program's run (which saves a memory,
// publishes to its run memory and writes a file) are all found again after a
// reload; a second tab follows the first without reloading; an edit made
// over a stale version is refused with the person's text kept, then saved
// over the latest; a used-up quota is named with its hint and writes nothing;
// blocked storage is a banner and runs go on; an earlier Kiln's providers in
// localStorage are imported once.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { chromium } from "playwright-core";
import { APP_URL, CHROMIUM_ARGS, launch, openApp, runProgram, show } from "../lib/browser.mjs";

let browser;
before(async () => {
  browser = await launch();
  await browser.page.setViewportSize({ width: 1100, height: 1000 });
  await openStoredApp(browser.page);
});
after(async () => {
  await browser?.close();
});

/**
 * Opens the app and waits until the stored memories are listed (storage is open). The
 * mode is set to auto in Settings: the storage tools write, and the default mode would
 * ask first.
 */
async function openStoredApp(page) {
  await openApp(page);
  await settled(page);
  await show(page, "settings");
  await page.getByTestId("tool-list").locator("summary").click();
  await page.getByTestId("permission-mode").selectOption("auto");
  await page.getByTestId("tool-list").locator("summary").click();
}

/** Waits until the Memory view (shown or not) has listed what is stored. */
async function settled(page) {
  await page.locator('[data-testid="memory-empty"], [data-testid="memory-item"]').first().waitFor({ state: "attached" });
}

/**
 * A second tab on the app. (A tab in the background gets few animation frames, which
 * Playwright's actions wait for: the tab that acts is brought to the front.)
 */
async function newTab() {
  const page = await browser.context.newPage();
  await page.setViewportSize({ width: 1100, height: 1000 });
  const errors = [];
  page.on("pageerror", (error) => errors.push(String(error)));
  await openStoredApp(page);
  return { page, errors };
}

const memory = (page, text) => page.locator('[data-testid="memory-item"]', { has: page.getByTestId("memory-text").getByText(text, { exact: true }) });
const memoryTexts = (page) => page.getByTestId("memory-text").allTextContents();
const fileNames = (page) => page.getByTestId("file-item").evaluateAll((rows) => rows.map((row) => row.dataset.name));

/** Saves a memory from the Memory view. */
async function saveMemory(page, text) {
  await show(page, "memory");
  await page.getByTestId("memory-new").fill(text);
  await page.getByTestId("memory-save").click();
}

const PROGRAM = `// Keeps what it learnt: a durable memory, a shared result, a file.
const saved = await tools.save_memory({ text: "Programs remember too: the glaze needs three coats" });
await tools.share_result({ key: "summary", value: { coats: 3 }, title: "Glaze summary" });
await workspace.write("from-program.txt", "written by a program");
return { id: saved.id };`;
// The first line of code, cut at 80 characters.
const PROGRAM_TITLE = 'const saved = await tools.save_memory({ text: "Programs remember too: the glaze…';

test("a memory, an upload and a program's run are all found again after a reload", async () => {
  const { page, errors } = browser;
  assert.equal(await page.getByTestId("storage-banner").count(), 0);

  await saveMemory(page, "The kiln fires at 1200 degrees");
  await memory(page, "The kiln fires at 1200 degrees").waitFor();
  assert.equal(await page.getByTestId("memory-new").inputValue(), "", "the box empties once saved");

  await show(page, "files");
  await page.getByTestId("files-upload").setInputFiles({ name: "notes.txt", mimeType: "text/plain", buffer: Buffer.from("hello from an upload\n") });
  await page.locator('[data-testid="file-item"][data-name="notes.txt"]').waitFor();
  assert.match(await page.getByTestId("files-status").textContent(), /^Uploaded notes\.txt \(21 B\)\.$/);

  const status = await runProgram(page, PROGRAM);
  assert.match(status, /^Completed/, await page.getByTestId("result-panel").textContent());
  // The run's memory, file and record show up without a reload (the change feed; the
  // views stay in the page while hidden, so going to one reads nothing again).
  await show(page, "memory");
  await memory(page, "Programs remember too: the glaze needs three coats").waitFor();
  // "Last run": the newest job's run memory.
  await page.locator('[data-testid="run-entry"][data-key="shared:summary"]').waitFor();
  assert.match(await page.getByTestId("last-run-job").textContent(), /^const saved = .* · finished · \d{4}-\d\d-\d\d \d\d:\d\d$/);
  await page.getByTestId("memory-panel").screenshot({ path: "/tmp/kiln-ui-memory.png" });
  await show(page, "files");
  await page.locator('[data-testid="file-item"][data-name="from-program.txt"]').waitFor();
  await page.getByTestId("files-panel").screenshot({ path: "/tmp/kiln-ui-files.png" });
  await show(page, "history");
  await page.locator('[data-testid="history-item"][data-status="ok"]').first().waitFor();
  assert.equal(await page.getByTestId("history-item").first().locator(".job-title").textContent(), PROGRAM_TITLE);

  await page.reload();
  await openStoredApp(page);
  assert.deepEqual(await memoryTexts(page), ["Programs remember too: the glaze needs three coats", "The kiln fires at 1200 degrees"]);
  await show(page, "files");
  await page.locator('[data-testid="file-item"][data-name="from-program.txt"]').waitFor();
  assert.deepEqual(await fileNames(page), ["from-program.txt", "notes.txt"]);
  await show(page, "history");
  await page.locator('[data-testid="history-item"][data-status="ok"]').first().waitFor();
  assert.equal(await page.getByTestId("history-item").count(), 1);

  // Open things: a file's text, a run's input and output, a run memory value.
  await show(page, "files");
  await page.getByRole("button", { name: "Open notes.txt" }).click();
  assert.equal(await page.getByTestId("file-text").textContent(), "hello from an upload\n");
  await show(page, "history");
  await page.getByTestId("history-item").first().locator(".job-title").click();
  assert.equal(await page.getByTestId("history-input").textContent(), PROGRAM);
  assert.match(await page.getByTestId("history-output").textContent(), /m-\d{13}-/);
  await show(page, "memory");
  await page.getByRole("button", { name: "Show the value of shared:summary" }).click();
  assert.equal(await page.getByTestId("run-entry-value").textContent(), JSON.stringify({ coats: 3 }, null, 2));
  const entry = await page.locator('[data-testid="run-entry"][data-key="shared:summary"]').textContent();
  assert.match(entry, /shared:summary\s*shared\s*Glaze summary\s*11 B/);

  // Search: memories by their words, the history by the program's.
  await page.getByTestId("memory-search").fill("glaze coats");
  await page.waitForFunction(() => document.querySelectorAll('[data-testid="memory-item"]').length === 1);
  assert.deepEqual(await memoryTexts(page), ["Programs remember too: the glaze needs three coats"]);
  await page.getByTestId("memory-search").fill("");
  await page.waitForFunction(() => document.querySelectorAll('[data-testid="memory-item"]').length === 2);
  await show(page, "history");
  await page.getByTestId("history-search").fill("glaze");
  await page.getByTestId("history-hit").first().waitFor();
  assert.equal(await page.getByTestId("history-hit").first().getAttribute("data-kind"), "job");
  await page.getByTestId("history-search").fill("porcelain");
  await page.getByTestId("history-empty").waitFor();
  await page.getByTestId("history-search").fill("");
  await page.getByTestId("history-item").first().waitFor();

  // Marks: helpful counts up, outdated badges the memory.
  await show(page, "memory");
  const kiln = memory(page, "The kiln fires at 1200 degrees");
  await kiln.getByTestId("memory-helpful-button").click();
  await memory(page, "The kiln fires at 1200 degrees").getByTestId("memory-helpful").getByText("helpful once").waitFor();
  await memory(page, "The kiln fires at 1200 degrees").getByTestId("memory-outdated-button").click();
  await memory(page, "The kiln fires at 1200 degrees").getByTestId("memory-outdated").waitFor();

  // Folders: make one, go in, upload there, come back; a folder with a file is not deleted.
  await show(page, "files");
  await page.getByTestId("files-folder-name").fill("glazes");
  await page.getByTestId("files-new-folder").click();
  await page.locator('[data-testid="file-item"][data-name="glazes"][data-kind="folder"]').waitFor();
  assert.deepEqual(await fileNames(page), ["glazes", "from-program.txt", "notes.txt"], "folders first");
  await page.getByRole("button", { name: "Open the folder glazes" }).click();
  await page.getByTestId("files-empty").waitFor();
  await page.getByTestId("files-upload").setInputFiles([
    { name: "celadon.txt", mimeType: "text/plain", buffer: Buffer.from("iron 1%") },
    { name: "tile.bin", mimeType: "application/octet-stream", buffer: Buffer.from([0, 1, 2, 255]) },
  ]);
  await page.locator('[data-testid="file-item"][data-name="tile.bin"]').waitFor();
  await page.getByRole("button", { name: "Open tile.bin" }).click();
  assert.equal(await page.getByTestId("file-binary").textContent(), "A binary file of 4 B. Download it to open it.");
  const download = page.waitForEvent("download");
  await page.getByRole("button", { name: "Download celadon.txt" }).click();
  const file = await download;
  assert.equal(file.suggestedFilename(), "celadon.txt");
  const chunks = [];
  for await (const chunk of await file.createReadStream()) chunks.push(chunk);
  assert.equal(Buffer.concat(chunks).toString(), "iron 1%");
  assert.deepEqual(await page.getByTestId("files-crumb").allTextContents(), ["Workspace", "glazes"]);
  await page.getByTestId("files-crumb").first().click();
  await page.locator('[data-testid="file-item"][data-name="notes.txt"]').waitFor();
  await page.getByRole("button", { name: "Delete glazes" }).click();
  const refused = page.getByTestId("files-error");
  await refused.waitFor();
  assert.equal(await refused.getAttribute("role"), "alert");
  assert.match(await refused.textContent(), /^glazes was not deleted: /);
  assert.deepEqual(await fileNames(page), ["glazes", "from-program.txt", "notes.txt"]);
  await page.getByRole("button", { name: "Delete notes.txt" }).click();
  await page.locator('[data-testid="file-item"][data-name="notes.txt"]').waitFor({ state: "detached" });

  await page.getByTestId("files-panel").screenshot({ path: "/tmp/kiln-ui-files-open.png" });
  await show(page, "history");
  await page.getByTestId("history-panel").screenshot({ path: "/tmp/kiln-ui-history.png" });
  assert.deepEqual(errors, []);
});

test("two tabs: a memory saved in one appears in the other, and a delete there removes it here", async () => {
  const a = browser.page;
  const { page: b, errors } = await newTab();
  try {
    // Each tab shows its Memory view.
    await show(b, "memory");
    await a.bringToFront();
    await saveMemory(a, "Seen in both tabs");
    await memory(b, "Seen in both tabs").waitFor({ timeout: 10_000 });
    await b.bringToFront();
    await memory(b, "Seen in both tabs").getByTestId("memory-delete").click();
    await memory(a, "Seen in both tabs").waitFor({ state: "detached", timeout: 10_000 });
    await a.bringToFront();
    // A run in one tab shows in the other's history (and its Last run, in Memory).
    await runProgram(a, "// a second run\nreturn 6 * 7;");
    await b.bringToFront();
    await show(b, "history");
    await b.locator('[data-testid="history-item"]', { hasText: "return 6 * 7;" }).waitFor({ timeout: 10_000 });
    await show(b, "memory");
    await b.getByTestId("last-run-job").getByText("return 6 * 7;").waitFor();
    // A provider saved in one tab (in Settings) is listed in the other (the configuration's change feed).
    await a.bringToFront();
    await show(a, "settings");
    await a.getByTestId("providers").locator("summary").click();
    await a.getByTestId("provider-name").fill("tab provider");
    await a.getByTestId("provider-kind").selectOption("ollama");
    await a.getByTestId("provider-base-url").fill("http://127.0.0.1:9");
    await a.getByTestId("provider-model").fill("llama3.2");
    await a.getByTestId("provider-save").click();
    await a.getByTestId("provider-status").filter({ hasText: "Saved tab provider" }).waitFor();
    await b.locator('[data-testid="provider-item"][data-name="tab provider"]').waitFor({ state: "attached", timeout: 10_000 });
    assert.equal(await b.getByTestId("chat-provider").inputValue(), "tab provider", "the pick follows too");
    await a.getByRole("button", { name: "Remove tab provider" }).click();
    await b.locator('[data-testid="provider-item"][data-name="tab provider"]').waitFor({ state: "detached", timeout: 10_000 });
    await a.getByTestId("providers").locator("summary").click();
    assert.deepEqual(errors, []);
  } finally {
    await b.close();
  }
});

test("the permission mode, the brake and a tool's setting are kept: another tab and a reload find them", async () => {
  const { page, errors } = browser;
  const summary = (p) => p.getByTestId("tool-list").locator("summary");
  const shown = (p) =>
    p.evaluate(() => ({
      mode: document.querySelector('[data-testid="permission-mode"]').value,
      brake: document.querySelector('[data-testid="brake"]').checked,
      add: document.querySelector('[data-testid="setting-add"]').value,
    }));
  const wanted = { mode: "plan", brake: true, add: "ask" };
  await show(page, "settings");
  await summary(page).click();
  await page.getByTestId("permission-mode").selectOption("plan");
  await page.getByTestId("brake").check();
  await page.getByTestId("setting-add").selectOption("ask");

  const other = await browser.context.newPage();
  await openApp(other);
  await settled(other);
  // The tool rows come from the tab's runtime worker once it has started.
  await other.waitForFunction(() => document.querySelector('[data-testid="permission-mode"]').value === "plan" && document.querySelector('[data-testid="setting-add"]')?.value === "ask");
  assert.deepEqual(await shown(other), wanted);
  await other.close();

  await page.reload();
  await settled(page);
  await page.waitForFunction(() => document.querySelector('[data-testid="permission-mode"]').value === "plan" && document.querySelector('[data-testid="setting-add"]')?.value === "ask");
  assert.deepEqual(await shown(page), wanted);
  // Plan mode is in force, not only shown: a write is refused.
  const status = await runProgram(page, 'await workspace.write("plan.txt", "x")');
  assert.match(status, /failed|error/i);
  assert.match(await page.getByTestId("run-error").textContent(), /file_write/);

  // Back to auto and no settings for the tests after this one.
  await show(page, "settings");
  await summary(page).click();
  await page.getByTestId("permission-mode").selectOption("auto");
  await page.getByTestId("brake").uncheck();
  await page.getByTestId("setting-add").selectOption("");
  await summary(page).click();
  assert.deepEqual(errors, []);
});

test("an edit over a stale version is refused with the person's text kept; Reload latest, then save", async () => {
  const a = browser.page;
  const { page: b, errors } = await newTab();
  try {
    // Each tab shows its Memory view.
    await show(b, "memory");
    await a.bringToFront();
    await saveMemory(a, "Cone 6 is about 1220 degrees");
    const id = await memory(a, "Cone 6 is about 1220 degrees").getAttribute("data-id");
    await memory(b, "Cone 6 is about 1220 degrees").waitFor();
    // Both tabs start editing version 1.
    await memory(a, "Cone 6 is about 1220 degrees").getByTestId("memory-edit").click();
    await memory(b, "Cone 6 is about 1220 degrees").getByTestId("memory-edit").click();
    const inA = a.locator(`[data-testid="memory-item"][data-id="${id}"]`);
    const inB = b.locator(`[data-testid="memory-item"][data-id="${id}"]`);
    await inA.getByTestId("memory-edit-text").fill("Cone 6 is about 1222 degrees (edited in A)");
    await inB.getByTestId("memory-edit-text").fill("Cone 6 is about 1240 degrees (edited in B)");
    await a.bringToFront();
    await inA.getByTestId("memory-edit-save").click();
    await inA.getByTestId("memory-editor").waitFor({ state: "detached" });
    await b.bringToFront();
    // B's list follows A's edit; B's editor still holds B's words, and says the memory moved on.
    await inB.getByTestId("memory-text").getByText("Cone 6 is about 1222 degrees (edited in A)").waitFor();
    assert.equal(await inB.getByTestId("memory-edit-text").inputValue(), "Cone 6 is about 1240 degrees (edited in B)");
    await inB.getByTestId("memory-edit-moved").waitFor();

    await inB.getByTestId("memory-edit-save").click();
    const conflict = inB.getByTestId("memory-edit-error");
    await conflict.waitFor();
    assert.equal(await conflict.getAttribute("role"), "alert");
    assert.equal(
      (await conflict.locator(".error-message").textContent()).trim(),
      `Your edit of memory ${id} was not saved: ${id} in memories was changed elsewhere (expected version 1, found 2); nothing was written`,
    );
    assert.equal(await conflict.locator(".error-hint").textContent(), "hint: reload it and apply the change again");
    assert.equal(await inB.getByTestId("memory-edit-text").inputValue(), "Cone 6 is about 1240 degrees (edited in B)", "nothing typed is lost");
    assert.equal(await inA.getByTestId("memory-text").textContent(), "Cone 6 is about 1222 degrees (edited in A)", "the stored text is A's");
    await b.getByTestId("memory-panel").screenshot({ path: "/tmp/kiln-ui-conflict.png" });

    await inB.getByTestId("memory-reload-latest").click();
    await inB.getByTestId("memory-latest").waitFor();
    assert.equal(await inB.getByTestId("memory-latest").textContent(), "Cone 6 is about 1222 degrees (edited in A)");
    assert.equal(await inB.getByTestId("memory-edit-text").inputValue(), "Cone 6 is about 1240 degrees (edited in B)");
    assert.equal(await inB.getByTestId("memory-edit-error").count(), 0);
    await inB.getByTestId("memory-edit-save").click();
    await inB.getByTestId("memory-editor").waitFor({ state: "detached" });
    await inA.getByTestId("memory-text").getByText("Cone 6 is about 1240 degrees (edited in B)").waitFor();
    assert.equal(await inB.getByTestId("memory-text").textContent(), "Cone 6 is about 1240 degrees (edited in B)");
    assert.deepEqual(errors, []);
  } finally {
    await b.close();
  }
});

/** A browser on the profile in `dir`, kept when it closes (to open it again). */
async function launchOn(dir) {
  const context = await chromium.launchPersistentContext(dir, {
    executablePath: process.env.KILN_CHROMIUM ?? "/usr/bin/chromium",
    headless: true,
    args: CHROMIUM_ARGS,
  });
  const page = context.pages()[0] ?? (await context.newPage());
  await page.setViewportSize({ width: 1100, height: 1000 });
  const errors = [];
  page.on("pageerror", (error) => errors.push(String(error)));
  return { context, page, errors };
}

test("a used-up quota is named with its hint, keeps the typed text, and writes nothing", async () => {
  // Chromium's IndexedDB keeps the origin's remaining space for a while after a write and
  // does not ask the quota again meanwhile, so the quota is lowered in a browser that has
  // not written yet: the data is written first, in a session of its own.
  const dir = mkdtempSync(join(tmpdir(), "kiln-quota-"));
  try {
    const first = await launchOn(dir);
    await openStoredApp(first.page);
    await saveMemory(first.page, "Kept before the quota");
    await memory(first.page, "Kept before the quota").waitFor();
    await show(first.page, "files");
    await first.page.getByTestId("files-upload").setInputFiles({ name: "small.txt", mimeType: "text/plain", buffer: Buffer.from("small") });
    await first.page.locator('[data-testid="file-item"][data-name="small.txt"]').waitFor();
    await first.context.close();

    const { context, page, errors } = await launchOn(dir);
    // Not openStoredApp: choosing the mode writes the settings, and this session must
    // not write before the quota is lowered. The first session kept `auto`.
    await openApp(page);
    await settled(page);
    await page.waitForFunction(() => document.querySelector('[data-testid="permission-mode"]').value === "auto");
    assert.deepEqual(await memoryTexts(page), ["Kept before the quota"]);
    await show(page, "files");
    await page.locator('[data-testid="file-item"][data-name="small.txt"]').waitFor();
    const origin = new URL(APP_URL).origin;
    const cdp = await context.newCDPSession(page);
    await cdp.send("Storage.overrideQuotaForOrigin", { origin, quotaSize: 1 });
    try {
      const big = "A long note about glazes. ".repeat(300);
      await saveMemory(page, big);
      const error = page.getByTestId("memory-error");
      await error.waitFor();
      assert.equal(await error.getAttribute("role"), "alert");
      assert.match(await error.locator(".error-message").textContent(), /^The memory was not saved: .*the browser's storage quota for this site is used up.*; nothing was written$/);
      assert.equal(await error.locator(".error-message").getAttribute("data-code"), "quota_exceeded");
      assert.match(await error.locator(".error-hint").textContent(), /^hint: delete old files or memories/);
      assert.equal(await page.getByTestId("memory-new").inputValue(), big, "the typed text stays");
      await page.getByTestId("memory-panel").screenshot({ path: "/tmp/kiln-ui-quota.png" });

      await show(page, "files");
      await page.getByTestId("files-upload").setInputFiles({ name: "big.bin", mimeType: "application/octet-stream", buffer: Buffer.alloc(2_000_000, 7) });
      const fileError = page.getByTestId("files-error");
      await fileError.waitFor();
      assert.match(await fileError.locator(".error-message").textContent(), /^big\.bin was not uploaded: .*the browser's storage quota for this site is used up.*; nothing was written$/);
      assert.match(await fileError.locator(".error-hint").textContent(), /^hint: delete old files or memories/);
      await page.getByTestId("files-panel").screenshot({ path: "/tmp/kiln-ui-quota-files.png" });
    } finally {
      await cdp.send("Storage.overrideQuotaForOrigin", { origin });
    }
    await page.reload();
    await openStoredApp(page);
    assert.deepEqual(await memoryTexts(page), ["Kept before the quota"]);
    await show(page, "files");
    await page.locator('[data-testid="file-item"][data-name="small.txt"]').waitFor();
    assert.deepEqual(await fileNames(page), ["small.txt"], "no part of big.bin was kept");
    assert.deepEqual(errors, []);
    await context.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("blocked storage is a banner with its hint; programs still run, without the storage tools", async () => {
  const page = await browser.context.newPage();
  const errors = [];
  page.on("pageerror", (error) => errors.push(String(error)));
  const block = () => {
    Object.defineProperty(window, "indexedDB", {
      get() {
        throw new DOMException("The user denied permission to access the database.", "SecurityError");
      },
    });
  };
  await page.addInitScript(block);
  // Programs run in the runtime worker, which opens the workspace too: a browser
  // that blocks storage blocks it there as well.
  await page.route("**/workers/runtime.js", async (route) => {
    const response = await route.fetch();
    const prelude = `(${block.toString().replaceAll("window", "self")})();\n`;
    await route.fulfill({ response, body: prelude + (await response.text()) });
  });
  try {
    await openApp(page);
    const banner = page.getByTestId("storage-banner");
    await banner.waitFor();
    assert.equal(await banner.getAttribute("role"), "alert");
    assert.match(await banner.textContent(), /Memory, history and settings cannot be kept: storage is not available here \(.+\)/);
    assert.match(await banner.textContent(), /hint: private windows and blocked site data turn storage off/);
    await show(page, "memory");
    await page.getByTestId("memory-unavailable").waitFor();
    const status = await runProgram(page, 'try { tools.save_memory; return "there"; } catch (error) { return error.name; }');
    assert.match(status, /^Completed/);
    assert.equal(await page.getByTestId("result-value").textContent(), '"TypeError"');
    await page.screenshot({ path: "/tmp/kiln-ui-banner.png" });
    assert.deepEqual(errors, []);
  } finally {
    await page.close();
  }
});

test("providers an earlier Kiln kept in localStorage are imported once, then the old key is gone", async () => {
  const fresh = await launch();
  try {
    const { page, errors } = fresh;
    await openStoredApp(page);
    await show(page, "chat");
    // Unreadable text is named, imports nothing, and stays until a provider is saved.
    await page.evaluate(() => localStorage.setItem("kiln.providers.v1", "{not json"));
    await page.reload();
    await page.getByTestId("providers-notice").waitFor();
    assert.match(
      await page.getByTestId("providers-notice").textContent(),
      /^The saved providers \(localStorage key kiln\.providers\.v1\) could not be read \(.+\) and were ignored; saving a provider replaces them\.$/,
    );
    // Nothing was imported: the chat's provider is the in-browser model.
    await page.waitForFunction(() => document.querySelector('[data-testid="chat-provider"]')?.value === "In-browser SmolLM2 (135M)");
    assert.equal(await page.getByTestId("provider-item").count(), 0);
    assert.equal(await page.evaluate(() => localStorage.getItem("kiln.providers.v1")), "{not json");
    const legacy = {
      providers: [
        { name: "old OpenAI", kind: "openai", base_url: "http://127.0.0.1:9/v1", key: "sk-legacy-1234", model: "gpt-4o-mini" },
        { name: "old Ollama", kind: "ollama", base_url: "http://127.0.0.1:9", model: "llama3.2" },
      ],
      selected: "old Ollama",
    };
    await page.evaluate((text) => localStorage.setItem("kiln.providers.v1", text), JSON.stringify(legacy));
    await page.reload();
    await page.getByTestId("chat").waitFor();
    await show(page, "settings");
    await page.getByTestId("providers").locator("summary").click();
    const names = await page.getByTestId("provider-item").evaluateAll((items) => items.map((item) => item.dataset.name));
    assert.deepEqual(names, ["old Ollama", "old OpenAI"]);
    assert.deepEqual(await page.getByTestId("provider-key-state").allTextContents(), ["no key", "key set"]);
    assert.equal(await page.getByTestId("chat-provider").inputValue(), "old Ollama");
    assert.equal(await page.evaluate(() => localStorage.getItem("kiln.providers.v1")), null);
    assert.ok(!(await page.content()).includes("sk-legacy-1234"), "the key is never shown");
    // Kept in the store: a reload (of Settings) finds them without the old key. The chat
    // is drawn, hidden, once the providers are read.
    await page.reload();
    await page.getByTestId("settings").waitFor();
    await page.getByTestId("chat").waitFor({ state: "attached" });
    assert.equal(await page.getByTestId("provider-item").count(), 2);
    assert.equal(await page.getByTestId("chat-provider").inputValue(), "old Ollama");
    assert.deepEqual(errors, []);
  } finally {
    await fresh.close();
  }
});
