// The permission ladder as a page sees it through kiln.run: its approve
// callback answers approve / deny / allow_for_session; without one nobody is
// asked; modes, per-tool settings and the brake decide before anyone is.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { useApp } from "../lib/browser.mjs";
import { startEcho } from "../lib/servers.mjs";

const app = useApp();
let echo;
before(async () => (echo = await startEcho()));
after(async () => echo?.stop());

/**
 * Runs `request` in the page. Tools are `{name: category}` (each echoes its
 * arguments); `answers` is the queue the approve callback answers from (each
 * after `delayMs`), or null for no callback. Resolves to {result, asked}.
 */
async function run(request, { tools = {}, answers = null, delayMs = 0 } = {}) {
  const { page } = app();
  return page.evaluate(
    async ({ request, tools, answers, delayMs }) => {
      const { Kiln } = await import("./kiln.js");
      window.kiln ??= await Kiln.load();
      const built = {};
      for (const [name, category] of Object.entries(tools)) {
        built[name] = { description: `the ${name} tool`, input_schema: { type: "object" }, category, call: (args) => args };
      }
      const asked = [];
      const approve =
        answers &&
        (async (req) => {
          asked.push(req);
          await new Promise((resolve) => setTimeout(resolve, delayMs));
          return answers.shift();
        });
      const result = await window.kiln.run({ ...request, tools: built, ...(approve ? { approve } : {}) });
      return { result, asked };
    },
    { request, tools, answers, delayMs },
  );
}

const SAVE_TWICE = `
const out = [];
for (const note of ["a", "b"]) {
  try { out.push(await tools.save({note, password: "hunter2"})) } catch (e) { out.push(e.code) }
}
return out;`;

test("approve runs the call; the card gets the tool, category and the arguments it sends", async () => {
  const { result, asked } = await run({ code: SAVE_TWICE }, { tools: { save: "write" }, answers: ["approve", "deny"] });
  const s = result.structuredContent;
  assert.deepEqual(s.value, [{ note: "a", password: "hunter2" }, "denied"]);
  assert.deepEqual(s.calls.map((c) => [c.outcome, c.waited_on_person]), [["ok", true], ["denied", true]]);
  assert.equal(asked.length, 2);
  assert.deepEqual(
    { ...asked[0], description: undefined },
    {
      tool: "save",
      callNumber: 1,
      category: "write",
      module: "page",
      description: undefined,
      // The program's own password is not a secret of the run: the person sees what goes.
      args: { note: "a", password: "hunter2" },
      reason: "mode",
      why: "default mode asks before a call that changes something or reaches out",
      host: "page",
    },
  );
});

test("a card scrubs the run's secrets under any key, and cuts a long argument with a note", async () => {
  const code = `return await tools.save({note: "x".repeat(5000), header: "Bearer sk-card-secret-7", "X-Session-Token": "data"})`;
  const { asked } = await run({ code, secrets: { API_KEY: "sk-card-secret-7" } }, { tools: { save: "write" }, answers: ["deny"] });
  assert.equal(asked.length, 1);
  assert.equal(asked[0].args.header, "Bearer [redacted:API_KEY]");
  assert.equal(asked[0].args["X-Session-Token"], "data");
  assert.equal(asked[0].args.note, `${"x".repeat(300)}… [cut: 4,700 more characters]`);
});

test("allow for this session answers for later calls and later runs of the same Kiln", async () => {
  const first = await run({ code: SAVE_TWICE }, { tools: { keep: "write", save: "write" }, answers: ["allow_for_session"] });
  assert.deepEqual(first.result.structuredContent.value.map((v) => v.note ?? v), ["a", "b"]);
  assert.equal(first.asked.length, 1);
  const second = await run({ code: SAVE_TWICE }, { tools: { save: "write" }, answers: [] });
  assert.equal(second.asked.length, 0, "the session's answer holds in the next run");
  assert.equal(second.result.structuredContent.calls[0].waited_on_person, false);
});

test("with no approve callback nobody is asked, and the refusal names the host", async () => {
  const { result } = await run(
    { code: "try { await tools.send({}) } catch (e) { return [e.code, e.message] }", permission: { mode: "default" } },
    { tools: { send: "external" } },
  );
  const [code, message] = result.structuredContent.value;
  assert.equal(code, "consent_unavailable");
  assert.match(message, /kiln\.run \(no approve callback\) has nobody to ask/);
  assert.equal(result.structuredContent.calls[0].outcome, "consent_unavailable");
  // Without a callback the default mode is auto: the same call runs.
  const auto = await run({ code: "return await tools.send({x: 1})" }, { tools: { send: "external" } });
  assert.deepEqual(auto.result.structuredContent.value, { x: 1 });
});

test("plan mode, a blocked tool and the brake decide before anyone is asked", async () => {
  const code = `
const out = {};
for (const name of ["look", "save", "shell"]) {
  try { await tools[name]({}); out[name] = "ok" } catch (e) { out[name] = e.code + ": " + e.message }
}
return out;`;
  const tools = { look: "read", save: "write", shell: "execute" };
  const plan = await run({ code, permission: { mode: "plan" } }, { tools, answers: [] });
  assert.equal(plan.result.structuredContent.value.look, "ok");
  assert.match(plan.result.structuredContent.value.save, /^refused: save \(call 2\) was refused: plan mode runs only read calls/);
  assert.equal(plan.asked.length, 0);

  const blocked = await run({ code, permission: { mode: "auto", autonomy: { look: "block" } } }, { tools, answers: [] });
  assert.match(blocked.result.structuredContent.value.look, /deliberate: do not try to work around it; report it to the person/);
  assert.equal(blocked.result.structuredContent.value.save, "ok");

  const braked = await run({ code, permission: { mode: "auto", brake: true } }, { tools, answers: ["deny"] });
  assert.equal(braked.result.structuredContent.value.save, "ok");
  assert.match(braked.result.structuredContent.value.shell, /^denied/);
  assert.equal(braked.asked[0].reason, "brake");
});

test("while the person decides, JS CPU is not charged and the wait is person wait", async () => {
  // (`publish`: `save` was allowed for this Kiln's session above.)
  const { result } = await run(
    { code: "return await tools.publish({n: 1})", limits: { js_cpu_ms: 200 } },
    { tools: { publish: "write" }, answers: ["approve"], delayMs: 1200 },
  );
  const s = result.structuredContent;
  assert.deepEqual(s.value, { n: 1 }, JSON.stringify(s));
  assert.ok(s.person_wait_ms >= 1100, `person wait ${s.person_wait_ms}`);
  assert.equal(s.calls[0].waited_on_person, true);
  const over = await run(
    { code: "return await tools.publish({n: 1})", limits: { person_wait_ms: 300 } },
    { tools: { publish: "write" }, answers: ["approve"], delayMs: 3000 },
  );
  assert.equal(over.result.structuredContent.termination_reason, "budget_exhausted:person_wait");
});

test("secrets go into request headers by name and never come back", async () => {
  const code = `const r = await tools.http_request({url: ${JSON.stringify(echo.url)}, secret_headers: {authorization: "Bearer \${API_KEY}"}});
return JSON.parse(r.body).headers.authorization;`;
  // The echo server is on loopback: the run names its origin to reach it.
  const allow_net = [new URL(echo.url).origin];
  const { result } = await run({ code, allow_net, secrets: { API_KEY: "sk-page-secret-42" } });
  assert.equal(result.structuredContent.value, "Bearer [redacted:API_KEY]");
  assert.ok(!JSON.stringify(result).includes("sk-page-secret-42"));

  // Bound to origins, a secret goes to those and is refused for any other.
  const origin = new URL(echo.url).origin;
  const bound = await run({ code, allow_net, secrets: { API_KEY: { value: "sk-page-secret-42", origins: [origin] } } });
  assert.equal(bound.result.structuredContent.value, "Bearer [redacted:API_KEY]");
  const elsewhere = await run({
    code: `try { ${code} } catch (e) { return e.code + ": " + e.message }`,
    allow_net,
    secrets: { API_KEY: { value: "sk-page-secret-42", origins: ["https://api.example.com"] } },
  });
  assert.equal(
    elsewhere.result.structuredContent.value,
    `secret_not_allowed: the secret \`API_KEY\` was not sent: it may be sent only to https://api.example.com, not to ${origin}`,
  );
});

test("a run has the network only when it asks by name, and loopback only when it names it", async () => {
  const probe = `try { const r = await tools.http_request({url: ${JSON.stringify(echo.url)}}); return r.status } catch (e) { return e.code ?? e.name }`;
  const keys = await run({ code: "return Object.keys(tools).includes('http_request')" });
  assert.equal(keys.result.structuredContent.value, false);
  const none = await run({ code: probe });
  assert.match(String(none.result.structuredContent.value), /TypeError|tool_unavailable/);
  // Asked for, public addresses only: the loopback echo server is refused before anything is sent.
  const publicOnly = await run({ code: probe, builtins: ["http_request"] });
  assert.equal(publicOnly.result.structuredContent.value, "address_refused");
  const named = await run({ code: probe, allow_net: [new URL(echo.url).origin] });
  assert.equal(named.result.structuredContent.value, 200);
});

test("bad permission input is a TypeError naming the field", async () => {
  const { page } = app();
  const messages = await page.evaluate(async () => {
    const { Kiln } = await import("./kiln.js");
    window.kiln ??= await Kiln.load();
    const bad = [
      { code: "1", permission: { mode: "yolo" } },
      { code: "1", permission: { autonomy: { return_result: "block" } } },
      { code: "1", permission: { speed: 1 } },
      { code: "1", approve: "yes" },
      { code: "1", mcp: { "my-server": "http://127.0.0.1:1/mcp" } },
      { code: "1", tools: { t: { call() {}, category: "network" } } },
    ];
    const out = [];
    for (const request of bad) {
      try {
        await window.kiln.run(request);
        out.push("resolved");
      } catch (error) {
        out.push(`${error.name}: ${error.message}`);
      }
    }
    return out;
  });
  const expected = [
    /TypeError: kiln\.run: `permission\.mode`: unknown permission mode `yolo`/,
    /`permission\.autonomy`: return_result cannot be blocked/,
    /`permission\.speed` is not a setting/,
    /`approve` must be a function/,
    /`mcp\.my-server`: a server name must be a JavaScript identifier/,
    /`tools\.t\.category`: unknown permission category `network`/,
  ];
  expected.forEach((pattern, i) => assert.match(messages[i], pattern));
});

test("a call still waiting for approval when its run is ended never runs", async () => {
  const { page } = app();
  const out = await page.evaluate(async () => {
    const { Kiln } = await import("./kiln.js");
    window.kiln ??= await Kiln.load();
    let ran = 0;
    // The person takes longer than the run's person-wait budget: the run ends
    // first, and the late approval must run nothing.
    const result = await window.kiln.run({
      code: "return await tools.late({});",
      tools: { late: { category: "write", call: () => (ran += 1) } },
      approve: () => new Promise((resolve) => setTimeout(() => resolve("approve"), 600)),
      limits: { person_wait_ms: 150 },
    });
    await new Promise((resolve) => setTimeout(resolve, 900));
    return { reason: result.structuredContent.termination_reason, ran };
  });
  assert.deepEqual(out, { reason: "budget_exhausted:person_wait", ran: 0 });
});
