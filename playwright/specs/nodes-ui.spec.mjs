// The Code nodes view, as a person uses it: "Write code with AI" (aimock's
// kiln-code-* fixtures through a provider added in the Providers panel), the
// payload shown before anything is sent (sample values only when ticked),
// Generate, the review with the code collapsed, a preview run on a sample,
// Apply; a second node, repaired in two rounds; connecting an output to an
// input (a connection whose types do not fit is refused with the reason);
// Run; a reload finds the graph with its edge and sample, Run again; Undo
// walks the changes back. A failed generation, Cancel and Escape leave no
// node behind, and the focus goes back to the button that opened the dialog.
import assert from "node:assert/strict";
import { test } from "node:test";
import { show, useApp } from "../lib/browser.mjs";
import { useAimock } from "../lib/servers.mjs";

const app = useApp();
const aimock = useAimock();

const SHOTS = process.env.KILN_SCREENSHOTS;
async function shot(page, name) {
  if (SHOTS) await page.screenshot({ path: `${SHOTS}/${name}.png`, fullPage: false });
}

/** Adds the aimock provider in Settings' Providers panel. */
async function addProvider(page) {
  await show(page, "settings");
  const panel = page.getByTestId("providers");
  if (!(await panel.evaluate((details) => details.open))) await panel.locator("summary").click();
  await page.getByTestId("provider-name").fill("aimock OpenAI");
  await page.getByTestId("provider-kind").selectOption("openai");
  await page.getByTestId("provider-base-url").fill(`${aimock().url}/v1`);
  await page.getByTestId("provider-key").fill("sk-test-openai-1234");
  await page.getByTestId("provider-test").click();
  await page.locator('[data-testid="provider-status"] .ok').waitFor();
  await page.getByTestId("provider-model").selectOption("gpt-4o-mini");
  await page.getByTestId("provider-save").click();
  await page.getByTestId("provider-status").filter({ hasText: "Saved" }).waitFor();
}

const panel = (page) => page.getByTestId("nodes-panel");
const dialog = (page) => page.getByTestId("author-dialog");
const card = (page, id) => page.locator(`[data-testid="node-card"][data-node="${id}"]`);
const input = (page, id, slot) => card(page, id).locator(`[data-testid="node-input"][data-slot="${slot}"]`);
const output = (page, id, slot) => card(page, id).locator(`[data-testid="node-output"][data-slot="${slot}"] [data-testid="output-value"]`);
const text = async (locator) => (await locator.textContent()).trim();
const LINES = '[{"price": 2.5, "qty": 4}, {"price": 1, "qty": 3}]';

/** Opens "Write code with AI", writes the instruction and the inputs, and leaves the field. */
async function startWriting(page, instruction, inputs = "") {
  await page.getByTestId("write-with-ai").click();
  await dialog(page).waitFor();
  await page.getByTestId("author-instruction").fill(instruction);
  if (inputs) await page.getByTestId("author-inputs").fill(inputs);
  await page.getByTestId("author-instruction").focus();
  await page.getByTestId("author-instruction").blur();
}

/** The payload the dialog shows, once it names `needle`. */
async function payloadWith(page, needle) {
  const details = page.getByTestId("author-payload");
  if (!(await details.evaluate((element) => element.open))) await details.locator("summary").click();
  const pre = page.getByTestId("author-payload-text");
  await pre.filter({ hasText: needle }).waitFor();
  return text(pre);
}

test("write a node with AI, preview it, apply it, connect a second, run, reload, run again, undo", async () => {
  const { page, errors } = app();
  await addProvider(page);
  await show(page, "nodes");
  assert.equal(await text(page.getByTestId("nodes-empty")), "No nodes yet. Write one with AI, or add an empty node and write its code.");

  await startWriting(page, "kiln-code-total: add up price times quantity over the order lines", "lines: list[{price: number, qty: integer}]");
  await page.getByTestId("author-model").filter({ hasText: "Model:" }).waitFor();
  assert.equal(await text(page.getByTestId("author-model")), "Model: gpt-4o-mini (through aimock OpenAI)");
  await page.locator('[data-testid="author-sample"][data-slot="lines"]').fill(LINES);
  await page.locator('[data-testid="author-sample"][data-slot="lines"]').blur();
  // By default the model sees names and types only; ticked, the sample goes too.
  let payload = await payloadWith(page, "kiln-code-total");
  assert.match(payload, /lines/);
  assert.doesNotMatch(payload, /2\.5/);
  await page.getByTestId("author-include-samples").check();
  payload = await payloadWith(page, "2.5");
  await page.getByTestId("author-include-samples").uncheck();
  payload = await payloadWith(page, "kiln-code-total");
  await page.waitForFunction(() => !document.querySelector('[data-testid="author-payload-text"]').textContent.includes("2.5"));
  await shot(page, "nodes-dialog");

  await page.getByTestId("author-generate").click();
  await page.getByTestId("author-review").waitFor();
  assert.equal(await text(page.getByTestId("review-title")), "Total the order");
  assert.equal(await text(page.getByTestId("review-summary")), "Adds up price times quantity over the order lines.");
  assert.match(await text(page.getByTestId("author-status")), /^Generated in 1 round \(\d+ tokens\)\. Review it, preview it, then Apply\.$/);
  // The code is there, collapsed.
  assert.equal(await page.getByTestId("review-code").isVisible(), false);
  await page.getByTestId("author-preview").click();
  await page.getByTestId("preview-result").waitFor();
  assert.equal(await text(page.locator('[data-testid="preview-output"][data-slot="total"]')), "13");
  assert.equal(await page.getByTestId("preview-warnings").count(), 0);
  await shot(page, "nodes-review");
  await page.getByTestId("author-apply").click();
  await dialog(page).waitFor({ state: "detached" });
  // The focus is back on the button that opened the dialog.
  assert.equal(await page.evaluate(() => document.activeElement?.dataset.testid), "write-with-ai");
  assert.equal(await text(page.getByTestId("nodes-status")), "Added Total the order as total-the-order. Undo takes it away.");
  assert.deepEqual(await page.getByTestId("nodes-status").locator("code").allTextContents(), ["Total the order", "total-the-order"]);
  // The sample came with it, as the value of the input nothing feeds.
  assert.equal(await input(page, "total-the-order", "lines").getByTestId("sample").inputValue(), '[{"price":2.5,"qty":4},{"price":1,"qty":3}]');

  // A second node, whose first submission is refused and repaired.
  await startWriting(page, "kiln-code-repair: classify the number n");
  await page.getByTestId("author-generate").click();
  await page.getByTestId("author-review").waitFor();
  assert.match(await text(page.getByTestId("author-status")), /^Generated in 2 rounds/);
  await page.getByTestId("author-apply").click();
  await dialog(page).waitFor({ state: "detached" });
  const classify = "classify-the-number";
  await card(page, classify).waitFor();

  // A string does not fit a list: refused, with the reason, and nothing changes.
  await input(page, "total-the-order", "lines").getByTestId("connect-from").selectOption(`${classify}.sign`);
  const refusal = input(page, "total-the-order", "lines").getByTestId("connect-refusal");
  await refusal.waitFor();
  assert.equal(
    await text(refusal),
    "classify-the-number.sign gives a string, which does not fit total-the-order.lines, which takes a list[{price: number, qty: integer}]",
  );
  assert.equal(await input(page, "total-the-order", "lines").getByTestId("connect-from").inputValue(), "");
  // A number fits a number.
  await input(page, classify, "n").getByTestId("connect-from").selectOption("total-the-order.total");
  assert.equal(await text(page.getByTestId("nodes-status")), "Connected total-the-order.total → classify-the-number.n.");
  assert.equal(await input(page, classify, "n").getByTestId("sample").count(), 0);

  const runGraph = async () => {
    await page.getByTestId("graph-run").click();
    await page.getByTestId("nodes-status").filter({ hasText: "The graph ran" }).waitFor();
    assert.equal(await text(page.getByTestId("nodes-status")), "The graph ran: every node completed.");
    assert.equal(await text(output(page, "total-the-order", "total")), "13");
    assert.equal(await text(output(page, classify, "sign")), '"positive"');
    assert.equal(await text(output(page, classify, "size")), "13");
    assert.match(await text(card(page, classify).getByTestId("node-status")), /^completed · \d+ ms$/);
  };
  await runGraph();
  await card(page, classify).scrollIntoViewIfNeeded();
  await shot(page, "nodes-graph");

  // Kept in the workspace: a reload (of `#/nodes`) finds both nodes, the edge and the sample.
  await page.reload();
  await panel(page).waitFor();
  await card(page, classify).waitFor();
  assert.equal(await input(page, classify, "n").getByTestId("connect-from").inputValue(), "total-the-order.total");
  assert.equal(await input(page, "total-the-order", "lines").getByTestId("sample").inputValue(), '[{"price":2.5,"qty":4},{"price":1,"qty":3}]');
  await runGraph();

  // Undo walks back: first the connection, then the second node.
  await page.getByTestId("nodes-undo").click();
  await input(page, classify, "n").getByTestId("sample").waitFor();
  assert.equal(await input(page, classify, "n").getByTestId("connect-from").inputValue(), "");
  await page.getByTestId("nodes-undo").click();
  await card(page, classify).waitFor({ state: "detached" });
  assert.equal(await page.getByTestId("node-card").count(), 1);
  // What Undo did is kept too.
  await page.reload();
  await panel(page).waitFor();
  await card(page, "total-the-order").waitFor();
  assert.equal(await page.getByTestId("node-card").count(), 1);
  assert.deepEqual(errors, []);
});

test("a failed generation, Cancel and Escape leave no node, and the focus goes back", async () => {
  const { page, errors } = app();
  await show(page, "nodes");
  const before = await page.getByTestId("node-card").count();
  await startWriting(page, "kiln-code-never: total the lines");
  await page.getByTestId("author-generate").click();
  await page.getByTestId("author-status").filter({ hasText: "No node" }).waitFor();
  assert.match(await text(page.getByTestId("author-status")), /^No node \(no_valid_submission\): /);
  assert.ok((await page.getByTestId("author-errors").locator("li").count()) > 0);
  assert.equal(await page.getByTestId("author-apply").isDisabled(), true);
  await shot(page, "nodes-failed");
  await page.getByTestId("author-close").click();
  await dialog(page).waitFor({ state: "detached" });
  assert.equal(await page.evaluate(() => document.activeElement?.dataset.testid), "write-with-ai");

  // Escape, from the keyboard alone: the dialog opens on Enter and closes on Escape.
  await page.getByTestId("write-with-ai").focus();
  await page.keyboard.press("Enter");
  await dialog(page).waitFor();
  await page.keyboard.type("kiln-code-total: add it up");
  await page.keyboard.press("Escape");
  await dialog(page).waitFor({ state: "detached" });
  assert.equal(await page.evaluate(() => document.activeElement?.dataset.testid), "write-with-ai");
  assert.equal(await page.getByTestId("node-card").count(), before);
  assert.deepEqual(errors, []);
});

test("Ask AI on a node: its inputs are the detected ones, its latest values the samples, and the same node back changes nothing", async () => {
  const { page, errors } = app();
  await show(page, "nodes");
  await card(page, "total-the-order").getByTestId("node-ask-ai").click();
  await dialog(page).waitFor();
  assert.equal(await text(page.locator("#author-title")), "Ask AI about “Total the order”");
  assert.equal(await text(page.getByTestId("author-inputs").locator("li")), "lines list[{price: number, qty: integer}]");
  // The value the input has in the graph is the preview's sample.
  assert.equal(await page.locator('[data-testid="author-sample"][data-slot="lines"]').inputValue(), '[{"price":2.5,"qty":4},{"price":1,"qty":3}]');
  await page.getByTestId("author-instruction").fill("kiln-code-total: the same, written again");
  await page.getByTestId("author-generate").click();
  await page.getByTestId("author-review").waitFor();
  await page.getByTestId("author-apply").click();
  await dialog(page).waitFor({ state: "detached" });
  assert.equal(await page.evaluate(() => document.activeElement?.dataset.testid), "node-ask-ai");
  // The fixture writes the node as it was: nothing changes, and it says so.
  assert.equal(await text(page.getByTestId("nodes-status")), "total-the-order is unchanged: the model wrote the same node.");
  assert.equal(await page.getByTestId("node-card").count(), 1);
  assert.deepEqual(errors, []);
});

test("a node written by hand: saved as one change, fed from another, its output of the wrong type a warning on its card", async () => {
  const { page, errors } = app();
  await show(page, "nodes");
  await page.getByTestId("node-add").click();
  const added = card(page, "new-node");
  await added.waitFor();
  await added.getByTestId("node-edit").click();
  await added.getByTestId("edit-title").fill("Label the total");
  await added.getByTestId("edit-inputs").fill("amount: number");
  await added.getByTestId("edit-outputs").fill("label: string");
  await added.getByTestId("edit-code").fill("console.log('labelling', amount);\nreturn { label: amount };");
  // A slot that is not `name: type` is refused, naming the line.
  await added.getByTestId("edit-outputs").fill("label string");
  await added.getByTestId("edit-save").click();
  assert.equal(await text(added.getByTestId("edit-problem")), "Outputs: line 1, label string, is not name: type (for example total: number)");
  await added.getByTestId("edit-outputs").fill("label: string");
  await added.getByTestId("edit-save").click();
  // Its id follows the title it was given (it was New node's `new-node`).
  await page.getByTestId("nodes-status").filter({ hasText: "Saved label-the-total." }).waitFor();
  assert.equal(await card(page, "new-node").count(), 0);
  await input(page, "label-the-total", "amount").getByTestId("connect-from").selectOption("total-the-order.total");
  await page.getByTestId("graph-run").click();
  await page.getByTestId("nodes-status").filter({ hasText: "The graph ran" }).waitFor();
  assert.equal(await text(output(page, "label-the-total", "label")), "13");
  assert.equal(await text(card(page, "label-the-total").getByTestId("node-warnings")), "output label must be a string, not an integer (13); passed on as it is");
  assert.equal(await text(card(page, "label-the-total").getByTestId("node-console")), "labelling 13");
  await card(page, "label-the-total").scrollIntoViewIfNeeded();
  await shot(page, "nodes-hand");
  // Undo takes back the connection, then the edit: the node is as it was added.
  await page.getByTestId("nodes-undo").click();
  await page.getByTestId("nodes-undo").click();
  await card(page, "new-node").locator("h3", { hasText: "New node" }).waitFor();
  assert.deepEqual(errors, []);
});

test("a graph in the app whose node imports kiln:csv and kiln:html: the links of a CSV of pages, with their digest", async () => {
  const { page, errors } = app();
  await show(page, "nodes");
  await page.getByTestId("graph-new-name").fill("Links");
  await page.getByTestId("graph-new").click();
  await page.getByTestId("nodes-empty").waitFor();
  // One node gives the CSV; the next imports Kiln's modules to read it.
  // Each starts as New node (`new-node`) and takes its id from its title.
  const write = async (id, title, inputs, outputs, code) => {
    await page.getByTestId("node-add").click();
    const added = card(page, "new-node");
    await added.waitFor();
    await added.getByTestId("node-edit").click();
    await added.getByTestId("edit-title").fill(title);
    await added.getByTestId("edit-inputs").fill(inputs);
    await added.getByTestId("edit-outputs").fill(outputs);
    await added.getByTestId("edit-code").fill(code);
    await added.getByTestId("edit-save").click();
    await page.getByTestId("nodes-status").filter({ hasText: `Saved ${id}.` }).waitFor();
  };
  await write(
    "pages",
    "Pages",
    "",
    "csv: string",
    'return { csv: \'name,html\\nhome,"<a href=""/a"">A</a>"\\nabout,"<nav><a href=""/b"">B</a></nav>"\\n\' };',
  );
  await write(
    "links",
    "Links",
    "csv: string",
    "links: list[string]\ndigest: string",
    'import { parse } from "kiln:csv";\nimport { select } from "kiln:html";\nconst links = parse(csv).flatMap((row) => select(row.html, "a[href]").map((a) => a.attributes.href));\nconsole.log(`${links.length} links`);\nreturn { links, digest: toHex(crypto.digest("SHA-256", links.join("\\n"))) };',
  );
  await input(page, "links", "csv").getByTestId("connect-from").selectOption("pages.csv");
  await page.getByTestId("graph-run").click();
  await page.getByTestId("nodes-status").filter({ hasText: "The graph ran" }).waitFor();
  assert.deepEqual(JSON.parse(await text(output(page, "links", "links"))), ["/a", "/b"]);
  assert.equal(JSON.parse(await text(output(page, "links", "digest"))), "920e1136383360910a2165ba206599598de8a189ac35cf7666aaedb717000e76");
  assert.equal(await text(card(page, "links").getByTestId("node-console")), "2 links");
  await card(page, "links").scrollIntoViewIfNeeded();
  await shot(page, "nodes-imports");
  // An import Kiln cannot serve fails the node before its body runs, named by line.
  await card(page, "links").getByTestId("node-edit").click();
  await card(page, "links").getByTestId("edit-code").fill('import _ from "lodash";\nreturn { links: [], digest: "" };');
  await card(page, "links").getByTestId("edit-save").click();
  // Save checks the node as it would run, and says what is wrong before any run.
  await page.getByTestId("nodes-status").filter({ hasText: "It will not run as written" }).waitFor();
  assert.match(await text(page.getByTestId("nodes-status")), /^Saved links\. It will not run as written: line 1: .*lodash.*\.$/);
  assert.equal(await page.getByTestId("nodes-status").locator(".failure").count(), 1);
  await shot(page, "nodes-check");
  await page.getByTestId("graph-run").click();
  await card(page, "links").getByTestId("node-error").waitFor();
  assert.match(await text(card(page, "links").getByTestId("node-error")), /import_refused: lodash cannot be imported.*\(line 1\)/);
  assert.deepEqual(errors, []);
});

test("a long node's progress shows on its card while it runs, and goes when its result comes", async () => {
  const { page, errors } = app();
  await show(page, "nodes");
  await page.getByTestId("graph-new-name").fill("Slow");
  await page.getByTestId("graph-new").click();
  await page.getByTestId("nodes-empty").waitFor();
  await page.getByTestId("node-add").click();
  const added = card(page, "new-node");
  await added.waitFor();
  await added.getByTestId("node-edit").click();
  await added.getByTestId("edit-title").fill("Four steps");
  await added.getByTestId("edit-outputs").fill("done: boolean");
  // The last step stays on screen for two seconds: long enough to read it
  // however slow the machine.
  await added.getByTestId("edit-code").fill("for (const step of [1, 2, 3, 4]) {\n  progress(step * 20, `step ${step} of 4`);\n  await sleep(step === 4 ? 2000 : 300);\n}\nreturn { done: true };");
  await added.getByTestId("edit-save").click();
  await page.getByTestId("nodes-status").filter({ hasText: "Saved four-steps." }).waitFor();
  await page.getByTestId("graph-run").click();
  const progress = card(page, "four-steps").getByTestId("node-progress");
  await progress.filter({ hasText: "% · step" }).waitFor();
  await progress.filter({ hasText: "80% · step 4 of 4" }).waitFor();
  assert.equal(await progress.locator("progress").getAttribute("value"), "80");
  await shot(page, "nodes-progress");
  await page.getByTestId("nodes-status").filter({ hasText: "The graph ran" }).waitFor();
  assert.equal(await progress.count(), 0);
  assert.equal(await text(output(page, "four-steps", "done")), "true");
  assert.deepEqual(errors, []);
});
