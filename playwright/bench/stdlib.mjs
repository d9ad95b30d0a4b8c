// The guest's standard library beside the JavaScript libraries the
// reference's sandbox bridges, on the same data in the same headless
// Chromium: kiln:csv beside papaparse, kiln:html's select beside cheerio,
// kiln:yaml beside js-yaml, kiln:markdown beside marked, kiln:diff beside
// diff, crypto.digest beside WebCrypto's subtle.digest. Prints JSON lines
// that `cargo xtask bench` shows. Not a test: it asserts nothing about time.
//
// Kiln's figure is inside the sandbox and includes the crossing into the
// library and back: a program that makes the data and calls the export N
// times, less the same program without the calls, over N (both from the
// report's duration, medians of RUNS). The peer runs on the page's main
// thread on data made by the same generator, timed with performance.now().
//
// First, what loading the library's own wasm costs (`kiln_modules.js`, which
// the sandbox worker instantiates before the first program importing
// kiln:html, kiln:markdown, kiln:diff or kiln:zip): a fresh worker's first
// such run beside its next, both timed on the page from request to report.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { launch } from "../lib/browser.mjs";
import { serveIsolated } from "../lib/serve.mjs";
import { bundle } from "./peer/build.mjs";

const RUNS = Number(process.env.KILN_BENCH_RUNS ?? 5);

// Each case: the data's generator (JavaScript, run in the guest and in the
// page alike), Kiln's import and call, the peer's call, and how many calls a
// sample makes.
const CASES = [
  {
    figure: "kiln:csv parse, 10,000 rows × 5 columns (≈ 400 KB) / papaparse",
    data: "let text = 'id,name,price,qty,note\\n'; for (let i = 0; i < 10000; i++) text += `${i},item ${i},${(i % 100) + 0.5},${i % 7},\"note, ${i}\"\\n`; const data = text;",
    kiln: ["import { parse } from \"kiln:csv\";", "parse(data).length"],
    peer: "Papa.parse(data, { header: true, skipEmptyLines: true }).data.length",
    n: 5,
  },
  {
    figure: "kiln:html select 1,000 of 2,000 links (≈ 120 KB page) / cheerio",
    data: "let html = '<html><body><ul>'; for (let i = 0; i < 2000; i++) html += `<li class=\"i\"><a href=\"/p/${i}\">Item <b>${i}</b></a></li>`; const data = html + '</ul></body></html>';",
    kiln: ["import { select } from \"kiln:html\";", "select(data, 'li > a', { limit: 1000 }).length"],
    peer: "(() => { const $ = cheerioLoad(data); return $('li > a').slice(0, 1000).map((_, el) => ({ text: $(el).text(), html: $.html(el), attributes: el.attribs })).get().length; })()",
    n: 5,
  },
  {
    figure: "kiln:yaml parse, 2,000 entries (≈ 110 KB) / js-yaml",
    data: "let text = ''; for (let i = 0; i < 2000; i++) text += `key${i}:\\n  name: item ${i}\\n  tags: [a, b, c]\\n  n: ${i}\\n  ok: ${i % 2 === 0}\\n`; const data = text;",
    kiln: ["import { parse } from \"kiln:yaml\";", "Object.keys(parse(data)).length"],
    peer: "Object.keys(yamlLoad(data)).length",
    n: 5,
  },
  {
    figure: "kiln:markdown toHtml, 500 sections (≈ 60 KB) / marked",
    data: "let text = ''; for (let i = 0; i < 500; i++) text += `## Heading ${i}\\n\\nSome *text* with \\`code\\` and [a link](https://example.com/${i}).\\n\\n- one\\n- two **${i}**\\n\\n`; const data = text;",
    kiln: ["import { toHtml } from \"kiln:markdown\";", "toHtml(data).length"],
    peer: "marked.parse(data).length",
    n: 10,
  },
  {
    figure: "kiln:diff lines, 2,000 lines with 5% changed / diff",
    data: "const a = [], b = []; for (let i = 0; i < 2000; i++) { a.push(`line ${i} of the text`); b.push(i % 20 === 7 ? `line ${i} changed` : `line ${i} of the text`); } const data = [a.join('\\n') + '\\n', b.join('\\n') + '\\n'];",
    kiln: ["import { lines } from \"kiln:diff\";", "lines(data[0], data[1]).length"],
    peer: "diffLines(data[0], data[1]).length",
    n: 5,
  },
  {
    figure: "crypto.digest SHA-256 of 1 MiB / subtle.digest",
    data: "const data = new Uint8Array(1 << 20); for (let i = 0; i < data.length; i++) data[i] = (i * 31) & 255;",
    kiln: ["", "crypto.digest('SHA-256', data).length"],
    peer: "(await crypto.subtle.digest('SHA-256', data)).byteLength",
    n: 20,
  },
];

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const round = (ms) => Math.round(ms * 1000) / 1000;

const peers = mkdtempSync(join(tmpdir(), "kiln-stdlib-peers-"));
await bundle(fileURLToPath(new URL("peer/stdlib-peers.src.mjs", import.meta.url)), join(peers, "stdlib-peers.mjs"));
const server = await serveIsolated([process.env.KILN_PKG, peers]);
const browser = await launch();
try {
  const page = await browser.context.newPage();
  await page.goto(`http://127.0.0.1:${server.address().port}/kiln.js`);
  const figures = await page.evaluate(
    async ({ CASES, RUNS }) => {
      const { Kiln } = await import("/kiln.js");
      const peers = await import("/stdlib-peers.mjs");
      const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
      const kiln = await Kiln.load({ poolSize: 1 });
      const limits = { js_cpu_ms: 120_000, wall_ms: 120_000 };
      const duration = async (code) => {
        const { report } = await kiln.report({ code, limits });
        if (report.outcome.status !== "completed") throw new Error(`${code.slice(0, 200)}: ${JSON.stringify(report.outcome)}`);
        return report.duration_ms;
      };
      const wall = async (code) => {
        const t0 = performance.now();
        await duration(code);
        return performance.now() - t0;
      };
      await wall("return 1;");
      const plain = await wall("return 1;");
      const importing = 'import { toHtml } from "kiln:markdown";\nreturn toHtml("*x*");';
      const first = await wall(importing);
      const next = await wall(importing);
      const load = { plain, first, next };
      const out = [];
      for (const { figure, data, kiln: [imports, call], peer, n } of CASES) {
        const base = `${imports}\n${data}\nreturn 0;`;
        const full = `${imports}\n${data}\nlet r; for (let i = 0; i < ${n}; i++) r = ${call};\nreturn r;`;
        await duration(full);
        const bases = [];
        const fulls = [];
        for (let run = 0; run < RUNS; run++) {
          bases.push(await duration(base));
          fulls.push(await duration(full));
        }
        const kilnMs = Math.max(median(fulls) - median(bases), 0) / n;
        const run = new Function(
          "peers",
          `return (async () => { const { Papa, cheerioLoad, yamlLoad, marked, diffLines } = peers; ${data}
            let r; for (let i = 0; i < 2; i++) r = ${peer};
            const samples = [];
            for (let run = 0; run < ${RUNS}; run++) {
              const t0 = performance.now();
              for (let i = 0; i < ${n}; i++) r = ${peer};
              samples.push((performance.now() - t0) / ${n});
            }
            return samples; })()`,
        );
        const peerMs = median(await run(peers));
        out.push({ figure, kilnMs, peerMs });
      }
      return { out, load };
    },
    { CASES, RUNS },
  );
  const { load } = figures;
  console.log(
    JSON.stringify({
      figure: "a worker's first run importing kiln:markdown (loads kiln_modules.js) / its next such run / a run importing nothing (ms, request to report)",
      first_ms: round(load.first),
      next_ms: round(load.next),
      plain_ms: round(load.plain),
    }),
  );
  for (const { figure, kilnMs, peerMs } of figures.out) {
    console.log(JSON.stringify({ figure, kiln_ms: round(kilnMs), peer_ms: round(peerMs), speed: Math.round((peerMs / kilnMs) * 100) / 100 }));
  }
} finally {
  await browser.close();
  server.close();
  rmSync(peers, { recursive: true, force: true });
}
