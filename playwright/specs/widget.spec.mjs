// The embedded widget as a third-party site gets it: Kiln served from
// http://127.0.0.1:PORT (pkg/, with the widget.json each test sets) and the host page
// from http://localhost:PORT2, a different site, so partitioning and cross-origin rules
// are the real ones. Host pages carry the strict policy the README publishes:
// `script-src 'self' KILN; frame-src KILN`, sent as a header.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import { gzipSync } from "node:zlib";
import { after, afterEach, before, beforeEach, test } from "node:test";
import { launch } from "../lib/browser.mjs";
import { startAimock } from "../lib/servers.mjs";
import { PKG, startSite } from "../lib/site.mjs";

const EMBED = new URL("../../embed/", import.meta.url);

let mock;
let kiln;
let host;
let browser;

/** The host site: `pages` maps a path to [content type, body, its policy if not the usual]. */
function startHost() {
  const pages = {};
  const server = createServer((request, response) => {
    const path = new URL(request.url, "http://x").pathname;
    const page = pages[path];
    if (!page) {
      response.writeHead(404).end();
      return;
    }
    const [type, body, policy] = page;
    response.writeHead(200, {
      "content-type": type,
      "content-security-policy": policy ?? `script-src 'self' ${kiln.origin}; frame-src ${kiln.origin}`,
    });
    response.end(body);
  });
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () => {
      const port = server.address().port;
      resolve({
        pages,
        // localhost: another site than Kiln's 127.0.0.1 (the same server answers both names).
        url: `http://localhost:${port}`,
        otherOrigin: `http://127.0.0.1:${port}`,
        stop: () => {
          server.closeAllConnections();
          return new Promise((done) => server.close(done));
        },
      });
    }),
  );
}

/**
 * A host page at `/NAME.html` with the one tag and its own script `/NAME.js`, which
 * mounts the widget with `options` (JavaScript source) and records what the widget
 * tells it in `window.seen`: its events and every raw message from the iframe.
 */
function hostPage(name, options = "{}", more = "", policy = undefined) {
  host.pages[`/${name}.html`] = [
    "text/html",
    `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Host ${name}</title></head>
<body><h1>A host page</h1><p><a href="#top" id="before">A link before the widget</a></p>
<script src="${kiln.origin}/widget.js" async></script><script src="/${name}.js"></script></body></html>`,
    policy,
  ];
  host.pages[`/${name}.js`] = [
    "text/javascript",
    `window.seen = {events: [], raw: []};
addEventListener("message", (event) => { if (event.origin === ${JSON.stringify(kiln.origin)}) seen.raw.push(String(event.data)); });
(function wait() {
  if (!window.KilnWidget) return setTimeout(wait, 10);
  KilnWidget.mount(${options}).then((widget) => {
    window.widget = widget;
    for (const name of ["ready", "open", "close", "message", "error"]) widget.on(name, (detail) => seen.events.push({name, detail}));
    ${more}
  });
})();`,
  ];
  return `${host.url}/${name}.html`;
}

/** The demo shop (embed/) as `cargo xtask serve` writes it, on the host site. */
function demoPage() {
  for (const file of ["index.html", "shop.js", "shop.css"]) {
    const text = readFileSync(new URL(file, EMBED), "utf8").replaceAll("__KILN_ORIGIN__", kiln.origin);
    const type = file.endsWith(".html") ? "text/html" : file.endsWith(".js") ? "text/javascript" : "text/css";
    host.pages[`/shop/${file === "index.html" ? "" : file}`] = [type, text];
  }
  return `${host.url}/shop/`;
}

const siteModel = () => ({ base_url: `${mock.url}/v1`, model: "gpt-4o-mini" });

/** Sets the deployment's widget.json (`null`: none, the defaults, whatever pkg/ holds). */
function deploy(settings) {
  kiln.served["widget.json"] = settings === null ? null : JSON.stringify(settings);
}

/** The widget's frame, once it is there. */
async function widgetFrame(page) {
  for (let tries = 0; tries < 200; tries += 1) {
    const frame = page.frames().find((frame) => frame.url().startsWith(`${kiln.origin}/widget.html`));
    if (frame) return frame;
    await page.waitForTimeout(25);
  }
  throw new Error("no widget iframe appeared");
}

/**
 * Polls `read(arg)` in `where` (a page or frame) until it is truthy, and returns it. (Not
 * waitForFunction: the host's and the widget's policies refuse the eval it may use.)
 */
async function until(where, read, arg, timeoutMs = 30_000) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await where.evaluate(read, arg);
    if (value) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${read}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** Waits until the host has seen event `name` whose detail passes `test`, and returns it. */
async function hostSaw(page, name, test = () => true) {
  const end = Date.now() + 30_000;
  for (;;) {
    const events = await page.evaluate(() => window.seen?.events ?? []);
    const found = events.find((event) => event.name === name && test(event.detail ?? {}));
    if (found) return found;
    if (Date.now() > end) throw new Error(`the host never saw \`${name}\`: ${JSON.stringify(events)}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

const panelHidden = () => document.querySelector("[data-kiln-widget]").shadowRoot.querySelector("#kiln-panel").hidden;
const hostFocus = () => document.querySelector("[data-kiln-widget]")?.shadowRoot.activeElement?.dataset.testid;

/** Sends `text` from the widget's message box, as typed. */
async function say(frame, text) {
  await frame.getByTestId("chat-input").fill(text);
  await frame.getByTestId("chat-input").press("Enter");
}

const replyText = (frame, index) => frame.getByTestId("chat-assistant").nth(index).getByTestId("chat-reply-text");

let consoleErrors = [];
before(async () => {
  mock = await startAimock();
  kiln = await startSite();
  kiln.origin = kiln.url.replace(/\/$/, "");
  host = await startHost();
});
// Each test is a new visitor: a fresh profile, nothing kept from the last, with Chrome's
// default for third-party storage (allowed, partitioned by top-level site).
beforeEach(async () => {
  consoleErrors = [];
  browser = await launch({ thirdPartyStorage: true });
  browser.page.on("console", (message) => {
    if (message.text().includes("Content Security Policy") || message.text().startsWith("Refused")) consoleErrors.push(message.text());
  });
  browser.page.on("pageerror", (error) => consoleErrors.push(String(error)));
});
afterEach(async () => {
  await browser?.close();
  browser = undefined;
});
after(async () => {
  await host?.stop();
  await kiln?.close();
  await mock?.stop();
});

test("one tag on a strict-CSP host: nothing heavy until opened, a reply from the site's model, Esc closes", async () => {
  const { page } = browser;
  deploy({
    providers: ["site"],
    site: siteModel(),
    agents: [{ name: "support", preamble: "You help visitors of a pottery shop (kiln-preamble-marker)." }],
  });
  await page.goto(hostPage("one-tag", `{title: "Shop helper", greeting: "Ask me anything.", agent: "support"}`));
  const launcher = page.getByTestId("kiln-launcher");
  await launcher.waitFor();
  assert.equal(await launcher.getAttribute("aria-expanded"), "false");
  // Nothing of Kiln's but widget.js until the launcher is opened.
  assert.equal(page.frames().length, 1, "no iframe before the launcher is opened");
  await launcher.click();
  const frame = await widgetFrame(page);
  await hostSaw(page, "ready", (detail) => detail.provider === "site");
  await frame.getByText("Ask me anything.").waitFor();
  assert.equal(await frame.locator(".widget-header h1").textContent(), "Shop helper");
  await say(frame, "kiln-widget-hello");
  await replyText(frame, 0).filter({ hasText: "Hello from the site's model." }).waitFor();
  const message = await hostSaw(page, "message");
  assert.equal(message.detail.text, "Hello from the site's model.");
  // The deployment's agent: its preamble before Kiln's contract, in the system message.
  const sent = (await mock.journal()).filter((entry) => JSON.stringify(entry.body ?? {}).includes("kiln-widget-hello")).at(-1);
  const system = sent.body.messages[0];
  assert.equal(system.role, "system");
  assert.ok(system.content.indexOf("kiln-preamble-marker") >= 0, "the preamble is sent");
  assert.ok(system.content.indexOf("kiln-preamble-marker") < system.content.indexOf("execute_code"), "before the contract");
  // Esc in the panel closes it and the focus goes back to the launcher.
  await frame.getByTestId("chat-input").press("Escape");
  await until(page, panelHidden);
  assert.equal(await launcher.getAttribute("aria-expanded"), "false");
  assert.equal(await page.evaluate(hostFocus), "kiln-launcher");
  assert.deepEqual(consoleErrors, [], "the strict policies refused nothing");
});

test("the site's endpoint gets the host's short-lived token; newConversation, toggle and destroy", async () => {
  const { page } = browser;
  deploy({ providers: ["site"], site: siteModel() });
  await page.goto(hostPage("token", `{open: true, getToken: async () => "tok-" + (++window.tokens)}`, "", undefined));
  await page.evaluate(() => (window.tokens = 0));
  const frame = await widgetFrame(page);
  await hostSaw(page, "ready");
  await say(frame, "kiln-widget-hello, with the site's token");
  await replyText(frame, 0).filter({ hasText: "Hello from the site's model." }).waitFor();
  const journal = await mock.journal();
  const asked = journal.filter((entry) => JSON.stringify(entry.body ?? {}).includes("with the site's token"));
  assert.ok(asked.length > 0 && asked.every((entry) => entry.headers.authorization === "[REDACTED]"), "the token went as the bearer key");
  assert.equal(await page.evaluate(() => window.tokens), 1, "one token asked for the one reply");
  // A new conversation on the host's word; toggle closes and opens; destroy removes it all.
  await page.evaluate(() => widget.newConversation());
  await frame.getByTestId("chat-welcome").waitFor();
  assert.equal(await frame.getByTestId("chat-assistant").count(), 0);
  await page.evaluate(() => widget.toggle());
  await until(page, panelHidden);
  await page.evaluate(() => widget.toggle());
  await until(page, () => !document.querySelector("[data-kiln-widget]").shadowRoot.querySelector("#kiln-panel").hidden);
  await page.evaluate(() => widget.destroy());
  assert.equal(await page.evaluate(() => document.querySelector("[data-kiln-widget]")), null);
  assert.equal(page.frames().length, 1, "the iframe is gone");
});

test("inline mode: with a container the chat fills it at once, with no launcher", async () => {
  const { page } = browser;
  deploy({ providers: ["site"], site: siteModel() });
  host.pages["/inline.html"] = [
    "text/html",
    `<!doctype html><title>Inline</title><h1>Help</h1><div id="help" style="width: 360px; height: 480px"></div>
<script src="${kiln.origin}/widget.js" async></script><script src="/inline.js"></script>`,
  ];
  host.pages["/inline.js"] = [
    "text/javascript",
    `window.seen = {events: []};
(function wait() {
  if (!window.KilnWidget) return setTimeout(wait, 10);
  KilnWidget.mount({container: "#help", title: "Help"}).then((widget) => widget.on("ready", (detail) => seen.events.push({name: "ready", detail})));
})();`,
  ];
  await page.goto(`${host.url}/inline.html`);
  const frame = await widgetFrame(page);
  await hostSaw(page, "ready");
  assert.equal(await page.getByTestId("kiln-launcher").count(), 0, "no launcher");
  const box = await page.evaluate(() => document.querySelector("#help [data-kiln-widget]").shadowRoot.querySelector("iframe").getBoundingClientRect().toJSON());
  assert.deepEqual([box.width, box.height], [360, 480]);
  await say(frame, "kiln-widget-hello");
  await replyText(frame, 0).filter({ hasText: "Hello from the site's model." }).waitFor();
});

test("a host tool round trip: read-only runs without asking, a change asks, Deny refuses", async () => {
  const { page } = browser;
  deploy({ providers: ["site"], site: siteModel(), read_only_tools_run_without_asking: true });
  await page.goto(demoPage());
  await page.getByTestId("kiln-launcher").click();
  const frame = await widgetFrame(page);
  await frame.getByTestId("chat-input").waitFor();
  // The shop's own CSS does not reach the launcher (its `button { background: hotpink }`).
  const background = await page.getByTestId("kiln-launcher").evaluate((button) => getComputedStyle(button).backgroundColor);
  assert.equal(background, "rgb(47, 93, 138)", "the launcher keeps the host's theme accent, not the host's button CSS");

  await say(frame, "kiln-widget-product");
  await replyText(frame, 0).filter({ hasText: "The Stoneware mug costs 24 EUR." }).waitFor();
  assert.equal(await frame.getByTestId("approval").count(), 0, "a read-only host tool ran without a card");

  await say(frame, "kiln-widget-cart");
  const card = frame.getByTestId("approval");
  await card.waitFor();
  assert.match(await card.getByTestId("approval-title").textContent(), /host_add_to_cart/);
  assert.equal(await page.getByTestId("cart").textContent(), "0", "nothing runs before the visitor approves");
  await card.getByTestId("approve").click();
  await page.getByTestId("cart").filter({ hasText: "2" }).waitFor();

  await say(frame, "kiln-widget-cart");
  await card.waitFor();
  await card.getByTestId("deny").click();
  await replyText(frame, 2).filter({ hasText: "You chose not to add it" }).waitFor();
  assert.equal(await page.getByTestId("cart").textContent(), "2", "a denied call did not run");
  assert.deepEqual(consoleErrors, []);
});

test("a read-only host tool asks when widget.json does not let it run alone; the finish value reaches the host", async () => {
  const { page } = browser;
  deploy({ providers: ["site"], site: siteModel() });
  await page.goto(
    hostPage(
      "tools",
      `{open: true}`,
      `widget.registerTool({name: "read_product", description: "The product", inputSchema: {type: "object"},
        annotations: {readOnlyHint: true}, execute: () => ({name: "Stoneware mug", price: 24})});
       widget.registerTool({name: "add_to_cart", description: "Add", inputSchema: {type: "object", properties: {quantity: {type: "integer"}}},
        execute: ({quantity}) => ({in_cart: quantity})});`,
    ),
  );
  const frame = await widgetFrame(page);
  await hostSaw(page, "ready");
  await say(frame, "kiln-widget-product");
  const card = frame.getByTestId("approval");
  await card.waitFor();
  assert.equal(await card.getByTestId("approval-category").textContent(), "read");
  await card.getByTestId("approve").click();
  await replyText(frame, 0).filter({ hasText: "The Stoneware mug costs 24 EUR." }).waitFor();
  await say(frame, "kiln-widget-cart");
  await card.waitFor();
  await card.getByTestId("approve").click();
  const finished = await hostSaw(page, "message", (detail) => detail.value?.in_cart === 2);
  assert.deepEqual(finished.detail.value, { in_cart: 2 });
  // Unregistered, a tool leaves the agent's belt from the next turn: the contract the
  // model reads names the one left.
  await page.evaluate(() => widget.unregisterTool("add_to_cart"));
  await say(frame, "kiln-widget-hello, after unregistering");
  await hostSaw(page, "message", (detail) => detail.text === "Hello from the site's model.");
  const sent = (await mock.journal()).filter((entry) => JSON.stringify(entry.body ?? {}).includes("after unregistering")).at(-1);
  const contract = sent.body.messages[0].content;
  assert.ok(contract.includes("host_read_product") && !contract.includes("host_add_to_cart"), contract.slice(0, 2000));
});

test("refusals: another window, an unknown call id, malformed and wrong-version messages; nothing else changes", async () => {
  const { page } = browser;
  deploy({ providers: ["site"], site: siteModel() });
  // widget.js keeps its iframe in a shadow root, out of `window.frames`, where no other
  // frame can find it. A page that frames widget.html itself, in its document, lets any
  // frame on it reach the widget: this one does, and speaks the protocol itself. It also
  // frames a stranger, of a third origin, that posts into the widget.
  host.pages["/direct.html"] = [
    "text/html",
    `<!doctype html><title>Direct</title><iframe id="kiln" src="${kiln.origin}/widget.html"></iframe><script src="/direct.js"></script>`,
    `script-src 'self'; frame-src ${kiln.origin} ${host.otherOrigin}`,
  ];
  host.pages["/direct.js"] = [
    "text/javascript",
    `window.seen = [];
const kiln = document.getElementById("kiln");
addEventListener("message", (event) => { if (event.source === kiln.contentWindow) seen.push(JSON.parse(event.data).msg); });
window.post = (data) => kiln.contentWindow.postMessage(data, ${JSON.stringify(kiln.origin)});
kiln.addEventListener("load", () => post(JSON.stringify({v: 3001, msg: {type: "hello", options: {}}})));`,
  ];
  host.pages["/third.html"] = ["text/html", `<!doctype html><script src="/third.js"></script>`];
  host.pages["/third.js"] = [
    "text/javascript",
    `parent.frames[0].postMessage(JSON.stringify({v: 3001, msg: {type: "send", text: "kiln-widget-hello from a stranger"}}), "*");`,
  ];
  await page.goto(`${host.url}/direct.html`);
  await until(page, () => seen.some((msg) => msg.type === "ready"));
  const frame = await widgetFrame(page);
  const post = (data) => page.evaluate((data) => window.post(data), data);
  const rejected = async (count) => {
    await until(page, (count) => seen.filter((msg) => msg.type === "rejected").length >= count, count);
    return page.evaluate(() => seen.filter((msg) => msg.type === "rejected").map((msg) => msg.reason));
  };
  await post(JSON.stringify({ v: 3001, msg: { type: "tool_result", call: 999, value: 1 } }));
  assert.match((await rejected(1))[0], /call 999 was ignored: the widget is not waiting for such a call/);
  await post("not json");
  assert.match((await rejected(2))[1], /not a Kiln protocol message/);
  const stale = 3000;
  await post(JSON.stringify({ v: stale, msg: { type: "open" } }));
  assert.match((await rejected(3))[2], /protocol version `3000` is not the expected `3001`/);
  await post(JSON.stringify({ v: 3001, msg: { type: "launch" } }));
  assert.match((await rejected(4))[3], /unknown variant `launch`/);
  await post({ type: "open" });
  assert.match((await rejected(5))[4], /not JSON text/);
  await post(JSON.stringify({ v: 3001, msg: { type: "hello", options: {} } }));
  assert.match((await rejected(6))[5], /`hello` came again/);
  // The stranger, a frame of a third origin on the same page.
  await page.evaluate((src) => {
    const stranger = document.createElement("iframe");
    stranger.src = src;
    document.body.append(stranger);
  }, `${host.otherOrigin}/third.html`);
  const stranger = (await rejected(7))[6];
  assert.ok(stranger.includes(`another window (origin \`${host.otherOrigin}\`) was refused`), stranger);
  assert.equal(await frame.getByTestId("chat-assistant").count(), 0, "the stranger's message was not sent");
  // Nothing else changed: the widget still answers its host.
  await post(JSON.stringify({ v: 3001, msg: { type: "send", text: "kiln-widget-hello" } }));
  await until(page, () => seen.some((msg) => msg.type === "message" && msg.text === "Hello from the site's model."));
  assert.equal(await frame.getByTestId("chat-assistant").count(), 1);
  // Two messages sent at once are both taken, in order, one turn after the other.
  await post(JSON.stringify({ v: 3001, msg: { type: "send", text: "kiln-widget-hello, first" } }));
  await post(JSON.stringify({ v: 3001, msg: { type: "send", text: "kiln-widget-hello, second" } }));
  await until(page, () => seen.filter((msg) => msg.type === "message").length === 3);
  const said = await frame.getByTestId("chat-user").locator(".text").allTextContents();
  assert.deepEqual(said, ["kiln-widget-hello", "kiln-widget-hello, first", "kiln-widget-hello, second"]);
});

test("a host origin not in widget.json gets a widget that says so and does nothing else", async () => {
  const { page } = browser;
  deploy({ origins: ["https://shop.example"], providers: ["site"], site: siteModel() });
  await page.goto(hostPage("not-listed", `{open: true}`));
  const frame = await widgetFrame(page);
  const refused = await hostSaw(page, "error", (detail) => detail.kind === "refused");
  assert.match(refused.detail.message, /not set up to be embedded on http:\/\/localhost:\d+: its widget.json does not list that origin/);
  await frame.getByTestId("widget-refused").waitFor();
  assert.equal(await frame.getByTestId("chat-input").count(), 0);
  assert.deepEqual(await frame.evaluate(async () => (await indexedDB.databases()).length), 0, "no store was opened");
  // A widget.json that does not read serves no host either, and says what is wrong with it.
  kiln.served["widget.json"] = `{"origins": ["*"], "provider": "site"}`;
  await page.goto(hostPage("broken", `{open: true}`));
  const broken = await hostSaw(page, "error", (detail) => detail.kind === "refused");
  assert.match(broken.detail.message, /^This Kiln's settings are broken: widget.json: unknown field `provider`/);
  await (await widgetFrame(page)).getByTestId("widget-refused").waitFor();
});

test("the host page cannot read the widget's storage, and the visitor's key never reaches the host", async () => {
  const { page } = browser;
  deploy({ providers: ["visitor", "browser"] });
  await page.goto(hostPage("own-key", `{open: true, provider: "visitor"}`));
  const frame = await widgetFrame(page);
  await hostSaw(page, "ready", (detail) => detail.provider === "visitor");
  const providers = frame.getByTestId("providers");
  // The chat mounts above the panel once the providers are read: clicking the
  // panel before that could land where the chat then pushes it (it did once in CI).
  await frame.getByTestId("chat-input").waitFor();
  await providers.locator("summary").click();
  await frame.locator('[data-testid="providers"][open]').waitFor();
  const key = "sk-widget-visitor-7f3a9c";
  await frame.getByTestId("provider-name").fill("My OpenAI");
  await frame.getByTestId("provider-kind").selectOption("openai");
  await frame.getByTestId("provider-base-url").fill(`${mock.url}/v1`);
  await frame.getByTestId("provider-key").fill(key);
  await frame.getByTestId("provider-test").click();
  await frame.locator('[data-testid="provider-status"] :is(.ok, .failure)').waitFor();
  assert.match(await frame.getByTestId("provider-status").textContent(), /Connected/);
  await frame.getByTestId("provider-model").selectOption("gpt-4o-mini");
  await frame.getByTestId("provider-save").click();
  await frame.getByTestId("provider-status").filter({ hasText: "Saved" }).waitFor();
  await say(frame, "kiln-widget-hello, with my own key");
  await replyText(frame, 0).filter({ hasText: "Hello from the site's model." }).waitFor();
  const journal = await mock.journal();
  const asked = journal.filter((entry) => JSON.stringify(entry.body ?? {}).includes("with my own key"));
  assert.ok(asked.length > 0 && asked.every((entry) => entry.headers.authorization === "[REDACTED]"), `a key went with the request (aimock shows it redacted): ${JSON.stringify(journal.map((e) => [e.path, e.headers?.authorization]))}`);
  const raw = await page.evaluate(() => seen.raw);
  assert.ok(raw.length > 0);
  assert.ok(!raw.some((text) => text.includes(key)), "no message to the host carries the key");
  // The widget keeps its workspace in its own (Kiln's, partitioned) storage...
  const widgetDatabases = await frame.evaluate(async () => (await indexedDB.databases()).map((db) => db.name));
  assert.ok(widgetDatabases.length > 0, "the widget has its store");
  // ...which the host page, on its own origin, cannot see by any name.
  const hostLooks = await page.evaluate(async (names) => {
    const listed = (await indexedDB.databases()).map((db) => db.name);
    const opened = [];
    for (const name of names) {
      const had = await new Promise((resolve) => {
        const request = indexedDB.open(name);
        request.onupgradeneeded = () => {
          request.transaction.abort();
          resolve(false);
        };
        request.onsuccess = () => {
          request.result.close();
          resolve(true);
        };
        request.onerror = () => resolve(false);
      });
      if (had) opened.push(name);
    }
    const root = await navigator.storage.getDirectory();
    const files = [];
    for await (const name of root.keys()) files.push(name);
    return { listed, opened, files };
  }, widgetDatabases);
  assert.deepEqual(hostLooks, { listed: [], opened: [], files: [] });
});

test("where the browser blocks third-party storage the widget still answers, and says it keeps nothing", async () => {
  // Debian's Chromium as it starts by default: third-party cookies, and with them an
  // embedded frame's storage, blocked.
  await browser.close();
  browser = await launch();
  const { page } = browser;
  deploy({ providers: ["site"], site: siteModel() });
  await page.goto(hostPage("blocked", `{open: true}`));
  const frame = await widgetFrame(page);
  await frame.getByTestId("widget-note").filter({ hasText: "keeps nothing for chats embedded in other sites" }).waitFor();
  await say(frame, "kiln-widget-hello");
  await replyText(frame, 0).filter({ hasText: "Hello from the site's model." }).waitFor();
});

test("keyboard only: Tab to the launcher, open, type, approve with Enter, Esc; the phone-width panel", async () => {
  const { page } = browser;
  deploy({ providers: ["site"], site: siteModel() });
  await page.setViewportSize({ width: 390, height: 844 });
  try {
    await page.goto(demoPage());
    await page.getByTestId("kiln-launcher").waitFor();
    await page.keyboard.press("Tab");
    for (let tries = 0; tries < 10 && (await page.evaluate(hostFocus)) !== "kiln-launcher"; tries += 1) {
      await page.keyboard.press("Tab");
    }
    await page.keyboard.press("Enter");
    const frame = await widgetFrame(page);
    await until(frame, () => document.activeElement?.id === "chat-input");
    await page.keyboard.type("kiln-widget-cart");
    await page.keyboard.press("Enter");
    await frame.getByTestId("approval").waitFor();
    await until(frame, () => document.activeElement?.dataset.testid === "approve");
    await page.keyboard.press("Enter");
    await page.getByTestId("cart").filter({ hasText: "2" }).waitFor();
    // The panel fills the phone's screen.
    const box = await page.evaluate(() => document.querySelector("[data-kiln-widget]").shadowRoot.querySelector("#kiln-panel").getBoundingClientRect().toJSON());
    assert.deepEqual([box.x, box.y, box.width, box.height], [0, 0, 390, 844]);
    await page.screenshot({ path: process.env.KILN_SHOTS ? `${process.env.KILN_SHOTS}/widget-phone.png` : "/tmp/kiln-widget-phone.png" });
    await frame.getByTestId("chat-input").focus();
    await page.keyboard.press("Escape");
    await until(page, () => document.querySelector("[data-kiln-widget]").shadowRoot.activeElement?.dataset.testid === "kiln-launcher");
  } finally {
    await page.setViewportSize({ width: 1280, height: 720 });
  }
});

test("by default the widget's model is Kiln's own, in the visitor's browser: download progress, then a reply", async () => {
  const { page } = browser;
  deploy(null);
  await page.goto(hostPage("own-model", `{open: true}`));
  const frame = await widgetFrame(page);
  await hostSaw(page, "ready", (detail) => detail.provider === "browser");
  assert.equal(await frame.getByTestId("chat-provider").inputValue(), "In-browser SmolLM2 (135M)");
  await say(frame, "What is the capital of France?");
  const reply = frame.getByTestId("chat-assistant").first();
  await reply.getByTestId("chat-model-status").filter({ hasText: /^Downloading the in-browser model: / }).waitFor({ timeout: 60_000 });
  const deadline = Date.now() + 240_000;
  while ((await frame.getByTestId("chat-stop").count()) > 0) {
    assert.ok(Date.now() < deadline, "the in-browser model's turn did not end in 240 s");
    await page.waitForTimeout(250);
  }
  assert.equal(await frame.getByTestId("chat-error").count(), 0, "the turn ended without an error");
  const message = await hostSaw(page, "message");
  assert.ok(message.detail.text.trim().length > 0, "the host got the reply's words");
});

test("widget.js is small and loading it adds no long task to the host page", async () => {
  const bytes = readFileSync(`${PKG}/widget.js`);
  const gzipped = gzipSync(bytes, { level: 9 }).length;
  console.log(`widget.js: ${bytes.length} B, ${gzipped} B gzip`);
  assert.ok(gzipped <= 10 * 1024, `widget.js is ${gzipped} B gzipped, more than 10 KB`);
  const { page } = browser;
  deploy(null);
  host.pages["/quiet.js"] = [
    "text/javascript",
    `window.longTasks = [];
new PerformanceObserver((list) => longTasks.push(...list.getEntries().map((entry) => entry.duration))).observe({type: "longtask", buffered: true});`,
  ];
  host.pages["/quiet.html"] = [
    "text/html",
    `<!doctype html><title>Quiet</title><script src="/quiet.js"></script><script src="${kiln.origin}/widget.js" async></script>`,
  ];
  await page.goto(`${host.url}/quiet.html`);
  await until(page, () => Boolean(window.KilnWidget));
  await page.evaluate(() => KilnWidget.mount({}));
  await page.waitForTimeout(300);
  assert.deepEqual(await page.evaluate(() => window.longTasks), [], "no long task on the host's main thread");
});
