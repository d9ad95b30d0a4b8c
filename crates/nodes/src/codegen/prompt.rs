//! The CodePlanner's prompt, written from the capability manifest
//! ([`kiln_types::manifest`]) and the guidance of reference/004 ("Product
//! scope"): pure functions, so what the model is told can be read and
//! tested without a provider. [`unknown_apis`] is the check that keeps the
//! instructions to what a run has.

use std::fmt::Write as _;

use kiln_types::manifest::Manifest;
use serde_json::Value;

use super::CodeRequest;

/// The guidance, beside the manifest's own sentences.
pub(crate) const GUIDANCE: &[&str] = &[
    "Write pure data reshaping: read the inputs, compute, return the outputs. Call `tools.*` or `workspace` only when the instruction asks for it.",
    "Return every declared output on every path, as one object literal where you can: `return { rows, count };`. A value that exists only sometimes is `null` on the other paths; output that is emitted on some paths only is branching, which belongs in two nodes, not one.",
    "Ordinary conditionals (`if`/`else`, `switch`, ternaries, early returns) are fine.",
    "Keep `{\"$bytes\": …}` values and `Uint8Array`s as they are; never invent a base64 conversion.",
    "There are no packages or modules: write helpers inline.",
    "Name slots as JavaScript identifiers in camelCase; give each input and output a type from the vocabulary.",
];

/// The slot type vocabulary as the prompt states it.
pub(crate) const TYPES: &str = "string, number, integer, boolean, object, array, bytes, any, list[T], dict[T], and records {name: T, other?: T}";

/// The system text: the contract, the manifest and the guidance.
#[must_use]
pub fn system(manifest: &Manifest) -> String {
    let mut text = String::from(
        "You write the JavaScript body of one Kiln code node. Answer by calling `submit_code` exactly once with \
         {title, summary, code, inputs, outputs}: `title` is imperative (\"Total the order\"), `summary` one sentence, \
         `code` the body, `inputs` and `outputs` the typed slots. Your text is never read; only an accepted \
         `submit_code` call counts. When `submit_code` refuses, fix what it names and call it again.\n\n",
    );
    text.push_str("# How a body meets its slots\n\n");
    for line in manifest.node_body {
        let _ = writeln!(text, "- {line}");
    }
    let _ = write!(
        text,
        "\nSlot types: {TYPES}.\n\n# What a body may use\n\n{}.\n\n",
        manifest.language
    );
    text.push_str("Globals beside ECMAScript's:\n");
    for global in &manifest.globals {
        let _ = writeln!(text, "- `{}`: {}", global.usage, global.summary);
    }
    text.push_str("\nModules, imported at the top of the body:\n");
    for module in manifest.modules {
        let _ = writeln!(text, "{}", module.import_line());
        for export in module.exports {
            let _ = writeln!(text, "  - `{}`: {}", export.usage, export.summary);
        }
    }
    text.push_str("\nNot here:\n");
    for absent in manifest.absent.iter().chain(manifest.refused) {
        let _ = writeln!(text, "- `{}`: use {}", absent.name, absent.instead);
    }
    text.push_str("\n# Guidance\n\n");
    for line in GUIDANCE {
        let _ = writeln!(text, "- {line}");
    }
    text
}

/// The user message: the instruction, the slots known, the current code
/// for an edit, and sample values only when the person chose to send them.
#[must_use]
pub fn user(request: &CodeRequest) -> String {
    let mut text = format!("Instruction: {}\n", request.instruction.trim());
    if request.inputs.is_empty() {
        text.push_str("\nInputs: none are connected; declare what the instruction needs.\n");
    } else {
        text.push_str("\nInputs (keep these names and types):\n");
        for slot in &request.inputs {
            let _ = write!(text, "- `{}`: {}", slot.name, slot.ty);
            if let Some(description) = &slot.description {
                let _ = write!(text, " — {description}");
            }
            text.push('\n');
        }
    }
    if let Some(expected) = &request.expected {
        let _ = writeln!(
            text,
            "\nExpected output (declare it with this name and type): `{}`: {}",
            expected.name, expected.ty
        );
    }
    if let Some(current) = &request.current {
        let _ = write!(
            text,
            "\nThe node as it is now (edit it):\n```js\n{}\n```\n",
            current.code
        );
        let outputs: Vec<String> = current
            .outputs
            .iter()
            .map(|slot| format!("`{}`: {}", slot.name, slot.ty))
            .collect();
        let _ = writeln!(text, "Its outputs: {}", outputs.join(", "));
    }
    if request.include_samples
        && let Some(samples) = &request.samples
    {
        let _ = writeln!(
            text,
            "\nSample input values:\n{}",
            serde_json::to_string_pretty(&Value::Object(samples.clone())).unwrap_or_default()
        );
    }
    text
}

/// The APIs `text` names in backticks that a run does not have: each
/// backticked call or member's root (`tools.x` → `tools`, `sleep(ms)` → `sleep`,
/// `Math.max` → `Math`) must be a name of the manifest, a word of the
/// language, a slot type or budget, or a name the prompt itself defines
/// (the submission's fields, the slot names of its examples). What the
/// manifest calls absent (`fetch`, `setTimeout`, …) is unknown here: the
/// prompt names those only in its "Not here" list, which is the manifest's
/// own.
#[must_use]
pub fn unknown_apis(text: &str, manifest: &Manifest) -> Vec<String> {
    const LANGUAGE: &[&str] = &[
        "return",
        "await",
        "async",
        "if",
        "else",
        "switch",
        "case",
        "null",
        "undefined",
        "true",
        "false",
        "const",
        "let",
        "function",
        "this",
        "new",
        "typeof",
        "import",
    ];
    const SUBMISSION: &[&str] = &[
        "submit_code",
        "title",
        "summary",
        "code",
        "inputs",
        "outputs",
        "limits",
        "rows",
        "count",
        "threshold",
        "$bytes",
        "name",
        "type",
        "description",
        "default",
        "required",
        "camelCase",
    ];
    let mut names = manifest.names();
    names.extend(manifest.exports());
    let types: Vec<&str> = kiln_types::node::PLAIN_TYPES.to_vec();
    let budgets: Vec<&str> = manifest.budgets.iter().map(|budget| budget.name).collect();
    let mut unknown = Vec::new();
    for (at, token) in text.split('`').enumerate() {
        if at % 2 == 0 || token.is_empty() {
            continue;
        }
        let token = token.trim_start_matches(['{', '(', '"', '[', ' ', '!']);
        let root: String = token
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '$')
            .collect();
        // Only what is used as an API: a call or a member (`x(…)`, `x.y`);
        // a bare word is a name, a code or a parameter.
        let used = token[root.len()..].starts_with(['(', '.']);
        if !used || root.is_empty() || root.chars().next().is_some_and(|c| c.is_ascii_digit()) {
            continue;
        }
        let refused = manifest.refused.iter().any(|entry| entry.name == root);
        let known = (names.contains(&root.as_str()) && !refused)
            || LANGUAGE.contains(&root.as_str())
            || SUBMISSION.contains(&root.as_str())
            || types.contains(&root.as_str())
            || budgets.contains(&root.as_str())
            || matches!(root.as_str(), "list" | "dict");
        if !known && !unknown.contains(&root) {
            unknown.push(root);
        }
    }
    unknown
}
