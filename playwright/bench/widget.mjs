// The embedded widget's figures in headless Chromium, Kiln served from
// http://127.0.0.1:PORT and the host page from http://localhost:PORT2 (another site,
// as a real embed is): widget.js's size; the time from the launcher's click to an
// interactive panel, on a fresh profile (cold) and again with the HTTP cache warm;
// the host main thread's long tasks over loading, opening and one reply (aim: none);
// and a host tool's round trip through the iframe beside a page tool's through
// kiln.run (the interval between consecutive calls of one program; aim ≤ 1.5×).
// Prints JSON lines that `cargo xtask bench` shows. Not a test: it asserts nothing
// about time.
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { launch } from "../lib/browser.mjs";
import { startAimock } from "../lib/servers.mjs";
import { startSite } from "../lib/site.mjs";

const CALLS = 100;
const WARM_OPENS = Number(process.env.KILN_BENCH_WIDGET_OPENS ?? 5);

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}
const round = (ms) => Math.round(ms * 100) / 100;
const print = (figure) => console.log(JSON.stringify(figure));

const bytes = readFileSync(join(process.env.KILN_PKG, "widget.js"));
print({ figure: "widget.js (bytes gzip -9; aim ≤ 10,240)", value: gzipSync(bytes, { level: 9 }).length, raw: bytes.length });

const mock = await startAimock();
const kiln = await startSite();
const origin = kiln.url.replace(/\/$/, "");
kiln.served["widget.json"] = JSON.stringify({
  providers: ["site"],
  site: { base_url: `${mock.url}/v1`, model: "gpt-4o-mini" },
  read_only_tools_run_without_asking: true,
});
const hostScript = `window.longTasks = [];
new PerformanceObserver((list) => longTasks.push(...list.getEntries().map((entry) => entry.duration))).observe({type: "longtask", buffered: true});
window.calls = [];
function mount() {
  KilnWidget.mount({}).then((widget) => {
    window.widget = widget;
    window.replies = [];
    widget.on("message", (detail) => replies.push(detail));
    widget.registerTool({name: "ping", description: "Answers its arguments.", inputSchema: {type: "object"},
      annotations: {readOnlyHint: true}, execute: (args) => { calls.push(performance.now()); return args; }});
  });
}
if (window.KilnWidget) mount(); else addEventListener("kilnwidget:load", mount);`;
const server = createServer((request, response) => {
  const path = new URL(request.url, "http://x").pathname;
  const [type, body] =
    path === "/host.js"
      ? ["text/javascript", hostScript]
      : ["text/html", `<!doctype html><title>Host</title><script src="/host.js"></script><script src="${origin}/widget.js" async></script>`];
  // The host's policy as the README publishes it (frame-src also lets the bench's echo frame in).
  response.writeHead(200, { "content-type": type, "content-security-policy": `script-src 'self' ${origin}; frame-src ${origin}` });
  response.end(body);
});
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const hostUrl = `http://localhost:${server.address().port}/`;

/** Clicks the launcher; resolves to the ms until the widget's chat is interactive, and the frame. */
async function open(page) {
  await page.goto(hostUrl);
  await page.getByTestId("kiln-launcher").waitFor();
  await page.waitForFunction(() => window.widget);
  const clicked = await page.evaluate(() => {
    const at = performance.timeOrigin + performance.now();
    document.querySelector("[data-kiln-widget]").shadowRoot.querySelector("button").click();
    return at;
  });
  let frame;
  for (;;) {
    frame = page.frames().find((candidate) => candidate.url().startsWith(`${origin}/widget.html`));
    const ready = await frame
      ?.evaluate(() => {
        const mark = performance.getEntriesByName("kiln:widget-interactive")[0];
        return mark ? performance.timeOrigin + mark.startTime : null;
      })
      .catch(() => null);
    if (ready) return { ms: ready - clicked, frame };
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const browser = await launch({ thirdPartyStorage: true });
try {
  const { page } = browser;
  const cold = await open(page);
  print({ figure: "launcher click → interactive panel, cold (ms)", value: round(cold.ms) });
  // One reply, then the host's long tasks since its load.
  await cold.frame.getByTestId("chat-input").fill("kiln-widget-hello");
  await cold.frame.getByTestId("chat-input").press("Enter");
  await page.waitForFunction(() => window.replies.length > 0);
  const longTasks = await page.evaluate(() => window.longTasks);
  print({ figure: "host main-thread long tasks over load, open and one reply (count; aim 0)", value: longTasks.length, durations: longTasks.map(round) });

  const warm = [];
  for (let n = 0; n < WARM_OPENS; n++) warm.push((await open(page)).ms);
  print({ figure: `launcher click → interactive panel, HTTP cache warm (median of ${WARM_OPENS} ms)`, value: round(median(warm)) });

  // A host tool's round trip: one program calling it CALLS times.
  const { frame } = await open(page);
  await frame.getByTestId("chat-input").fill("kiln-widget-bench");
  await frame.getByTestId("chat-input").press("Enter");
  await page.waitForFunction(() => window.replies.some((reply) => reply.value?.calls === 100), null, { timeout: 120_000 });
  const hostCalls = await page.evaluate(() => window.calls);
  const hostGaps = hostCalls.slice(1).map((at, n) => at - hostCalls[n]);

  // A page tool's through kiln.run, on a page of Kiln's origin.
  await page.goto(`${origin}/kiln.js`);
  const pageGaps = await page.evaluate(async (CALLS) => {
    const { Kiln } = await import(new URL("kiln.js", location.href).href);
    const kiln = await Kiln.load({ poolSize: 1 });
    const calls = [];
    const ping = { description: "Answers its arguments.", input_schema: { type: "object" }, call: async (args) => (calls.push(performance.now()), args) };
    await kiln.run({ code: `for (let i = 0; i < ${CALLS}; i++) await tools.ping({i}); return ${CALLS}`, tools: { ping } });
    return calls.slice(1).map((at, n) => at - calls[n]);
  }, CALLS);
  const host = median(hostGaps);
  const direct = median(pageGaps);
  // The floor under the host tool's trip: a postMessage round trip between the host page
  // and a frame of Kiln's origin (another site, so another process), echoing.
  kiln.served["echo.html"] = `<!doctype html><script src="echo.js"></script>`;
  kiln.served["echo.js"] = `addEventListener("message", (event) => event.source.postMessage(event.data, event.origin));`;
  await page.goto(hostUrl);
  const echoes = await page.evaluate(async ([origin, CALLS]) => {
    const frame = document.createElement("iframe");
    frame.src = `${origin}/echo.html`;
    await new Promise((resolve) => {
      frame.onload = resolve;
      document.body.append(frame);
    });
    const times = [];
    for (let n = 0; n < CALLS; n++) {
      const t0 = performance.now();
      await new Promise((resolve) => {
        addEventListener("message", resolve, { once: true });
        frame.contentWindow.postMessage(JSON.stringify({ n }), origin);
      });
      times.push(performance.now() - t0);
    }
    return times;
  }, [origin, CALLS]);
  print({ figure: "the floor: a postMessage round trip between the host and a frame of Kiln's origin (median ms)", value: round(median(echoes)) });
  print({
    figure: `host tool round trip through the widget vs a page tool through kiln.run (median ms per call of ${CALLS}; aim ≤ 1.5×)`,
    value: round(host),
    peer: round(direct),
    ratio: round(host / direct),
  });
} finally {
  await browser.close();
  server.close();
  await kiln.close();
  await mock.stop();
}
