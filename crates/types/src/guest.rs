//! The guest's API: every global Kiln defines in a sandbox run beside the
//! ECMAScript built-ins, as data. The agent's system prompt and the help
//! texts are written from this table, never by hand, and the sandbox's tests
//! fail when a run's globals and this table differ, so a prompt cannot
//! advertise what a run does not have.

/// One global Kiln defines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct GuestGlobal {
    /// The global's name.
    pub name: &'static str,
    /// The other globals this entry defines and describes with it
    /// (`TextDecoder` beside `TextEncoder`).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub also: &'static [&'static str],
    /// How a program uses it.
    pub usage: &'static str,
    /// What it does, in a sentence or two.
    pub summary: &'static str,
}

/// Every global a run defines beside the ECMAScript built-ins, in the order
/// a prompt lists them.
pub const GLOBALS: &[GuestGlobal] = &[
    GuestGlobal {
        name: "tools",
        also: &[],
        usage: "await tools.NAME({...arguments}); tools.describe(NAME)",
        summary: "Calls one of the run's tools through the permission ladder. Resolves to the tool's result; rejects with an Error whose `code` says why (`tool_unavailable`, `invalid_arguments`, `denied`, …) and whose `detail` has the tool's own details. Calls may run concurrently with Promise.all. `tools.describe(NAME)` answers the tool's TypeScript declaration.",
    },
    GuestGlobal {
        name: "console",
        also: &[],
        usage: "console.log(...values)  (also .info, .warn, .error, .debug)",
        summary: "Prints one line to the run's console output, which the result shows. The output has a budget; printing less is better.",
    },
    GuestGlobal {
        name: "sleep",
        also: &[],
        usage: "await sleep(ms)",
        summary: "Waits `ms` milliseconds (an integer from 0 to 10000). Counts against the wall budget only.",
    },
    GuestGlobal {
        name: "waitFor",
        also: &[],
        usage: "await waitFor(async () => condition, {timeout, interval})",
        summary: "Calls the condition until it returns a truthy value, which it resolves to; `timeout` at most 30000 ms (default 30000), `interval` at least 250 ms (default 500). Rejects when the time is up.",
    },
    GuestGlobal {
        name: "workspace",
        also: &[],
        usage: "await workspace.read(path) / .write(path, text) / .list(dir) / .stat(path) / .mkdir(path) / .remove(path)",
        summary: "The run's workspace files, over the file tools (so each call is one tool call, through the same ladder), answering their shapes: `list` → `[{name, path, is_dir, size, modified_ms}]`, `stat` and `write` → `{path, exists, is_file, is_dir, size, modified_ms}`. Present only when the run has the file tools.",
    },
    GuestGlobal {
        name: "agents",
        also: &[],
        usage: "await agents.run(prompt, {outputSchema, tools, agent}) / agents.start(prompt) → id / agents.wait({ids, timeoutMs})",
        summary: "Sub-agents with your tools: `run` answers {status, value | error} (it does not reject when the child fails); fan out with Promise.all; `start` and `wait` run them in the background. A child sees only its prompt. `agent` (an orchestrator only) hands it to a member of your team by slug.",
    },
    GuestGlobal {
        name: "TextEncoder",
        also: &[
            "TextDecoder",
            "atob",
            "btoa",
            "toBase64",
            "fromBase64",
            "toHex",
            "fromHex",
        ],
        usage: "new TextEncoder().encode(text) / new TextDecoder().decode(bytes); toBase64(bytes, {alphabet: \"base64url\", omitPadding}) / fromBase64(text) / toHex(bytes) / fromHex(text); atob / btoa",
        summary: "UTF-8 text to a `Uint8Array` and back, and bytes to Base64 or hex text and back. At most 5,000,000 characters of text or 10 MiB of bytes a call.",
    },
    GuestGlobal {
        name: "URL",
        also: &["URLSearchParams"],
        usage: "new URL(url, base?) / new URLSearchParams(query | {name: value} | pairs); url.searchParams",
        summary: "WHATWG URLs: parse, resolve against a base, read and change parts; query strings read and written with their encoding.",
    },
    GuestGlobal {
        name: "structuredClone",
        also: &[],
        usage: "structuredClone(value)",
        summary: "A deep copy of plain data, arrays, `Map`, `Set`, `Date`, `RegExp` and typed arrays, cycles kept; at most 64 levels deep.",
    },
    GuestGlobal {
        name: "crypto",
        also: &[],
        usage: "crypto.digest(\"SHA-256\", textOrBytes) / crypto.hmac(\"SHA-256\", key, data) / crypto.randomUUID() / crypto.getRandomValues(typedArray)",
        summary: "Digests and HMACs (SHA-1, SHA-256, SHA-384, SHA-512) of a string's UTF-8 or of bytes, answered as a `Uint8Array` (`toHex` for text); random UUIDs; random bytes, 65,536 a call. `crypto.subtle.digest` answers a promise of an `ArrayBuffer`, as in a browser.",
    },
    GuestGlobal {
        name: "format",
        also: &[],
        usage: "format.number(1234.5, {locale: \"de\", style: \"currency\", currency: \"EUR\"}) / format.date(date, {locale, timeZone, dateStyle, timeStyle}) / format.relativeTime(-1, \"day\", {locale, numeric: \"auto\"}) / format.list([\"a\", \"b\"], {locale, type: \"disjunction\"})",
        summary: "Numbers (decimal, percent, currency; fraction digits, grouping), dates (`dateStyle` full|long|medium|short, `timeStyle` medium|short, an IANA `timeZone`), relative times and lists, as `Intl` writes them for a locale (default \"en\", UTC). The only locale-aware formatting a run has.",
    },
    GuestGlobal {
        name: "parallelMap",
        also: &[],
        usage: "await parallelMap(items, async (item, index) => ..., concurrency?)",
        summary: "Maps `items` with at most `concurrency` calls at once (default 5, at most 32), the results in the items' order; rejects with the first failure.",
    },
    GuestGlobal {
        name: "progress",
        also: &[],
        usage: "progress(percent, message?)",
        summary: "Tells the person watching how far a long program has come (0 to 100, with an optional short message). Returns at once; reports closer than 100 ms apart, or past 1000 in a run, are dropped.",
    },
    GuestGlobal {
        name: "finish",
        also: &[],
        usage: "finish(value)",
        summary: "Ends the run at once with `value` (JSON) as the result of the task. Nothing after it runs, not even a `finally`.",
    },
];

/// The names of [`GLOBALS`] and the others each defines, in order.
#[must_use]
pub fn global_names() -> Vec<&'static str> {
    GLOBALS
        .iter()
        .flat_map(|global| std::iter::once(global.name).chain(global.also.iter().copied()))
        .collect()
}

/// One export of a module a program imports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct GuestExport {
    pub name: &'static str,
    /// How a program calls it.
    pub usage: &'static str,
    pub summary: &'static str,
}

/// A library a program imports by its `kiln:` specifier (reference/000,
/// "Libraries are imports, never globals"): `import { parse } from
/// "kiln:csv"`, `import * as csv from "kiln:csv"`, or its default export,
/// the same namespace. The import is the declaration: a code node's body
/// says what it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct GuestModule {
    pub specifier: &'static str,
    pub summary: &'static str,
    pub exports: &'static [GuestExport],
}

/// Every module a program may import, in the order a prompt lists them.
pub const MODULES: &[GuestModule] = &[
    GuestModule {
        specifier: "kiln:csv",
        summary: "CSV and other delimited text.",
        exports: &[
            GuestExport {
                name: "parse",
                usage: "parse(text, {header = true, delimiter = \",\", quote = \"\\\"\", trim = false, skipEmptyLines = true})",
                summary: "Rows of the text: objects keyed by the first row when `header`, else arrays of strings. Quoted fields may hold delimiters and line breaks.",
            },
            GuestExport {
                name: "stringify",
                usage: "stringify(rows, {header, delimiter = \",\"})",
                summary: "CSV text of `rows` (objects, whose keys make the header row unless `header: false`, or arrays), quoting where needed.",
            },
        ],
    },
    GuestModule {
        specifier: "kiln:html",
        summary: "HTML pages, parsed as a browser would.",
        exports: &[
            GuestExport {
                name: "select",
                usage: "select(html, cssSelector, {limit = 100})",
                summary: "The elements matching the CSS selector, in document order, each `{text, html, attributes}` (at most `limit`, at most 1000).",
            },
            GuestExport {
                name: "toMarkdown",
                usage: "toMarkdown(html)",
                summary: "The page's content as Markdown (headings, links, lists, emphasis, code), scripts and styles dropped.",
            },
        ],
    },
    GuestModule {
        specifier: "kiln:markdown",
        summary: "Markdown (CommonMark with tables, strikethrough and task lists).",
        exports: &[GuestExport {
            name: "toHtml",
            usage: "toHtml(markdown, {allowHtml = false})",
            summary: "The Markdown rendered to HTML; raw HTML in the Markdown is escaped unless `allowHtml`.",
        }],
    },
    GuestModule {
        specifier: "kiln:yaml",
        summary: "YAML documents.",
        exports: &[
            GuestExport {
                name: "parse",
                usage: "parse(text)",
                summary: "The document as plain data (mapping keys are strings); an alias that would expand without bound is refused.",
            },
            GuestExport {
                name: "stringify",
                usage: "stringify(value)",
                summary: "YAML text of plain data.",
            },
        ],
    },
    GuestModule {
        specifier: "kiln:xml",
        summary: "XML documents as plain data.",
        exports: &[
            GuestExport {
                name: "parse",
                usage: "parse(xml, {attributePrefix = \"@\", textKey = \"#text\"})",
                summary: "`{root: …}`: an element with only text is its text, attributes are `@name`, text beside children is `#text`, a repeated element is a list. Only XML's own entities are read.",
            },
            GuestExport {
                name: "stringify",
                usage: "stringify({root: …}, {attributePrefix, textKey})",
                summary: "XML text of data shaped as `parse` answers it.",
            },
        ],
    },
    GuestModule {
        specifier: "kiln:diff",
        summary: "Differences between two texts.",
        exports: &[
            GuestExport {
                name: "lines",
                usage: "lines(before, after)",
                summary: "The texts compared line by line: `[{value, added, removed, count}]`, unchanged parts included, in order.",
            },
            GuestExport {
                name: "words",
                usage: "words(before, after)",
                summary: "The same, word by word (white space kept with its word).",
            },
            GuestExport {
                name: "unified",
                usage: "unified(before, after, {context = 3, from = \"before\", to = \"after\"})",
                summary: "A unified diff (`---`, `+++`, `@@` hunks), as `diff -u` prints it; empty when the texts are the same.",
            },
        ],
    },
    GuestModule {
        specifier: "kiln:zip",
        summary: "Zip archives in memory, bytes in and out (deflate; an archive at most 10 MiB a call, at most 50 MiB unzipped a run).",
        exports: &[
            GuestExport {
                name: "list",
                usage: "list(bytes)",
                summary: "The archive's entries: `[{name, size, compressedSize, isDirectory, modified}]`, `modified` an ISO 8601 local time or null.",
            },
            GuestExport {
                name: "read",
                usage: "read(bytes, name, {text = false})",
                summary: "The entry's bytes as a `Uint8Array`, or its UTF-8 text when `text`; a missing name is an error listing names there are.",
            },
            GuestExport {
                name: "write",
                usage: "write({name: stringOrBytes} or [{name, data}], {level = 6})",
                summary: "A new archive as a `Uint8Array` (`level` 0 stores, 1-9 deflates); a name ending in `/` is a directory; absolute or `..` names are refused.",
            },
        ],
    },
    GuestModule {
        specifier: "kiln:dates",
        summary: "Dates in IANA time zones. A date is a `Date`, epoch milliseconds, or ISO 8601 text (`\"2026-03-08\"`, `\"2026-03-08T14:30:00Z\"`, `\"2026-03-08T09:30:00-04:00[America/New_York]\"`); answers are that last form, so the zone carries on. `zone` (default the text's own, else \"UTC\") is where a date is shown and where text without an offset is read.",
        exports: &[
            GuestExport {
                name: "parse",
                usage: "parse(text, {zone, format})",
                summary: "The date in `text`, ISO 8601 or read by a strftime `format` such as \"%d/%m/%Y %H:%M\".",
            },
            GuestExport {
                name: "format",
                usage: "format(date, pattern, {zone})",
                summary: "The date as strftime text (`%Y-%m-%d %H:%M %Z`, `%A %-d %B`; English names), or the answer form without a pattern.",
            },
            GuestExport {
                name: "add",
                usage: "add(date, {years, months, weeks, days, hours, minutes, seconds, milliseconds}, {zone})",
                summary: "The date moved by whole amounts (negative to go back): days and longer on the zone's calendar (a day across a DST change is 23 or 25 hours; Jan 31 + 1 month is Feb 28 or 29), hours and shorter exact.",
            },
            GuestExport {
                name: "difference",
                usage: "difference(a, b, {unit = \"days\", zone})",
                summary: "`a - b` as a number of whole `unit`s (years, months, weeks, days, hours, minutes, seconds, milliseconds), truncated toward zero.",
            },
            GuestExport {
                name: "startOf",
                usage: "startOf(date, unit, {zone})",
                summary: "The first instant of the year, month, week (from Monday), day, hour, minute or second the date falls in.",
            },
            GuestExport {
                name: "endOf",
                usage: "endOf(date, unit, {zone})",
                summary: "The last millisecond of that unit.",
            },
            GuestExport {
                name: "toZone",
                usage: "toZone(date, zone)",
                summary: "The same instant shown in `zone` (\"Asia/Tokyo\", \"+05:30\").",
            },
            GuestExport {
                name: "toDate",
                usage: "toDate(date)",
                summary: "The same instant as a JavaScript `Date`.",
            },
        ],
    },
];

impl GuestModule {
    /// The declaration that imports every export:
    /// `import { parse, stringify } from "kiln:csv"`.
    #[must_use]
    pub fn import(&self) -> String {
        let names: Vec<&str> = self.exports.iter().map(|export| export.name).collect();
        format!(
            "import {{ {} }} from \"{}\"",
            names.join(", "),
            self.specifier
        )
    }

    /// Its line in a prompt: how to import every export, and what it is for.
    #[must_use]
    pub fn import_line(&self) -> String {
        format!("- `{}`: {}", self.import(), self.summary)
    }
}

/// The module `specifier` names, if Kiln has it.
#[must_use]
pub fn module(specifier: &str) -> Option<&'static GuestModule> {
    MODULES.iter().find(|module| module.specifier == specifier)
}

/// Refuses an import of `specifier` binding `names` that Kiln cannot serve:
/// a specifier that is not `kiln:`, a module Kiln does not have, an export it
/// lacks. Each sentence starts with the code `import_refused`.
///
/// # Errors
///
/// The sentence naming what was wrong and what there is.
pub fn check_import(specifier: &str, names: &[&str]) -> Result<(), String> {
    let known = || {
        MODULES
            .iter()
            .map(|module| format!("`{}`", module.specifier))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !specifier.starts_with("kiln:") {
        return Err(format!(
            "import_refused: `{specifier}` cannot be imported: a program imports only Kiln's own modules ({}); there are no packages",
            known()
        ));
    }
    let Some(found) = module(specifier) else {
        return Err(format!(
            "import_refused: there is no module `{specifier}`; Kiln has {}",
            known()
        ));
    };
    for name in names {
        if !found.exports.iter().any(|export| export.name == *name) {
            return Err(format!(
                "import_refused: `{specifier}` has no export `{name}`; it has {}",
                found
                    .exports
                    .iter()
                    .map(|export| format!("`{}`", export.name))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    Ok(())
}
