// Accessibility and fit, on the built app: axe-core (from npm) finds no serious or
// critical violation on any view — a new conversation, each view, a thread with
// an opened action block while an approval card waits, and the ended turn — and
// at a phone's width (390 × 844) no view is wider than the screen.
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { after, before, test } from "node:test";
import { addOpenAiProvider, launch, openApp, show } from "../lib/browser.mjs";
import { startAimock } from "../lib/servers.mjs";

const AXE = createRequire(import.meta.url).resolve("axe-core/axe.min.js");
const VIEWS = ["chat", "agents", "skills", "editor", "nodes", "memory", "files", "history", "settings"];

let mock;
let browser;
before(async () => {
  mock = await startAimock();
  browser = await launch();
  await openApp(browser.page);
});
after(async () => {
  await browser?.close();
  await mock?.stop();
});

/** axe-core's serious and critical violations on the page as it is, one line each. */
async function violations(page) {
  if (!(await page.evaluate(() => typeof window.axe === "object"))) await page.addScriptTag({ path: AXE });
  const found = await page.evaluate(async () => {
    const result = await window.axe.run(document, { resultTypes: ["violations"] });
    return result.violations.map((violation) => ({
      id: violation.id,
      impact: violation.impact,
      nodes: violation.nodes.slice(0, 3).map((node) => node.target.join(" ")),
    }));
  });
  return found
    .filter((violation) => violation.impact === "serious" || violation.impact === "critical")
    .map((violation) => `${violation.impact} ${violation.id}: ${violation.nodes.join(", ")}`);
}

test("no view has a serious or critical axe violation", async () => {
  const { page } = browser;
  await page.goto(`${new URL(page.url()).origin}/#/chat`);
  await page.getByTestId("chat-welcome").waitFor();
  for (const view of VIEWS) {
    await show(page, view);
    if (view === "settings") {
      // Its folded sections open, as a person reads them.
      for (const summary of await page.locator('[data-testid="settings"] details > summary').all()) await summary.click();
    }
    assert.deepEqual(await violations(page), [], `the ${view} view`);
  }
  // The check can fail: a planted image with no text is caught.
  await page.evaluate(() => document.querySelector("main").insertAdjacentHTML("beforeend", '<img id="planted" src="icon.svg">'));
  assert.match((await violations(page)).join(), /critical image-alt: #planted/);
  await page.evaluate(() => document.getElementById("planted").remove());
});

test("a thread with an opened action block and an approval card has none either, nor once the turn ended", async () => {
  const { page } = browser;
  await addOpenAiProvider(page, { name: "mock", baseUrl: `${mock.url}/v1`, key: "sk-a11y-test", model: "gpt-4o-mini" });
  await show(page, "chat");
  await page.getByTestId("thread-new").click();
  await page.getByTestId("chat-input").fill("kiln-app-sum");
  await page.getByTestId("chat-input").press("Enter");
  const card = page.getByTestId("chat-cards").getByTestId("approval");
  await card.waitFor();
  // The card shows the program as code and takes the focus on Approve: Enter approves.
  assert.match(await card.getByTestId("approval-program").textContent(), /await tools\.add\(\{a: 20, b: 30\}\)/);
  await page.waitForFunction(() => document.activeElement?.dataset.testid === "approve");
  await page.getByTestId("chat-action-summary").first().click();
  assert.deepEqual(await violations(page), [], "with the card up and the action open");
  // Opening the block moved the focus; back on Approve, Enter approves.
  await card.getByTestId("approve").focus();
  await page.keyboard.press("Enter");
  await page.getByTestId("chat-assistant").first().getByTestId("chat-end").waitFor({ timeout: 30_000 });
  const action = page.getByTestId("chat-action").first();
  if (!(await action.evaluate((details) => details.open))) await action.locator("summary").click();
  assert.deepEqual(await violations(page), [], "once the turn ended");
});

test("at a phone's width no view is wider than the screen", async () => {
  const { page } = browser;
  await page.setViewportSize({ width: 390, height: 844 });
  try {
    for (const view of VIEWS) {
      await show(page, view);
      if (view === "settings") {
        for (const details of await page.locator('[data-testid="settings"] details').all()) {
          if (!(await details.evaluate((element) => element.open))) await details.locator("summary").click();
        }
      }
      const width = await page.evaluate(() => document.documentElement.scrollWidth);
      assert.ok(width <= 390, `the ${view} view is ${width} px wide at 390`);
    }
    // The conversations are a drawer: the toggle opens it, Escape closes it.
    await show(page, "chat");
    await page.getByTestId("drawer-toggle").click();
    await page.getByTestId("threads").waitFor({ state: "visible" });
    assert.equal(await page.getByTestId("drawer-toggle").getAttribute("aria-expanded"), "true");
    await page.keyboard.press("Escape");
    await page.getByTestId("threads").waitFor({ state: "hidden" });
  } finally {
    await page.setViewportSize({ width: 1280, height: 800 });
  }
});

test("the keyboard reaches everything: Skip to content, `?` lists the shortcuts, `/` goes to the message box", async () => {
  const { page } = browser;
  // A fresh load (a fragment change alone keeps the page, and its focus).
  await page.goto(`${new URL(page.url()).origin}/#/chat`);
  await page.reload();
  await page.getByTestId("chat-welcome").waitFor();
  // The first Tab reaches the skip link, which takes the focus past the navigation.
  await page.keyboard.press("Tab");
  assert.equal(await page.evaluate(() => document.activeElement?.textContent), "Skip to content");
  await page.keyboard.press("Enter");
  assert.equal(await page.evaluate(() => document.activeElement?.id), "main");
  assert.equal(new URL(page.url()).hash, "#/chat", "the skip link leaves the route as it was");
  // `?` lists the shortcuts in a dialog; Escape closes it.
  await page.keyboard.press("?");
  const dialog = page.getByTestId("shortcuts");
  await dialog.waitFor({ state: "visible" });
  assert.match(await dialog.textContent(), /Go to the message box/);
  assert.deepEqual(await violations(page), [], "with the shortcuts open");
  await page.keyboard.press("Escape");
  await dialog.waitFor({ state: "hidden" });
  // `/` goes to the message box; typed there, `?` is a character, not a shortcut.
  await page.keyboard.press("/");
  assert.equal(await page.evaluate(() => document.activeElement?.id), "chat-input");
  await page.keyboard.type("why?");
  assert.equal(await page.getByTestId("chat-input").inputValue(), "why?");
  assert.equal(await dialog.isVisible(), false);
  await page.getByTestId("chat-input").fill("");
});

