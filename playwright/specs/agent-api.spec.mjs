// kiln.agent: one CodeAct turn from a page, in the runtime worker. The model
// (aimock's kiln-agent-* fixtures) writes a program that calls the page's own
// tool; the program runs in a sandbox worker through the ladder; the
// observation goes back; the answer, or a schema'd finish value, comes out;
// every event reaches onEvent; a guard stops a looping model by its code; a
// bad request is refused naming its field.
import assert from "node:assert/strict";
import { test } from "node:test";
import { useApp } from "../lib/browser.mjs";
import { useAimock } from "../lib/servers.mjs";

const app = useApp();
const aimock = useAimock();

/** Runs one turn in the page; `add` is a page tool that really adds. */
async function agent(objective, extra = {}) {
  const { page } = app();
  return page.evaluate(
    async ({ baseUrl, objective, extra }) => {
      const { Kiln } = await import("./kiln.js");
      window.kiln ??= await Kiln.load();
      const events = [];
      const added = [];
      const asked = [];
      // `askAnswer` stands for a page's ask(question) callback, which JSON cannot carry.
      const { askAnswer, ...rest } = extra;
      if (askAnswer !== undefined) {
        rest.ask = async (question) => {
          asked.push(question);
          return askAnswer;
        };
      }
      try {
        const result = await window.kiln.agent({
          provider: { kind: "openai", base_url: baseUrl },
          options: { model: "gpt-4o-mini", max_tokens: 512 },
          messages: [{ role: "user", text: objective }],
          tools: {
            add: {
              description: "Adds two numbers.",
              input_schema: { type: "object", properties: { a: { type: "number" }, b: { type: "number" } }, required: ["a", "b"] },
              category: "read",
              call: (args) => {
                added.push(args);
                return { sum: args.a + args.b };
              },
            },
          },
          onEvent: (event) => events.push(event),
          ...rest,
        });
        return { result, events, added, asked };
      } catch (error) {
        return { error: `${error.name}: ${error.message}`, events, asked };
      }
    },
    { baseUrl: `${aimock().url}/v1`, objective, extra },
  );
}

test("the model writes a program that calls the page's tool, and answers from what it observed", async () => {
  const { result, events, added, error } = await agent("kiln-agent-sum: add 20 and 30, then double it");
  assert.equal(error, undefined);
  assert.deepEqual(added, [{ a: 20, b: 30 }]);
  assert.equal(result.text, "Twice the sum is 100.");
  assert.deepEqual(result.stop, { reason: "answered" });
  assert.equal(result.turns, 2);
  assert.equal(result.actions, 1);
  assert.match(result.job_id, /.+/);
  const call = events.find((event) => event.type === "tool_call_update");
  assert.match(call.code, /await tools\.add\(\{a: 20, b: 30\}\)/);
  const observed = events.find((event) => event.type === "tool_result_update");
  assert.equal(observed.run.value, 100);
  assert.match(observed.content, /sum is 50/);
  assert.ok(events.some((event) => event.type === "llm_call"));
  assert.equal(events.at(-1).type, "done");
});

test("with an output schema the turn ends through finish, after a finished: false observation", async () => {
  const { result, events } = await agent("kiln-agent-schema", {
    outputSchema: { type: "object", properties: { answer: { type: "integer" } }, required: ["answer"] },
  });
  assert.equal(result.finished, true);
  assert.deepEqual(result.value, { answer: 42 });
  assert.deepEqual(result.stop, { reason: "finished" });
  const first = events.find((event) => event.type === "tool_result_update");
  assert.match(first.content, /finished: false/);
});

test("a guard stops a model that repeats itself, by its code", async () => {
  const { result } = await agent("kiln-agent-loop", { guards: { max_turns: 3 } });
  assert.equal(result.stop.reason, "guard");
  assert.equal(result.stop.code, "max_turns");
  assert.equal(result.turns, 3);
});

test("a bad request is refused naming its field, before anything is sent", async () => {
  const before = (await aimock().journal()).length;
  const { error } = await agent("kiln-agent-sum", { guards: { max_loops: 2 } });
  assert.match(error, /^TypeError: kiln\.agent: `guards` is not valid \(unknown field `max_loops`/);
  const { error: second } = await agent("kiln-agent-sum", { onEvent: 5 });
  assert.equal(second, "TypeError: kiln.agent: `onEvent` must be a function");
  assert.equal((await aimock().journal()).length, before);
});

test("ask answers the agent's ask_user; without it, nobody can, and the model is told so", async () => {
  const { result, events, asked } = await agent("kiln-app-ask", { askAnswer: "blue" });
  assert.deepEqual(asked, ["Which colour should the chart be?"]);
  assert.equal(result.text, "You said blue.");
  assert.ok(events.some((event) => event.type === "question" && event.question === "Which colour should the chart be?"));
  // The thread to continue from: the question, its answer and the reply.
  assert.deepEqual(result.messages.map((message) => message.role), ["user", "assistant", "tool", "assistant"]);
  assert.match(result.messages[2].content, /blue/);

  const { events: unanswered } = await agent("kiln-app-ask");
  const told = unanswered.find((event) => event.type === "tool_result_update" && event.name === "ask_user");
  assert.equal(told.is_error, true);
  assert.match(told.content, /nobody_to_ask/);
  const { error } = await agent("kiln-app-ask", { ask: 5 });
  assert.equal(error, "TypeError: kiln.agent: `ask` must be a function");
});

test("a page tool's late answer to an action that ended never reaches the next action's call", async () => {
  const { page } = app();
  const out = await page.evaluate(
    async ({ baseUrl }) => {
      const { Kiln } = await import("./kiln.js");
      window.kiln ??= await Kiln.load();
      const answered = [];
      const result = await window.kiln.agent({
        provider: { kind: "openai", base_url: baseUrl },
        options: { model: "gpt-4o-mini", max_tokens: 512 },
        messages: [{ role: "user", text: "kiln-agent-late" }],
        // The first action spins once its call is out, and its CPU budget ends it.
        limits: { js_cpu_ms: 300 },
        tools: {
          // The first action's call answers after that action ended, while the second action's
          // call (the same call number in its own run) still waits for its own answer.
          slow: {
            description: "Answers {n} after a while.",
            input_schema: { type: "object", properties: { n: { type: "integer" } }, required: ["n"] },
            category: "read",
            call: ({ n }, ctx) => new Promise((resolve) => setTimeout(() => { answered.push([n, ctx.callNumber]); resolve({ n }); }, n === 1 ? 1500 : 3000)),
          },
        },
      });
      return { result, answered };
    },
    { baseUrl: `${aimock().url}/v1` },
  );
  assert.deepEqual(out.answered, [[1, 1], [2, 1]], "both calls reached the page, each its run's call 1");
  assert.equal(out.result.text, "The second call answered 2.");
  assert.equal(out.result.actions, 2);
});

test("a plan from a page: execute_plan runs its steps as sub-agents in the worker, every child's event tagged, within one budget's pool", async () => {
  const { result, events, error } = await agent("kiln-plan-run", {
    permission: { mode: "auto" },
    budget: { max_concurrency: 2 },
  });
  assert.equal(error, undefined);
  assert.equal(result.text, "Phrase one has 3 words and phrase two has 2: 5 words in all.");
  const updates = events.filter((event) => event.type === "task_update");
  assert.equal(updates[0].event, "plan_started");
  assert.equal(updates[0].plan.tasks.length, 3);
  const completed = updates.filter((event) => event.event === "task_completed").map((event) => event.task_id);
  assert.deepEqual(completed.slice(-1), ["total"], "the dependent task ends last");
  assert.equal(completed.length, 3);
  const total = events.find((event) => event.type === "step_result" && event.step_id === "total_sum");
  assert.deepEqual(total.result, { words: 5 });
  const child = events.find((event) => event.type === "child" && event.label === "step total_sum");
  assert.equal(child.parent_call_id, "call_plan_execute");
  assert.equal(child.depth, 1);
  // Each step's program ran in a sandbox worker: its action's result came back tagged.
  const action = events.find(
    (event) => event.type === "child" && event.event.type === "tool_result_update" && event.label === "step total_sum",
  );
  assert.equal(action.event.run.status, "completed");
  assert.match(action.event.run.output, /words 5/);
});

test("a page's program asks the run's model: tools.model and tools.classify, under the run's model budget", async () => {
  const { page } = app();
  const result = await page.evaluate(
    async ({ baseUrl }) => {
      const { Kiln } = await import("./kiln.js");
      window.kiln ??= await Kiln.load();
      return window.kiln.run({
        code: `const label = await tools.classify({text: 'kiln-classify: saving crashes', labels: ['bug', 'feature']});
          const person = await tools.model({prompt: 'kiln-model-extract: who?', schema: {type: 'object', properties: {name: {type: 'string'}, year: {type: 'integer'}}, required: ['name', 'year']}});
          let third;
          try { await tools.model({prompt: 'kiln-hello'}); } catch (error) { third = error.code; }
          return {label, person, third};`,
        model: { provider: { kind: "openai", base_url: baseUrl }, model: "gpt-4o-mini", budget: { calls: 2 } },
      });
    },
    { baseUrl: `${aimock().url}/v1` },
  );
  assert.equal(result.isError, undefined, result.content[0].text);
  assert.deepEqual(result.structuredContent.value, {
    label: "bug",
    person: { name: "Ada Lovelace", year: 1843 },
    third: "model_budget_exhausted",
  });
  assert.deepEqual(
    result.structuredContent.calls.map((call) => [call.tool, call.outcome]),
    [["classify", "ok"], ["model", "ok"], ["model", "error"]],
  );
});
