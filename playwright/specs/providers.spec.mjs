// LLM providers from the browser: the page API (`kiln.chat`, `kiln.models`)
// streams through the OpenAI-compatible, Anthropic and Ollama adapters over
// `fetch` against real servers on 127.0.0.1 — aimock for every wire format and
// error, and SmolLM2-135M served by llama.cpp (xllamacpp) for a real model.
import assert from "node:assert/strict";
import http from "node:http";
import { after, before, test } from "node:test";
import { APP_URL, useApp } from "../lib/browser.mjs";
import { freePort, startAimock, startLocalModel } from "../lib/servers.mjs";

const app = useApp();
let mock;
let local;

before(async () => {
  mock = await startAimock();
  local = await startLocalModel();
});
after(async () => {
  await mock?.stop();
  await local?.stop();
});

const KINDS = {
  openai: (root) => ({ kind: "openai", base_url: `${root}/v1`, key: "sk-test-openai" }),
  anthropic: (root) => ({ kind: "anthropic", base_url: root, key: "sk-ant-test" }),
  ollama: (root) => ({ kind: "ollama", base_url: root }),
};

async function load(page) {
  await page.evaluate(async () => {
    const { Kiln } = await import("./kiln.js");
    window.kiln ??= await Kiln.load();
  });
}

/** One `kiln.chat` in the page: `{message, events}` or `{error: {name, code, message, hint}}`. */
async function chat(request, { abortAfterDeltas } = {}) {
  const { page } = app();
  await load(page);
  return page.evaluate(
    async ({ request, abortAfterDeltas }) => {
      const events = [];
      const controller = new AbortController();
      let deltas = 0;
      try {
        const message = await window.kiln.chat({
          ...request,
          signal: controller.signal,
          onEvent: (event) => {
            events.push(event);
            if (event.type === "text_delta" && ++deltas === abortAfterDeltas) controller.abort();
          },
        });
        return { message, events };
      } catch (error) {
        return { error: { name: error.name, code: error.code, message: error.message, hint: error.hint }, events };
      }
    },
    { request, abortAfterDeltas },
  );
}

const user = (text) => [{ role: "user", text }];
const options = (model = "gpt-4o-mini") => ({ model, max_tokens: 64 });

for (const [kind, provider] of Object.entries(KINDS)) {
  test(`${kind}: text streams as deltas, then one stop and the whole message`, async () => {
    const { message, events, error } = await chat({ provider: provider(mock.url), messages: user("kiln-hello"), options: options() });
    assert.equal(error, undefined, JSON.stringify(error));
    const types = events.map((event) => event.type);
    assert.ok(types.filter((t) => t === "text_delta").length >= 1, types.join());
    assert.deepEqual(types.slice(-2), ["stop", "done"]);
    assert.equal(types.filter((t) => t === "stop").length, 1);
    const streamed = events.filter((e) => e.type === "text_delta").map((e) => e.text).join("");
    assert.equal(streamed, "Hello from the mock.");
    assert.equal(message.text, "Hello from the mock.");
    assert.equal(message.stop.reason, "end_turn");
    if (kind !== "ollama") assert.ok(message.usage.output_tokens > 0, JSON.stringify(message.usage));
  });

  test(`${kind}: a streamed tool call is assembled, and the follow-up turn answers`, async () => {
    const first = await chat({
      provider: provider(mock.url),
      messages: user("kiln-weather"),
      tools: [{ name: "get_weather", description: "Weather for a city.", input_schema: { type: "object", properties: { city: { type: "string" } } } }],
      options: options(),
    });
    assert.equal(first.error, undefined, JSON.stringify(first.error));
    assert.equal(first.message.stop.reason, "tool_use");
    assert.deepEqual(first.message.tool_calls.map((c) => [c.name, c.arguments]), [["get_weather", { city: "Paris", units: "celsius" }]]);
    const types = first.events.map((e) => e.type);
    assert.ok(types.indexOf("tool_call_start") < types.indexOf("tool_call_end"), types.join());
    const call = first.message.tool_calls[0];
    const second = await chat({
      provider: provider(mock.url),
      messages: [
        ...user("kiln-weather"),
        { role: "assistant", text: "", tool_calls: [call] },
        { role: "tool", call_id: call.id, name: call.name, content: '{"degrees":18}' },
      ],
      options: options(),
    });
    assert.equal(second.error, undefined, JSON.stringify(second.error));
    assert.equal(second.message.text, "It is 18 degrees in Paris.");
  });

  test(`${kind}: the model list names real model ids`, async () => {
    const { page } = app();
    await load(page);
    const models = await page.evaluate((p) => window.kiln.models(p), provider(mock.url));
    const ids = models.map((m) => m.id);
    for (const id of ["gpt-4o-mini", "claude-sonnet-4-5", "llama3.2"]) assert.ok(ids.includes(id), ids.join());
  });
}

test("errors are typed and say what to do: key, model, rate limit, overflow, cut stream, network", async () => {
  const openai = KINDS.openai(mock.url);
  const cases = [
    [{ messages: user("kiln-401") }, "key_rejected", /the key was rejected \(HTTP 401\): Incorrect API key provided/, /API key/],
    [{ messages: user("kiln-hello"), options: options("no-such-model") }, "model_not_found", /model `no-such-model` not found/, /model list/],
    [{ messages: user("kiln-overflow") }, "context_overflow", /does not fit the model's context window/, /compact/],
    [{ messages: user("kiln-cut") }, "stream", /cut off after \d+ events/, undefined],
    [{ messages: user("kiln-500") }, "server_error", /server error \(HTTP 500\).*after 3 retries/, undefined],
  ];
  for (const [request, code, message, hint] of cases) {
    const { error } = await chat({ provider: openai, options: options(), ...request });
    assert.ok(error, `${code}: expected an error`);
    assert.equal(error.name, "ProviderError");
    assert.equal(error.code, code, error.message);
    assert.match(error.message, message);
    assert.match(error.message, /^OpenAI-compatible at http:\/\/127\.0\.0\.1:\d+\/v1\/chat\/completions \(model `[^`]+`\)/);
    if (hint) assert.match(error.hint, hint);
  }
  const down = await freePort();
  const { error } = await chat({ provider: KINDS.ollama(`http://127.0.0.1:${down}`), messages: user("hi"), options: options() });
  assert.equal(error.code, "network");
  assert.match(error.hint, /OLLAMA_ORIGINS/);
});

test("a rate limit is retried and then served", async () => {
  const started = Date.now();
  const { message, error } = await chat({ provider: KINDS.anthropic(mock.url), messages: user("kiln-429"), options: options() });
  assert.equal(error, undefined, JSON.stringify(error));
  assert.equal(message.text, "Served after a wait.");
  // The browser cannot read Retry-After (aimock does not expose it), so the backoff waits.
  assert.ok(Date.now() - started >= 400, `${Date.now() - started} ms`);
});

test("Stop aborts mid-stream: the request is cut and the turn ends with an aborted stop", async () => {
  const { message, events, error } = await chat(
    { provider: KINDS.openai(mock.url), messages: user("kiln-slow"), options: options() },
    { abortAfterDeltas: 2 },
  );
  assert.equal(error, undefined, JSON.stringify(error));
  assert.equal(message.stop.reason, "aborted");
  assert.match(message.stop.message, /stopped by the person/);
  assert.ok(message.text.length > 0 && !message.text.endsWith("twenty."), message.text);
  assert.deepEqual(events.map((e) => e.type).slice(-2), ["stop", "done"]);
});

test("the run budget refuses a turn it cannot cover, visibly and without sending it", async () => {
  const before = (await mock.journal()).length;
  const { message, events, error } = await chat({
    provider: KINDS.openai(mock.url),
    messages: user("kiln-hello"),
    options: { model: "gpt-4o", max_tokens: 100000 },
    budget: { max_usd: 0.01 },
  });
  assert.equal(error, undefined, JSON.stringify(error));
  assert.equal(message.stop.reason, "budget");
  assert.match(message.stop.message, /cannot cover this turn/);
  assert.deepEqual(events.map((e) => e.type), ["stop", "done"]);
  assert.equal(message.spend.turns, 0);
  assert.equal((await mock.journal()).length, before, "nothing was sent");
});

test("one budget shared by the turns of a run: the second turn past its turn count is refused, and spend adds up", async () => {
  const { page } = app();
  await load(page);
  const outcome = await page.evaluate(async (root) => {
    const budget = window.kiln.budget({ max_usd: 1, max_turns: 1 });
    const provider = { kind: "openai", base_url: `${root}/v1`, key: "k" };
    const ask = () =>
      window.kiln.chat({ provider, messages: [{ role: "user", text: "kiln-hello" }], options: { model: "gpt-4o-mini", max_tokens: 64 }, budget });
    const first = await ask();
    const second = await ask();
    // The page may abort its controller after a turn ended: no listener is left to run.
    const controller = new AbortController();
    await window.kiln.chat({ provider, messages: [{ role: "user", text: "kiln-hello" }], options: { model: "gpt-4o-mini", max_tokens: 64 }, signal: controller.signal });
    controller.abort();
    return { first: first.stop.reason, second: second.stop, spend: budget.spend() };
  }, mock.url);
  assert.equal(outcome.first, "end_turn");
  assert.equal(outcome.second.reason, "turns");
  assert.equal(outcome.second.message, "the run has used its only turn");
  assert.equal(outcome.spend.turns, 1);
  assert.ok(outcome.spend.spent_usd > 0, JSON.stringify(outcome.spend));
  assert.equal(outcome.spend.exhausted, "turns");
  assert.deepEqual(app().errors, []);
});

test("the main thread stays free: no task over 50 ms while a program makes 200 tool calls or a chat reply streams", async () => {
  // A page of its own that loads only the page API: the app's own start-up is not measured here.
  const page = await app().context.newPage();
  await page.goto(new URL("kiln.js", APP_URL).href);
  await page.evaluate(async () => {
    const { Kiln } = await import(new URL("kiln.js", location.href).href);
    window.kiln = await Kiln.load({ poolSize: 1 });
  });
  const seen = await page.evaluate(async (root) => {
    const tasks = [];
    const observer = new PerformanceObserver((list) => tasks.push(...list.getEntries().map((entry) => Math.round(entry.duration))));
    observer.observe({ type: "longtask" });
    const run = await window.kiln.run({
      code: "let n = 0;\nfor (let i = 0; i < 200; i++) n += (await tools.echo({ i })).i;\nreturn n;",
      tools: { echo: { description: "Returns its arguments.", input_schema: { type: "object" }, call: async (args) => args } },
    });
    let deltas = 0;
    const message = await window.kiln.chat({
      provider: { kind: "openai", base_url: `${root}/v1`, key: "k" },
      // Streamed in 6-character chunks, 50 ms apart.
      messages: [{ role: "user", text: "kiln-slow" }],
      options: { model: "gpt-4o-mini", max_tokens: 64 },
      onEvent: (event) => { deltas += event.type === "text_delta" ? 1 : 0; },
    });
    const during = tasks.length;
    // The control: one task of 80 ms on purpose, which the observer must see.
    await new Promise((resolve) => setTimeout(() => { const start = performance.now(); while (performance.now() - start < 80); resolve(); }, 0));
    await new Promise((resolve) => setTimeout(resolve, 200));
    observer.disconnect();
    return { value: run.structuredContent.value, calls: run.structuredContent.call_count, stop: message.stop.reason, deltas, during, tasks };
  }, mock.url);
  assert.equal(seen.value, 19900, JSON.stringify(seen));
  assert.equal(seen.calls, 200);
  assert.equal(seen.stop, "end_turn");
  assert.ok(seen.deltas > 1, JSON.stringify(seen));
  assert.equal(seen.during, 0, `long tasks on the main thread: ${JSON.stringify(seen.tasks)}`);
  assert.equal(seen.tasks.length, 1, `the observer sees the 80 ms control task: ${JSON.stringify(seen.tasks)}`);
  assert.ok(seen.tasks[0] >= 80, JSON.stringify(seen.tasks));
  await page.close();
});

test("bad requests are TypeErrors naming the field", async () => {
  const { page } = app();
  await load(page);
  const messages = await page.evaluate(async () => {
    const tries = [
      {},
      { provider: { kind: "gemini", base_url: "http://x" }, messages: [], options: { model: "m", max_tokens: 1 } },
      { provider: { kind: "openai", base_url: "http://x" }, messages: [{ role: "robot", text: "hi" }], options: { model: "m", max_tokens: 1 } },
      { provider: { kind: "openai", base_url: "http://x" }, messages: [{ role: "user", text: "hi" }] },
      { provider: { kind: "openai", base_url: "http://x" }, messages: [{ role: "user", text: "hi" }], options: { model: "m", max_tokens: 1 }, signal: 5 },
    ];
    const out = [];
    for (const request of tries) {
      try {
        await window.kiln.chat(request);
        out.push("resolved");
      } catch (error) {
        out.push(`${error.name}: ${error.message}`);
      }
    }
    return out;
  });
  assert.match(messages[0], /^TypeError: kiln\.chat: `provider` is missing/);
  assert.match(messages[1], /^TypeError: kiln\.chat: `provider` is not valid \(unknown variant `gemini`/);
  assert.match(messages[2], /^TypeError: kiln\.chat: `messages` is not valid \(unknown variant `robot`/);
  assert.match(messages[3], /^TypeError: kiln\.chat: `options` is missing/);
  assert.match(messages[4], /^TypeError: kiln\.chat: `signal` must be an AbortSignal/);
});

for (const kind of ["openai", "anthropic"]) {
  test(`the local model (SmolLM2-135M on llama.cpp) streams through the ${kind} adapter`, async () => {
    const base = kind === "openai" ? `${local.url}/v1` : local.url;
    const { message, events, error } = await chat({
      provider: { kind, base_url: base },
      messages: [{ role: "system", text: "You are brief." }, ...user("Say hello.")],
      options: { model: local.model, max_tokens: 16 },
      budget: { max_turns: 1 },
    });
    assert.equal(error, undefined, JSON.stringify(error));
    assert.ok(events.filter((e) => e.type === "text_delta").length > 1, "several deltas");
    assert.ok(message.text.length > 0);
    assert.ok(message.usage.output_tokens > 0, JSON.stringify(message.usage));
    // The turn is booked with both sides. llama.cpp's Anthropic stream now and then
    // starts without its `message_start` (the only event carrying the input count, CI
    // saw it once); the input is then Kiln's estimate and the call says so.
    const [call] = message.spend.calls;
    assert.ok(call.usage.input_tokens > 0 && call.usage.output_tokens > 0, JSON.stringify(call));
    if (kind === "openai" || message.usage.input_tokens > 0) {
      assert.deepEqual(call.usage, message.usage);
      assert.ok(!call.estimated, JSON.stringify(call));
    } else {
      assert.equal(call.estimated, true);
    }
    assert.ok(["end_turn", "max_tokens"].includes(message.stop.reason), message.stop.reason);
  });
}

/**
 * A provider on 127.0.0.1 that answers CORS and then `answer(request, body)`; it records the
 * head of every request it gets (preflights included).
 */
async function corsServer(answer) {
  const seen = [];
  const server = http.createServer((request, response) => {
    let body = "";
    request.on("data", (chunk) => (body += chunk));
    request.on("end", () => {
      seen.push({ method: request.method, url: request.url, headers: request.headers });
      const cors = {
        "access-control-allow-origin": "*",
        "access-control-allow-headers": "*",
        "access-control-allow-methods": "*",
        "access-control-expose-headers": "*",
      };
      if (request.method === "OPTIONS") return response.writeHead(204, cors).end();
      const [status, headers, text] = answer(request, body);
      response.writeHead(status, { ...cors, ...headers }).end(text);
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    seen,
    stop: () => new Promise((resolve) => (server.closeAllConnections(), server.close(resolve))),
  };
}

test("a provider's key goes to no other origin and comes back from nowhere", async () => {
  const key = "sk-ant-browser-secret-9191";
  // A redirect to another origin: refused, and that origin hears nothing.
  const other = await corsServer(() => [200, { "content-type": "application/json" }, "{}"]);
  const redirecting = await corsServer(() => [307, { location: `${other.url}/steal` }, ""]);
  // An error that quotes the key it was sent.
  const echoing = await corsServer((request) => [
    401,
    { "content-type": "application/json" },
    JSON.stringify({ error: { message: `invalid x-api-key ${request.headers["x-api-key"]}` } }),
  ]);
  try {
    const provider = (root) => ({ kind: "anthropic", base_url: root, key });
    const moved = await chat({ provider: provider(redirecting.url), messages: user("hi"), options: options("claude-sonnet-4-5") });
    assert.equal(moved.error?.code, "network", JSON.stringify(moved.error));
    assert.match(moved.error.message, /redirect/);
    assert.match(moved.error.hint, /base URL/);
    assert.deepEqual(other.seen, [], "the other origin was reached");

    const echoed = await chat({ provider: provider(echoing.url), messages: user("hi"), options: options("claude-sonnet-4-5") });
    assert.equal(echoed.error?.code, "key_rejected", JSON.stringify(echoed.error));
    assert.ok(!JSON.stringify(echoed).includes(key), JSON.stringify(echoed));
    assert.match(echoed.error.message, /\[redacted:key\]/);
  } finally {
    await Promise.all([other.stop(), redirecting.stop(), echoing.stop()]);
  }
});
