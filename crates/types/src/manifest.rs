//! The capability manifest (reference/004, "Sandbox capability manifest"):
//! one serializable description of what a program or a code node's body may
//! use — the language, the ECMAScript globals the engine has, Kiln's guest
//! globals ([`crate::guest::GLOBALS`]), what is deliberately absent, and
//! the budgets with their defaults and ceilings ([`RunLimits`]'s own
//! constants). Authoring prompts and help texts are written from it; the
//! sandbox's tests hold it to a real run's globals, so nothing it says is
//! restated by hand where it could drift.

use serde::Serialize;

use crate::guest::{GLOBALS, GuestGlobal, GuestModule, MODULES};
use crate::run::RunLimits;

/// The ECMAScript globals a run's context has (the engine's own, beside
/// Kiln's [`GLOBALS`]). The sandbox's tests compare it with a real context.
pub const ECMASCRIPT_GLOBALS: &[&str] = &[
    "AggregateError",
    "Array",
    "ArrayBuffer",
    "Atomics",
    "BigInt",
    "BigInt64Array",
    "BigUint64Array",
    "Boolean",
    "DataView",
    "Date",
    "Error",
    "EvalError",
    "FinalizationRegistry",
    "Float32Array",
    "Float64Array",
    "Function",
    "Infinity",
    "Int16Array",
    "Int32Array",
    "Int8Array",
    "Iterator",
    "JSON",
    "Map",
    "Math",
    "NaN",
    "Number",
    "Object",
    "Promise",
    "Proxy",
    "RangeError",
    "ReferenceError",
    "Reflect",
    "RegExp",
    "Set",
    "SharedArrayBuffer",
    "String",
    "Symbol",
    "SyntaxError",
    "TypeError",
    "TypedArray",
    "URIError",
    "Uint16Array",
    "Uint32Array",
    "Uint8Array",
    "Uint8ClampedArray",
    "WeakMap",
    "WeakRef",
    "WeakSet",
    "decodeURI",
    "decodeURIComponent",
    "encodeURI",
    "encodeURIComponent",
    "eval",
    "globalThis",
    "isFinite",
    "isNaN",
    "parseFloat",
    "parseInt",
    "undefined",
];

/// Something a program might reach for that a run does not have, and what
/// to use instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Absent {
    pub name: &'static str,
    pub instead: &'static str,
}

/// Names that are not globals of a run (the sandbox's tests check each is
/// `undefined` in a real one), or that exist and refuse (`eval`,
/// `Function` from a string).
pub const ABSENT: &[Absent] = &[
    Absent {
        name: "fetch",
        instead: "`tools.http_request({url, method, headers, body})`, when the run allows the network",
    },
    Absent {
        name: "XMLHttpRequest",
        instead: "`tools.http_request`, when the run allows the network",
    },
    Absent {
        name: "setTimeout",
        instead: "`await sleep(ms)`",
    },
    Absent {
        name: "setInterval",
        instead: "`await waitFor(condition, {interval})`",
    },
    Absent {
        name: "require",
        instead: "`import { … } from \"kiln:…\"` at the top for Kiln's modules; there are no packages",
    },
    Absent {
        name: "process",
        instead: "nothing: there is no environment; values come as inputs",
    },
    Absent {
        name: "Intl",
        instead: "`format.number`, `format.date`, `format.relativeTime` and `format.list` (`toLocaleString` is not locale-aware)",
    },
];

/// Names that exist but refuse: every string compilation is refused at the
/// engine's host hook.
pub const REFUSED: &[Absent] = &[
    Absent {
        name: "eval",
        instead: "ordinary code: strings are never compiled",
    },
    Absent {
        name: "Function",
        instead: "function expressions; `new Function(text)` is refused",
    },
];

/// One budget a run has: its field in `limits`, its unit, default and
/// bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BudgetEntry {
    /// The field of `limits` that sets it.
    pub name: &'static str,
    pub unit: &'static str,
    pub default: u64,
    pub min: u64,
    pub max: u64,
    pub summary: &'static str,
}

/// Every budget of a run, from [`RunLimits`]'s constants.
#[must_use]
pub fn budgets() -> Vec<BudgetEntry> {
    let default = RunLimits::default();
    let bytes = |value: usize| u64::try_from(value).unwrap_or(u64::MAX);
    vec![
        BudgetEntry {
            name: "js_cpu_ms",
            unit: "ms",
            default: default.js_cpu_ms,
            min: 1,
            max: RunLimits::MAX_JS_CPU_MS,
            summary: "time spent running JavaScript (waiting on tools, sleeping or a person does not count); past it the run ends `budget_exhausted`",
        },
        BudgetEntry {
            name: "wall_ms",
            unit: "ms",
            default: default.wall_ms,
            min: 1,
            max: RunLimits::MAX_WALL_MS,
            summary: "the whole run, waits included",
        },
        BudgetEntry {
            name: "person_wait_ms",
            unit: "ms",
            default: default.person_wait_ms,
            min: 0,
            max: RunLimits::MAX_PERSON_WAIT_MS,
            summary: "time held waiting on a person's approval",
        },
        BudgetEntry {
            name: "memory_bytes",
            unit: "bytes",
            default: default.memory_bytes,
            min: RunLimits::MIN_MEMORY_BYTES,
            max: RunLimits::MAX_MEMORY_BYTES,
            summary: "the sandbox's heap",
        },
        BudgetEntry {
            name: "tool_calls",
            unit: "calls",
            default: u64::from(default.tool_calls),
            min: 0,
            max: u64::from(RunLimits::MAX_TOOL_CALLS),
            summary: "tool calls of the run",
        },
        BudgetEntry {
            name: "return_bytes",
            unit: "bytes",
            default: bytes(default.return_bytes),
            min: 0,
            max: bytes(RunLimits::MAX_RETURN_BYTES),
            summary: "the returned value as JSON",
        },
        BudgetEntry {
            name: "console_bytes",
            unit: "bytes",
            default: bytes(default.console_bytes),
            min: 0,
            max: bytes(RunLimits::MAX_CONSOLE_BYTES),
            summary: "console text kept; later lines are dropped and counted",
        },
        BudgetEntry {
            name: "fetch_calls",
            unit: "calls",
            default: u64::from(default.fetch_calls),
            min: 0,
            max: u64::from(RunLimits::MAX_FETCH_CALLS),
            summary: "`http_request` calls",
        },
        BudgetEntry {
            name: "fetch_body_bytes",
            unit: "bytes",
            default: bytes(default.fetch_body_bytes),
            min: 0,
            max: bytes(RunLimits::MAX_FETCH_BODY_BYTES),
            summary: "one response body kept; the rest is cut and marked `truncated`",
        },
        BudgetEntry {
            name: "fetch_timeout_ms",
            unit: "ms",
            default: default.fetch_timeout_ms,
            min: 1,
            max: RunLimits::MAX_FETCH_TIMEOUT_MS,
            summary: "one request",
        },
    ]
}

/// How a code node's body meets its slots, in sentences (the node runner
/// does what these say; its tests hold it to them).
pub const NODE_BODY: &[&str] = &[
    "The body is the body of an async function: it may `await` and must `return` an object with one key per declared output.",
    "Each input is a constant named after its slot (`rows`, `threshold`); an optional input that did not come is `undefined`.",
    "A `bytes` input arrives as a `Uint8Array`; return a `Uint8Array` for a `bytes` output.",
    "Return every declared output on every path; a value that does not match its declared type is passed on with a warning.",
];

/// The whole manifest, as serialized for a page or a prompt.
#[derive(Debug, Clone, Serialize)]
pub struct Manifest {
    pub language: &'static str,
    pub ecmascript: &'static [&'static str],
    pub globals: Vec<GuestGlobal>,
    /// The modules a program imports (`import { parse } from "kiln:csv"`).
    pub modules: &'static [GuestModule],
    pub absent: &'static [Absent],
    pub refused: &'static [Absent],
    pub budgets: Vec<BudgetEntry>,
    pub node_body: &'static [&'static str],
}

/// The manifest of a run's surface.
#[must_use]
pub fn manifest() -> Manifest {
    Manifest {
        language: "JavaScript (ECMAScript 2024, strict where the program says so), run by the Boa engine in a sandbox with no host objects",
        ecmascript: ECMASCRIPT_GLOBALS,
        globals: GLOBALS.to_vec(),
        modules: MODULES,
        absent: ABSENT,
        refused: REFUSED,
        budgets: budgets(),
        node_body: NODE_BODY,
    }
}

impl Manifest {
    /// Every name a program may use at the top: the ECMAScript globals and
    /// Kiln's.
    #[must_use]
    pub fn names(&self) -> Vec<&'static str> {
        let mut names: Vec<&'static str> = self.ecmascript.to_vec();
        names.extend(
            self.globals
                .iter()
                .flat_map(|global| std::iter::once(global.name).chain(global.also.iter().copied())),
        );
        names
    }

    /// The names the modules export: APIs a program has once it imports them.
    #[must_use]
    pub fn exports(&self) -> Vec<&'static str> {
        self.modules
            .iter()
            .flat_map(|module| module.exports.iter().map(|export| export.name))
            .collect()
    }

    /// The help text of a code node's body, in Markdown: what the body may
    /// use and its budgets.
    #[must_use]
    pub fn node_help(&self) -> String {
        let mut text = String::from("# A code node's body\n\n");
        for line in self.node_body {
            text.push_str("- ");
            text.push_str(line);
            text.push('\n');
        }
        text.push_str(&format!("\n## Language\n\n{}.\n\n", self.language));
        text.push_str("## Globals beside ECMAScript's\n\n");
        for global in &self.globals {
            text.push_str(&format!("- `{}`: {}\n", global.usage, global.summary));
        }
        text.push_str("\n## Modules\n\nImported at the top of the body (`import { parse } from \"kiln:csv\"`, or `import * as csv from \"kiln:csv\"`):\n\n");
        for module in self.modules {
            text.push_str(&module.import_line());
            text.push('\n');
            for export in module.exports {
                text.push_str(&format!("  - `{}`: {}\n", export.usage, export.summary));
            }
        }
        text.push_str("\n## Not here\n\n");
        for absent in self.absent.iter().chain(self.refused) {
            text.push_str(&format!("- `{}`: use {}\n", absent.name, absent.instead));
        }
        text.push_str("\n## Budgets (`limits`)\n\n| name | default | range | what |\n| --- | --- | --- | --- |\n");
        for budget in &self.budgets {
            text.push_str(&format!(
                "| `{}` | {} {} | {}–{} | {} |\n",
                budget.name, budget.default, budget.unit, budget.min, budget.max, budget.summary
            ));
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budgets_are_the_limits_defaults_and_ceilings() {
        let table = budgets();
        let limits = serde_json::to_value(RunLimits::default()).expect("limits");
        let fields: Vec<&str> = limits
            .as_object()
            .expect("object")
            .keys()
            .map(String::as_str)
            .collect();
        let mut named: Vec<&str> = table.iter().map(|budget| budget.name).collect();
        named.sort_unstable();
        let mut fields = fields;
        fields.sort_unstable();
        assert_eq!(
            named, fields,
            "every field of `limits` is in the table, and nothing else"
        );
        for budget in &table {
            assert_eq!(
                limits[budget.name].as_u64(),
                Some(budget.default),
                "{}",
                budget.name
            );
            assert!(
                budget.min <= budget.default && budget.default <= budget.max,
                "{}",
                budget.name
            );
        }
    }

    #[test]
    fn the_help_text_names_every_global_and_budget() {
        let manifest = manifest();
        let help = manifest.node_help();
        for global in &manifest.globals {
            assert!(help.contains(global.usage), "{}", global.name);
        }
        for budget in &manifest.budgets {
            assert!(
                help.contains(&format!("`{}`", budget.name)),
                "{}",
                budget.name
            );
        }
        let json = serde_json::to_value(&manifest).expect("json");
        assert_eq!(json["globals"][0]["name"], "tools");
    }
}
