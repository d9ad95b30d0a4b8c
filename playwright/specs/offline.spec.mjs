// Offline and installable, on a copy of the built app served by a plain static
// server that sets no header: after the first load the service worker keeps the
// shell, so with the server gone a reload still opens the app, a program runs
// and the kept conversations are listed; a new build announces itself and a
// Reload moves the page onto it; the web app manifest is there to install from.
import assert from "node:assert/strict";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync, createReadStream, existsSync, statSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { extname, join, normalize } from "node:path";
import { after, before, test } from "node:test";
import { chromium } from "playwright-core";
import { CHROMIUM_ARGS } from "../lib/browser.mjs";
import { PKG } from "../lib/site.mjs";

const TYPES = {
  ".html": "text/html",
  ".js": "text/javascript",
  ".wasm": "application/wasm",
  ".css": "text/css",
  ".json": "application/json",
  ".webmanifest": "application/manifest+json",
  ".svg": "image/svg+xml",
};

/** A plain static server over `dir` that can go away (every request refused) and come back. */
async function plainServer(dir) {
  let down = false;
  const server = createServer((request, response) => {
    if (down) {
      request.socket.destroy();
      return;
    }
    const path = normalize(decodeURIComponent(new URL(request.url, "http://x").pathname)).replace(/^\/+/, "");
    const file = join(dir, path === "" ? "index.html" : path);
    if (path.includes("..") || !existsSync(file) || !statSync(file).isFile()) {
      response.writeHead(404).end();
      return;
    }
    response.writeHead(200, { "content-type": TYPES[extname(file)] ?? "application/octet-stream" });
    createReadStream(file).pipe(response);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}/`,
    setDown(value) {
      down = value;
      server.closeAllConnections();
    },
    stop: () => new Promise((resolve) => server.close(resolve)),
  };
}

let site;
let dir;
let profile;
let context;
let page;
before(async () => {
  dir = mkdtempSync(join(tmpdir(), "kiln-offline-site-"));
  // The app without the model's files (the model worker keeps those itself).
  cpSync(PKG, dir, { recursive: true, filter: (source) => !source.includes(`${PKG.replace(/\/$/, "")}/models`) });
  site = await plainServer(dir);
  profile = mkdtempSync(join(tmpdir(), "kiln-offline-profile-"));
  context = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.KILN_CHROMIUM ?? "/usr/bin/chromium",
    headless: true,
    args: CHROMIUM_ARGS,
  });
  page = context.pages()[0] ?? (await context.newPage());
});
after(async () => {
  await context?.close();
  await site?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
  if (profile) rmSync(profile, { recursive: true, force: true });
});

/** The build the page's service worker serves. */
function servingBuild(page) {
  return page.evaluate(
    () =>
      new Promise((resolve) => {
        navigator.serviceWorker.addEventListener("message", (event) => resolve(event.data.build), { once: true });
        navigator.serviceWorker.controller.postMessage("kiln:build");
      }),
  );
}

const buildOf = (text) => text.match(/const BUILD = "([0-9a-f]+)";/)?.[1];

test("after the first load the app opens, runs a program and lists its conversations with the server gone", async () => {
  await page.goto(`${site.url}#/editor`);
  await page.getByTestId("code-editor").waitFor();
  // The worker took over this first page once it had kept the shell.
  await page.waitForFunction(() => navigator.serviceWorker.controller !== null, null, { timeout: 30_000 });
  const build = buildOf(readFileSync(join(dir, "sw.js"), "utf8"));
  assert.ok(build, "the build wrote its id into sw.js");
  assert.equal(await servingBuild(page), build);

  // Installable: the manifest names the app, its start and an icon the site serves.
  const manifest = await page.evaluate(async () => {
    const link = document.querySelector('link[rel="manifest"]');
    const response = await fetch(link.href);
    return response.json();
  });
  assert.equal(manifest.name, "Kiln");
  assert.equal(manifest.display, "standalone");
  assert.equal(manifest.start_url, "./");
  assert.ok(manifest.icons.length > 0 && existsSync(join(dir, manifest.icons[0].src)));

  site.setDown(true);
  assert.equal(await page.evaluate(async (url) => fetch(url + "local-provider.json").then(() => "up", () => "down"), site.url), "down");
  await page.reload();
  await page.getByTestId("code-editor").waitFor();
  await page.getByTestId("code-editor").fill("return 6 * 7");
  await page.getByTestId("run-button").click();
  await page.locator('[data-testid="run-status"]:not(.running)').waitFor({ timeout: 30_000 });
  assert.match(await page.getByTestId("run-status").textContent(), /^Completed/);
  assert.equal(await page.getByTestId("result-value").textContent(), "42");
  // The chat and its list come up too (the workspace is in this browser).
  await page.getByTestId("nav-chat").click();
  await page.getByTestId("threads").waitFor();
  await page.getByTestId("chat-input").waitFor();
  site.setDown(false);
});

test("a new build announces itself, and Reload moves the page onto it", async () => {
  const before = await servingBuild(page);
  // A new build on the server: its worker differs, so the browser installs it.
  const worker = join(dir, "sw.js");
  const next = "f".repeat(16);
  writeFileSync(worker, readFileSync(worker, "utf8").replace(/const BUILD = "[0-9a-f]+";/, `const BUILD = "${next}";`));
  await page.reload();
  const bar = page.getByTestId("update-ready");
  await bar.waitFor({ timeout: 30_000 });
  assert.match(await bar.textContent(), /A new version of Kiln is ready/);
  // Until the person says so the page stays on its build.
  assert.equal(await servingBuild(page), before);
  await Promise.all([page.waitForEvent("load"), page.getByTestId("update-reload").click()]);
  await page.getByTestId("chat").waitFor();
  assert.equal(await servingBuild(page), next);
  assert.equal(await page.getByTestId("update-ready").isVisible(), false);
});
