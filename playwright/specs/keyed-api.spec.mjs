// Keyed runs from a page (reference 002, "Results"): kiln.run({key}) names its
// run from the agent and the key, a retry attaches and never runs the program
// again; a run not ended when its answer is due resolves to the interim result
// (running, or held on the person's consent) and goes on, its page tools and
// approve still called; kiln.lateResult(runId) and kiln.withdraw(runId); the
// runs recorded in IndexedDB, answered from the record after a reload, and a
// run the closed tab left going answered `interrupted`.
import assert from "node:assert/strict";
import { test } from "node:test";
import { useApp } from "../lib/browser.mjs";

const app = useApp();

test("a retry with the same key attaches and the program runs once; an unknown id is named", async () => {
  const { page } = app();
  const out = await page.evaluate(async () => {
    const { Kiln } = await import("./kiln.js");
    const kiln = await Kiln.load({ workspace: "keyed-attach" });
    let count = 0;
    const tools = {
      count: { description: "counts its calls", input_schema: { type: "object" }, call: async () => ++count },
    };
    const code = "await sleep(50); return await tools.count({})";
    const [first, second] = await Promise.all([
      kiln.run({ code, tools, key: "report-1" }),
      kiln.run({ code, tools, key: "report-1" }),
    ]);
    const again = await kiln.run({ code, tools, key: "report-1" });
    const late = await kiln.lateResult(first.structuredContent.run_id);
    const other = await kiln.run({ code, tools, key: "report-2" });
    const unknown = await kiln.lateResult("codemode:0000000000000000");
    let refused;
    try {
      await kiln.withdraw("");
    } catch (error) {
      refused = `${error.name}: ${error.message}`;
    }
    return { first, second, again, late, other, unknown, refused, count };
  });
  const id = out.first.structuredContent.run_id;
  assert.match(id, /^codemode:[0-9a-f]{16}$/);
  for (const result of [out.second, out.again, out.late]) {
    assert.equal(result.structuredContent.run_id, id);
    assert.equal(result.structuredContent.value, 1);
  }
  assert.equal(out.first.structuredContent.keyless, false, "a keyed run does not warn keyless");
  assert.notEqual(out.other.structuredContent.run_id, id);
  assert.equal(out.other.structuredContent.value, 2);
  assert.equal(out.count, 2, "report-1 ran once, report-2 once");
  assert.equal(out.unknown.isError, true);
  assert.equal(out.unknown.errorCode, "unknown_run");
  assert.match(out.unknown.content[0].text, /^Error \(unknown_run\): there is no run `codemode:0000000000000000` here/);
  assert.match(out.refused, /^TypeError: kiln\.withdraw takes a run id/);
});

test("a run not ended when due answers the interim and goes on: running, held on consent, withdrawn", async () => {
  const { page } = app();
  const out = await page.evaluate(async () => {
    const { Kiln } = await import("./kiln.js");
    const kiln = await Kiln.load({ workspace: "keyed-interim", replyDueMs: 300 });
    const untilDone = async (runId) => {
      for (;;) {
        const result = await kiln.lateResult(runId);
        if (result.structuredContent.status !== "running") return result;
      }
    };
    // Still running at its due time; its page tool is called after the interim.
    const echoed = [];
    const echo = {
      description: "echoes",
      input_schema: { type: "object" },
      call: async (args) => {
        echoed.push(args);
        return args;
      },
    };
    const running = await kiln.run({
      code: "await sleep(800); return await tools.echo({n: 2})",
      tools: { echo },
      key: "slow-1",
    });
    const finished = await untilDone(running.structuredContent.run_id);
    // Held on the person's consent: the approval never comes, and withdraw ends it.
    const asked = [];
    let reached;
    const approving = new Promise((resolve) => (reached = resolve));
    const first = await kiln.run({
      code: "console.log('asking'); return await tools.write_it({n: 1})",
      tools: { write_it: { category: "write", input_schema: { type: "object" }, call: (args) => args } },
      permission: { mode: "default" },
      approve: (request) => {
        asked.push(request.tool);
        reached();
        return new Promise(() => {});
      },
      key: "consent-1",
    });
    // On a slow machine the answer may be due before the call reaches approve.
    await approving;
    const held =
      first.structuredContent.held.reason === "consent" ? first : await kiln.lateResult(first.structuredContent.run_id);
    const withdrawn = await kiln.withdraw(held.structuredContent.run_id);
    const afterwards = await kiln.lateResult(held.structuredContent.run_id);
    // A keyed run's signal withdraws it too.
    const controller = new AbortController();
    const signalled = kiln.run({ code: "await sleep(5000); return 'late'", key: "signal-1", signal: controller.signal });
    const interim = await signalled;
    controller.abort();
    const stopped = await untilDone(interim.structuredContent.run_id);
    return { running, finished, echoed, held, asked, withdrawn, afterwards, stopped };
  });
  assert.deepEqual(out.running.structuredContent, {
    status: "running",
    run_id: out.running.structuredContent.run_id,
    held: { reason: "running" },
  });
  assert.equal(out.running.isError, undefined);
  assert.match(
    out.running.content[0].text,
    /^Still running: the program had not finished when this reply was due\. .* call `kiln\.lateResult\(run_id\)` to get it\.$/,
  );
  assert.equal(out.finished.structuredContent.status, "completed");
  assert.deepEqual(out.finished.structuredContent.value, { n: 2 });
  assert.deepEqual(out.echoed, [{ n: 2 }], "the page tool was called after the interim");

  assert.deepEqual(out.asked, ["write_it"]);
  assert.deepEqual(out.held.structuredContent.held, { reason: "consent" });
  assert.match(out.held.content[0].text, /^Waiting on the person: write_it \(call 1\) needs their consent\./);
  const w = out.withdrawn.structuredContent;
  assert.equal(w.status, "cancelled", out.withdrawn.content[0].text);
  assert.equal(w.output, "asking\n");
  assert.deepEqual(w.calls.map((call) => [call.tool, call.outcome]), [["write_it", "withdrawn"]]);
  assert.equal(out.afterwards.structuredContent.status, "cancelled", "the withdrawn run stays kept");

  assert.equal(out.stopped.structuredContent.status, "cancelled", out.stopped.content[0].text);
});

test("another tab's keyed run is answered from its record, never run again", async () => {
  const { page } = app();
  const out = await page.evaluate(async () => {
    const { Kiln } = await import("./kiln.js");
    // Two runtimes on one workspace: two tabs.
    const one = await Kiln.load({ workspace: "keyed-tabs", replyDueMs: 300 });
    const two = await Kiln.load({ workspace: "keyed-tabs", replyDueMs: 300 });
    let count = 0;
    const tools = { count: { input_schema: { type: "object" }, call: async () => ++count } };
    const code = "await sleep(900); return await tools.count({})";
    const first = await one.run({ code, tools, key: "shared" });
    const elsewhere = await two.run({ code, tools, key: "shared" });
    let final;
    do {
      final = await one.lateResult(first.structuredContent.run_id);
    } while (final.structuredContent.status === "running");
    const fromRecord = await two.lateResult(first.structuredContent.run_id);
    const retried = await two.run({ code, tools, key: "shared" });
    return { first, elsewhere, final, fromRecord, retried, count };
  });
  assert.equal(out.first.structuredContent.status, "running");
  assert.equal(out.elsewhere.structuredContent.status, "running", out.elsewhere.content[0].text);
  assert.equal(out.elsewhere.structuredContent.run_id, out.first.structuredContent.run_id);
  assert.equal(out.final.structuredContent.value, 1);
  assert.equal(out.fromRecord.structuredContent.value, 1);
  assert.equal(out.retried.structuredContent.value, 1);
  assert.equal(out.count, 1, "the program ran once, in the first tab");
});

test("keyed runs are recorded in IndexedDB: after a reload, a retry and a late result come from the record", async () => {
  const { page } = app();
  const before = await page.evaluate(async () => {
    const { Kiln } = await import("./kiln.js");
    const kiln = await Kiln.load({ workspace: "keyed-record", replyDueMs: 300 });
    const done = await kiln.run({ code: "return 6 * 7", key: "answer" });
    // Left going when the tab goes away.
    const going = await kiln.run({ code: "while (true) await sleep(5000);", key: "cut" });
    const jobs = await kiln.history.jobs();
    return { done, going, jobs };
  });
  assert.equal(before.done.structuredContent.value, 42);
  assert.equal(before.going.structuredContent.status, "running", before.going.content[0].text);
  const recorded = before.jobs.find((job) => job.run_id === before.done.structuredContent.run_id);
  assert.ok(recorded, `the keyed run's job: ${JSON.stringify(before.jobs)}`);
  assert.equal(recorded.result.structuredContent.value, 42, "the job keeps the whole result");

  await page.reload();
  const after = await page.evaluate(async ({ done, going }) => {
    const { Kiln } = await import("./kiln.js");
    const kiln = await Kiln.load({ workspace: "keyed-record", replyDueMs: 300 });
    let ran = 0;
    const tools = { mark: { input_schema: { type: "object" }, call: async () => ++ran } };
    const retry = await kiln.run({ code: "await tools.mark({}); return 'ran again'", tools, key: "answer" });
    const late = await kiln.lateResult(done);
    const cut = await kiln.lateResult(going);
    return { retry, late, cut, ran };
  }, { done: before.done.structuredContent.run_id, going: before.going.structuredContent.run_id });
  assert.equal(after.ran, 0, "the program never ran again for its key");
  assert.equal(after.retry.structuredContent.value, 42);
  assert.equal(after.late.structuredContent.value, 42);
  assert.equal(after.cut.errorCode, "interrupted");
  assert.equal(after.cut.structuredContent.status, "interrupted");
  assert.match(after.cut.content[0].text, /Kiln never runs it again for this key\./);
});
