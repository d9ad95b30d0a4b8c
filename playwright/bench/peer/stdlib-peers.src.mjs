// The JavaScript libraries the reference's sandbox bridges, bundled for the
// page: the peers of Kiln's `kiln:` modules in `bench/stdlib.mjs`.
export { default as Papa } from "papaparse";
export { load as cheerioLoad } from "cheerio";
export { load as yamlLoad } from "js-yaml";
export { marked } from "marked";
export { diffLines } from "diff";
