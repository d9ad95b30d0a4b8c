// Starts Debian's Chromium through playwright-core with a fresh profile, and opens the app.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before } from "node:test";
import { chromium } from "playwright-core";

// Without the background-networking flags Chromium reaches for hosts this
// machine cannot reach; as root it needs --no-sandbox.
export const CHROMIUM_ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--disable-dev-shm-usage",
];

export const APP_URL = process.env.KILN_URL ?? "http://127.0.0.1:8080/";

/**
 * Launches a browser with a new profile; `close()` ends it and removes the profile.
 * The app's service worker is blocked unless `serviceWorkers: "allow"`: a spec then
 * sees every request its routes and servers answer, not the worker's cache (the
 * offline spec and the bench allow it).
 *
 * Debian's Chromium blocks third-party cookies by default, and with them all storage of
 * an iframe from another site. `thirdPartyStorage: true` starts it as Chrome's default
 * profile is (third-party cookies allowed, such storage partitioned by top-level site),
 * for the widget's specs.
 */
export async function launch({ serviceWorkers = "block", thirdPartyStorage = false } = {}) {
  const newProfile = () => {
    const dir = mkdtempSync(join(tmpdir(), "kiln-chromium-"));
    if (thirdPartyStorage) {
      mkdirSync(join(dir, "Default"));
      writeFileSync(join(dir, "Default", "Preferences"), JSON.stringify({ profile: { cookie_controls_mode: 0 } }));
    }
    return dir;
  };
  let profile = newProfile();
  const start = () =>
    chromium.launchPersistentContext(profile, {
      executablePath: process.env.KILN_CHROMIUM ?? "/usr/bin/chromium",
      headless: true,
      args: CHROMIUM_ARGS,
      serviceWorkers,
    });
  let context;
  try {
    context = await start();
  } catch (error) {
    // Debian's Chromium has been seen to die of SIGSEGV while starting, before any page
    // existed (a clean CI run, once): no Kiln code had run. It is started once more on a
    // fresh profile; a second failure fails the spec.
    if (!String(error.message).includes("signal=SIGSEGV")) throw error;
    console.error("kiln: chromium crashed while starting (SIGSEGV); starting it once more");
    rmSync(profile, { recursive: true, force: true });
    profile = newProfile();
    context = await start();
  }
  const page = context.pages()[0] ?? (await context.newPage());
  const errors = [];
  page.on("pageerror", (error) => errors.push(String(error)));
  return {
    context,
    page,
    errors,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** Each view of the app, by its fragment (`#/memory`), and the element that shows it is open. */
export const VIEWS = {
  chat: "chat",
  agents: "agents-panel",
  skills: "skills-panel",
  editor: "code-editor",
  nodes: "nodes-panel",
  memory: "memory-panel",
  files: "files-panel",
  history: "history-panel",
  settings: "settings",
};

/**
 * Opens the app and waits until it is ready: the chat (or `view`) is shown. A bare
 * visit reopens the conversation this browser had open last; `#/chat` is a new one.
 */
export async function openApp(page, { url = APP_URL, view } = {}) {
  // Ready is the view on show, not the document's "load": that waited on the
  // whole page's fetches and passed its 30 s three times on a busy CI machine
  // while the app itself was still coming up. A cold wasm compile there may
  // take longer than 30 s; an app that never mounts still fails, by name.
  await page.goto(view ? `${url}#/${view}` : url, { waitUntil: "domcontentloaded", timeout: 60_000 });
  await page.getByTestId(VIEWS[view ?? "chat"]).waitFor({ state: "visible", timeout: 60_000 });
}

/**
 * Shows `view`: unless it is on show already, goes there with the navigation, as a
 * person does, and waits until it is shown. (The Chat link opens the chat view; which
 * conversation it shows is the app's choice: a test that needs one says so.)
 */
export async function show(page, view) {
  if (!Object.hasOwn(VIEWS, view)) throw new Error(`the app has no view \`${view}\``);
  const landmark = page.getByTestId(VIEWS[view]);
  if (await landmark.isVisible()) return;
  await page.getByTestId(`nav-${view}`).click();
  await landmark.waitFor({ state: "visible" });
}

/** Shows the program editor, replaces the program, presses Run, and waits for the run to finish. */
export async function runProgram(page, code, { timeout = 30_000 } = {}) {
  await show(page, "editor");
  await page.getByTestId("code-editor").fill(code);
  await page.getByTestId("run-button").click();
  await page.locator('[data-testid="run-status"]:not(.running)').waitFor({ timeout });
  await page.getByTestId("run-button").waitFor({ state: "visible" });
  return (await page.getByTestId("run-status").textContent()).trim();
}

/**
 * For a spec file: launches the browser and opens the app before its tests,
 * closes it after them. Returns a function giving `{page, errors}`.
 */
export function useApp() {
  let browser;
  before(async () => {
    browser = await launch();
    await openApp(browser.page);
  });
  after(async () => {
    await browser?.close();
  });
  return () => browser;
}

/**
 * Adds an OpenAI-compatible provider as a person does (Settings → Providers: test
 * the connection, pick the model, save) and waits until it is saved.
 */
export async function addOpenAiProvider(page, { name, baseUrl, key, model }) {
  await show(page, "settings");
  const panel = page.getByTestId("providers");
  if (!(await panel.evaluate((details) => details.open))) await panel.locator("summary").click();
  await page.getByTestId("provider-name").fill(name);
  await page.getByTestId("provider-kind").selectOption("openai");
  await page.getByTestId("provider-base-url").fill(baseUrl);
  await page.getByTestId("provider-key").fill(key);
  await page.getByTestId("provider-test").click();
  await page.locator('[data-testid="provider-status"] .ok').waitFor();
  await page.getByTestId("provider-model").selectOption(model);
  await page.getByTestId("provider-save").click();
  await page.getByTestId("provider-status").filter({ hasText: "Saved" }).waitFor();
}

