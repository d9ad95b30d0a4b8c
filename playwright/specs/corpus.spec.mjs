// A representative subset of the hostile corpus (every 9th program, in name
// order) run through the page: each ends with a result or a readable error, the
// page raises nothing, and a normal program runs after them.
import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { runProgram, useApp } from "../lib/browser.mjs";

const corpus = fileURLToPath(new URL("../../../shared/testdata/escape-corpus/", import.meta.url));

function programs(dir) {
  return readdirSync(dir)
    .sort()
    .flatMap((name) => {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) return programs(path);
      return name.endsWith(".js") ? [path] : [];
    });
}

const app = useApp();

test("hostile programs end cleanly in the browser sandbox", async () => {
  const { page, errors } = app();
  const all = programs(corpus);
  assert.ok(all.length >= 200, `the corpus should be beside the checkout at ${corpus}`);
  const subset = all.filter((_, index) => index % 9 === 0);
  for (const path of subset) {
    const status = await runProgram(page, readFileSync(path, "utf8"), { timeout: 20_000 });
    assert.doesNotMatch(status, /sandbox failed/, `${relative(corpus, path)}: ${status}`);
    assert.ok(
      /^(Completed|The program|A tool call|Stopped)/.test(status),
      `${relative(corpus, path)} ended with an unexpected status: ${status}`,
    );
  }
  assert.match(await runProgram(page, "return 2 + 2"), /^Completed/);
  assert.equal(await page.getByTestId("result-value").textContent(), "4");
  assert.deepEqual(errors, []);
});
