//! `kiln eval code-gen` (reference/004, "Eval"): the CodePlanner
//! ([`kiln_nodes::codegen::author`]) over cases of eight shapes — reshape,
//! merge, compute, extract, split, format, validate, seed — each asked for
//! the way a person would ask, then the accepted node run in the real
//! sandbox ([`kiln_nodes::node::run_node`]) on held-out inputs that never reach
//! the prompt, its outputs compared with the exact ones (numbers by value,
//! objects whatever their key order). Acceptance on the first round and
//! after repair are counted apart, as the held-out correctness is: a node
//! `submit_code` accepts can still compute the wrong thing. Every case
//! carries a hand-written reference body, which its tests run on the same
//! held-out inputs, so each case is known to be solvable as worded.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::rc::Rc;

use kiln_http::Clock;
use kiln_providers::Provider;
use kiln_types::cancel::AbortSignal;
use kiln_types::node::{CodeNode, InputSlot, OutputSlot, SlotType};
use serde_json::{Map, Value, json};

use kiln_nodes::codegen::{self, CodeRequest};
use kiln_nodes::node;
use kiln_run::SandboxRunner;
use kiln_run::{Environment, People};

/// What a case asks a node to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Shape {
    /// The same data in another form (renamed fields, grouped rows).
    Reshape,
    /// Two inputs made one (a join, a deep merge, a union).
    Merge,
    /// A number worked out from the inputs.
    Compute,
    /// Structured values read out of text.
    Extract,
    /// One input sent down several outputs or into parts.
    Split,
    /// Values written as text in a set layout.
    Format,
    /// A verdict on an input, with the reasons.
    Validate,
    /// A node with no inputs that makes data.
    Seed,
}

impl Shape {
    /// Every shape, in the order the table shows them.
    pub const ALL: [Self; 8] = [
        Self::Reshape,
        Self::Merge,
        Self::Compute,
        Self::Extract,
        Self::Split,
        Self::Format,
        Self::Validate,
        Self::Seed,
    ];

    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Reshape => "reshape",
            Self::Merge => "merge",
            Self::Compute => "compute",
            Self::Extract => "extract",
            Self::Split => "split",
            Self::Format => "format",
            Self::Validate => "validate",
            Self::Seed => "seed",
        }
    }
}

/// One slot of a case, as written in the case: its type is parsed when the
/// request is made (a test parses every case's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Slot {
    pub name: &'static str,
    #[serde(rename = "type")]
    pub ty: &'static str,
    pub description: &'static str,
}

impl Slot {
    fn slot_type(&self) -> Result<SlotType, String> {
        SlotType::parse(self.ty).map_err(|error| {
            format!(
                "slot `{}`'s type `{}` does not parse: {}",
                self.name, self.ty, error.message
            )
        })
    }

    fn description(&self) -> Option<String> {
        (!self.description.is_empty()).then(|| self.description.to_owned())
    }

    /// As an input slot.
    ///
    /// # Errors
    ///
    /// The type does not parse.
    pub fn input(&self) -> Result<InputSlot, String> {
        Ok(InputSlot {
            name: self.name.to_owned(),
            ty: self.slot_type()?,
            description: self.description(),
            default: None,
            required: None,
        })
    }

    /// As an output slot.
    ///
    /// # Errors
    ///
    /// The type does not parse.
    pub fn output(&self) -> Result<OutputSlot, String> {
        Ok(OutputSlot {
            name: self.name.to_owned(),
            ty: self.slot_type()?,
            description: self.description(),
        })
    }
}

/// One held-out input and the outputs it must give: compared on the
/// outputs named here, so a node may give more.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct HeldOut {
    pub inputs: Map<String, Value>,
    pub outputs: Map<String, Value>,
}

fn held(inputs: Value, outputs: Value) -> HeldOut {
    let object = |value: Value| match value {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    HeldOut {
        inputs: object(inputs),
        outputs: object(outputs),
    }
}

/// One case: what a person asks for, the slots it is asked with, and the
/// held-out inputs that judge the node.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CodegenCase {
    pub name: &'static str,
    pub shape: Shape,
    /// As a person would ask: never the held-out values.
    pub instruction: &'static str,
    /// The inputs already connected: the request's, kept by the node.
    pub inputs: &'static [Slot],
    /// The outputs the case is judged on; the reference declares them.
    pub outputs: &'static [Slot],
    /// Whether the request names `outputs[0]` as its expected output (a
    /// node asked for from the input it feeds). Without it the instruction
    /// names the outputs itself.
    pub expected: bool,
    /// Two or three inputs with their exact outputs; a seed has one, since
    /// a node without inputs has only one input to be given.
    pub held_out: Vec<HeldOut>,
    /// A correct body, written by hand: the proof the case is solvable as
    /// worded and its outputs are right.
    pub reference: &'static str,
}

impl CodegenCase {
    /// The request the model is given: the instruction, the inputs, the
    /// expected output when the case names one, and no samples.
    ///
    /// # Errors
    ///
    /// A slot's type does not parse.
    pub fn request(&self) -> Result<CodeRequest, String> {
        let expected = match (self.expected, self.outputs.first()) {
            (true, Some(slot)) => Some(slot.output()?),
            _ => None,
        };
        Ok(CodeRequest {
            instruction: self.instruction.to_owned(),
            inputs: self
                .inputs
                .iter()
                .map(Slot::input)
                .collect::<Result<_, _>>()?,
            expected,
            current: None,
            samples: None,
            include_samples: false,
        })
    }

    /// The node of the reference body.
    ///
    /// # Errors
    ///
    /// A slot's type does not parse.
    pub fn reference_node(&self) -> Result<CodeNode, String> {
        Ok(CodeNode {
            title: format!("Reference for {}", self.name),
            code: self.reference.to_owned(),
            inputs: self
                .inputs
                .iter()
                .map(Slot::input)
                .collect::<Result<_, _>>()?,
            outputs: self
                .outputs
                .iter()
                .map(Slot::output)
                .collect::<Result<_, _>>()?,
        })
    }
}

/// The suite: two or more cases of each [`Shape`].
#[must_use]
#[expect(clippy::too_many_lines, reason = "a table of cases")]
pub fn codegen_cases() -> Vec<CodegenCase> {
    vec![
        CodegenCase {
            name: "reshape-rename",
            shape: Shape::Reshape,
            instruction: "Rename the fields of each person: first_name becomes firstName, last_name becomes lastName and birth_year becomes born. Keep the people in the same order.",
            inputs: &[Slot {
                name: "people",
                ty: "list[{first_name: string, last_name: string, birth_year: integer}]",
                description: "people as the old system exports them",
            }],
            outputs: &[Slot {
                name: "renamed",
                ty: "list[{firstName: string, lastName: string, born: integer}]",
                description: "",
            }],
            expected: true,
            held_out: vec![
                held(
                    json!({"people": [
                        {"first_name": "Ingrid", "last_name": "Solberg", "birth_year": 1987},
                        {"first_name": "Tomasz", "last_name": "Wrona", "birth_year": 2001}
                    ]}),
                    json!({"renamed": [
                        {"firstName": "Ingrid", "lastName": "Solberg", "born": 1987},
                        {"firstName": "Tomasz", "lastName": "Wrona", "born": 2001}
                    ]}),
                ),
                held(json!({"people": []}), json!({"renamed": []})),
                held(
                    json!({"people": [{"first_name": "Amara", "last_name": "Okafor", "birth_year": 1964}]}),
                    json!({"renamed": [{"firstName": "Amara", "lastName": "Okafor", "born": 1964}]}),
                ),
            ],
            reference: "return {\n  renamed: people.map((person) => ({\n    firstName: person.first_name,\n    lastName: person.last_name,\n    born: person.birth_year,\n  })),\n};",
        },
        CodegenCase {
            name: "reshape-group",
            shape: Shape::Reshape,
            instruction: "Group the orders by customer: for each customer, the list of their order amounts, in the order the orders came.",
            inputs: &[Slot {
                name: "orders",
                ty: "list[{customer: string, amount: number}]",
                description: "orders in the order they came",
            }],
            outputs: &[Slot {
                name: "byCustomer",
                ty: "dict[list[number]]",
                description: "",
            }],
            expected: true,
            held_out: vec![
                held(
                    json!({"orders": [
                        {"customer": "harbor-cafe", "amount": 42.5},
                        {"customer": "mill-street", "amount": 10},
                        {"customer": "harbor-cafe", "amount": 7.25}
                    ]}),
                    json!({"byCustomer": {"harbor-cafe": [42.5, 7.25], "mill-street": [10]}}),
                ),
                held(json!({"orders": []}), json!({"byCustomer": {}})),
                held(
                    json!({"orders": [{"customer": "zeta-labs", "amount": 318.4}]}),
                    json!({"byCustomer": {"zeta-labs": [318.4]}}),
                ),
            ],
            reference: "const byCustomer = {};\nfor (const order of orders) {\n  if (!byCustomer[order.customer]) byCustomer[order.customer] = [];\n  byCustomer[order.customer].push(order.amount);\n}\nreturn { byCustomer };",
        },
        CodegenCase {
            name: "merge-join",
            shape: Shape::Merge,
            instruction: "Join each user to their email address by id (a user's id is an email row's userId): one row per user, {id, name, email}, in the users' order, with email null for a user who has none.",
            inputs: &[
                Slot {
                    name: "users",
                    ty: "list[{id: integer, name: string}]",
                    description: "the users",
                },
                Slot {
                    name: "emails",
                    ty: "list[{userId: integer, email: string}]",
                    description: "email addresses; a user has at most one",
                },
            ],
            outputs: &[Slot {
                name: "joined",
                ty: "list[{id: integer, name: string, email: any}]",
                description: "",
            }],
            expected: true,
            held_out: vec![
                held(
                    json!({
                        "users": [{"id": 7, "name": "Wren"}, {"id": 9, "name": "Basil"}],
                        "emails": [{"userId": 9, "email": "basil@quarry.example"}]
                    }),
                    json!({"joined": [
                        {"id": 7, "name": "Wren", "email": null},
                        {"id": 9, "name": "Basil", "email": "basil@quarry.example"}
                    ]}),
                ),
                held(
                    json!({
                        "users": [{"id": 3, "name": "Odile"}],
                        "emails": [
                            {"userId": 4, "email": "ghost@fen.example"},
                            {"userId": 3, "email": "odile@fen.example"}
                        ]
                    }),
                    json!({"joined": [{"id": 3, "name": "Odile", "email": "odile@fen.example"}]}),
                ),
            ],
            reference: "const byUser = new Map(emails.map((row) => [row.userId, row.email]));\nreturn {\n  joined: users.map((user) => ({\n    id: user.id,\n    name: user.name,\n    email: byUser.has(user.id) ? byUser.get(user.id) : null,\n  })),\n};",
        },
        CodegenCase {
            name: "merge-settings",
            shape: Shape::Merge,
            instruction: "Combine the settings: start from the defaults and let each key of the overrides replace the default's. Where both sides hold an object (not an array), merge those the same way, key by key; arrays are replaced, not merged.",
            inputs: &[
                Slot {
                    name: "defaults",
                    ty: "object",
                    description: "the default settings",
                },
                Slot {
                    name: "overrides",
                    ty: "object",
                    description: "what the person changed",
                },
            ],
            outputs: &[Slot {
                name: "settings",
                ty: "object",
                description: "",
            }],
            expected: true,
            held_out: vec![
                held(
                    json!({
                        "defaults": {"theme": {"palette": "slate", "fontSize": 14}, "autosave": true, "plugins": ["lint"]},
                        "overrides": {"theme": {"fontSize": 16}, "plugins": ["format", "spell"]}
                    }),
                    json!({"settings": {
                        "theme": {"palette": "slate", "fontSize": 16},
                        "autosave": true,
                        "plugins": ["format", "spell"]
                    }}),
                ),
                held(
                    json!({
                        "defaults": {"retries": 3, "proxy": {"host": "cache.internal", "port": 3128}},
                        "overrides": {"proxy": null}
                    }),
                    json!({"settings": {"retries": 3, "proxy": null}}),
                ),
                held(
                    json!({"defaults": {}, "overrides": {"locale": "pt-BR"}}),
                    json!({"settings": {"locale": "pt-BR"}}),
                ),
            ],
            reference: "const isObject = (value) => value !== null && typeof value === 'object' && !Array.isArray(value);\nconst merge = (base, over) => {\n  const out = { ...base };\n  for (const [key, value] of Object.entries(over)) {\n    out[key] = isObject(value) && isObject(out[key]) ? merge(out[key], value) : value;\n  }\n  return out;\n};\nreturn { settings: merge(defaults, overrides) };",
        },
        CodegenCase {
            name: "merge-tags",
            shape: Shape::Merge,
            instruction: "Combine two lists of tags into one: every tag once, compared without regard to case or surrounding spaces, written trimmed and lowercase, in the order each was first seen (the first list, then the second).",
            inputs: &[
                Slot {
                    name: "first",
                    ty: "list[string]",
                    description: "tags from the first source",
                },
                Slot {
                    name: "second",
                    ty: "list[string]",
                    description: "tags from the second source",
                },
            ],
            outputs: &[Slot {
                name: "tags",
                ty: "list[string]",
                description: "",
            }],
            expected: true,
            held_out: vec![
                held(
                    json!({"first": ["Pottery", " glaze", "Kilns"], "second": ["kilns", "GLAZE ", "stoneware"]}),
                    json!({"tags": ["pottery", "glaze", "kilns", "stoneware"]}),
                ),
                held(
                    json!({"first": [], "second": ["Raku"]}),
                    json!({"tags": ["raku"]}),
                ),
            ],
            reference: "const seen = new Set();\nconst tags = [];\nfor (const tag of [...first, ...second]) {\n  const clean = tag.trim().toLowerCase();\n  if (!seen.has(clean)) {\n    seen.add(clean);\n    tags.push(clean);\n  }\n}\nreturn { tags };",
        },
        CodegenCase {
            name: "compute-order-total",
            shape: Shape::Compute,
            instruction: "Work out what the order costs: the sum of price times quantity over the lines, plus tax at taxRate, rounded to cents (two decimals).",
            inputs: &[
                Slot {
                    name: "lines",
                    ty: "list[{price: number, qty: integer}]",
                    description: "the order's lines: unit price and quantity",
                },
                Slot {
                    name: "taxRate",
                    ty: "number",
                    description: "the tax as a fraction (0.2 is 20%)",
                },
            ],
            outputs: &[Slot {
                name: "total",
                ty: "number",
                description: "",
            }],
            expected: true,
            held_out: vec![
                held(
                    json!({"lines": [{"price": 12.5, "qty": 2}, {"price": 3, "qty": 5}], "taxRate": 0.25}),
                    json!({"total": 50}),
                ),
                held(
                    json!({"lines": [{"price": 9.99, "qty": 3}], "taxRate": 0.1}),
                    json!({"total": 32.97}),
                ),
                held(json!({"lines": [], "taxRate": 0.07}), json!({"total": 0})),
            ],
            reference: "const subtotal = lines.reduce((sum, line) => sum + line.price * line.qty, 0);\nreturn { total: Math.round(subtotal * (1 + taxRate) * 100) / 100 };",
        },
        CodegenCase {
            name: "compute-stats",
            shape: Shape::Compute,
            instruction: "Summarize the measurements: give mean (the average), median (the middle value once sorted; for an even count, the average of the two middle ones) and range (the largest minus the smallest).",
            inputs: &[Slot {
                name: "values",
                ty: "list[number]",
                description: "measurements, at least one",
            }],
            outputs: &[
                Slot {
                    name: "mean",
                    ty: "number",
                    description: "",
                },
                Slot {
                    name: "median",
                    ty: "number",
                    description: "",
                },
                Slot {
                    name: "range",
                    ty: "number",
                    description: "",
                },
            ],
            expected: false,
            held_out: vec![
                held(
                    json!({"values": [7, 1, 4]}),
                    json!({"mean": 4, "median": 4, "range": 6}),
                ),
                held(
                    json!({"values": [2.5, 9, 4, 6.5]}),
                    json!({"mean": 5.5, "median": 5.25, "range": 6.5}),
                ),
                held(
                    json!({"values": [42]}),
                    json!({"mean": 42, "median": 42, "range": 0}),
                ),
            ],
            reference: "const sorted = [...values].sort((a, b) => a - b);\nconst middle = Math.floor(sorted.length / 2);\nconst median = sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;\nconst mean = values.reduce((sum, value) => sum + value, 0) / values.length;\nreturn { mean, median, range: sorted[sorted.length - 1] - sorted[0] };",
        },
        CodegenCase {
            name: "extract-emails",
            shape: Shape::Extract,
            instruction: "Find the email addresses in the text: each once, lowercased, in the order they first appear.",
            inputs: &[Slot {
                name: "text",
                ty: "string",
                description: "free text, such as an email thread",
            }],
            outputs: &[Slot {
                name: "emails",
                ty: "list[string]",
                description: "",
            }],
            expected: true,
            held_out: vec![
                held(
                    json!({"text": "Ping Marta.Quell@northwind.example or the desk (desk@northwind.example). Marta.quell@northwind.example again."}),
                    json!({"emails": ["marta.quell@northwind.example", "desk@northwind.example"]}),
                ),
                held(
                    json!({"text": "No addresses here, only a note about lunch."}),
                    json!({"emails": []}),
                ),
                held(
                    json!({"text": "cc: ops-team+alerts@relay.example.org; ops-team+alerts@relay.example.org"}),
                    json!({"emails": ["ops-team+alerts@relay.example.org"]}),
                ),
            ],
            reference: "const found = text.match(/[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\\.[A-Za-z]{2,}/g) || [];\nconst emails = [];\nfor (const email of found) {\n  const lower = email.toLowerCase();\n  if (!emails.includes(lower)) emails.push(lower);\n}\nreturn { emails };",
        },
        CodegenCase {
            name: "extract-csv",
            shape: Shape::Extract,
            instruction: "Parse the CSV: the first line names the columns, and each further line that is not blank becomes an object from column name to that line's value. Values stay strings, trimmed of spaces. Lines end with a newline, possibly after a carriage return.",
            inputs: &[Slot {
                name: "csv",
                ty: "string",
                description: "CSV text with a header line; no field is quoted",
            }],
            outputs: &[Slot {
                name: "rows",
                ty: "list[dict[string]]",
                description: "",
            }],
            expected: true,
            held_out: vec![
                held(
                    json!({"csv": "sku,colour,stock\nK-220,teal,14\nK-221, amber ,0\n"}),
                    json!({"rows": [
                        {"sku": "K-220", "colour": "teal", "stock": "14"},
                        {"sku": "K-221", "colour": "amber", "stock": "0"}
                    ]}),
                ),
                held(
                    json!({"csv": "city,country\r\nPorto,Portugal\r\n\r\nGhent,Belgium"}),
                    json!({"rows": [
                        {"city": "Porto", "country": "Portugal"},
                        {"city": "Ghent", "country": "Belgium"}
                    ]}),
                ),
                held(json!({"csv": "only,header"}), json!({"rows": []})),
            ],
            reference: "const lines = csv.split(/\\r?\\n/).filter((line) => line.trim() !== '');\nconst header = lines.length > 0 ? lines[0].split(',').map((name) => name.trim()) : [];\nconst rows = lines.slice(1).map((line) => {\n  const cells = line.split(',');\n  const row = {};\n  header.forEach((name, at) => {\n    row[name] = (cells[at] ?? '').trim();\n  });\n  return row;\n});\nreturn { rows };",
        },
        CodegenCase {
            name: "extract-query",
            shape: Shape::Extract,
            instruction: "Read the URL's query parameters into an object from name to value, decoding percent escapes and + as a space. A name given twice keeps its last value; a name without = has the empty string. Ignore any #fragment.",
            inputs: &[Slot {
                name: "url",
                ty: "string",
                description: "a full URL",
            }],
            outputs: &[Slot {
                name: "params",
                ty: "dict[string]",
                description: "",
            }],
            expected: true,
            held_out: vec![
                held(
                    json!({"url": "https://shop.example/search?q=blue+kettle&page=2&sort=price%2Basc#top"}),
                    json!({"params": {"q": "blue kettle", "page": "2", "sort": "price+asc"}}),
                ),
                held(
                    json!({"url": "https://maps.example/place?lat=48.85&lat=41.9&pin"}),
                    json!({"params": {"lat": "41.9", "pin": ""}}),
                ),
                held(
                    json!({"url": "https://docs.example/intro"}),
                    json!({"params": {}}),
                ),
            ],
            reference: "const params = {};\nconst query = url.split('#')[0].split('?').slice(1).join('?');\nconst decode = (text) => decodeURIComponent(text.replace(/\\+/g, ' '));\nfor (const part of query.split('&')) {\n  if (part === '') continue;\n  const at = part.indexOf('=');\n  const name = at === -1 ? part : part.slice(0, at);\n  const value = at === -1 ? '' : part.slice(at + 1);\n  params[decode(name)] = decode(value);\n}\nreturn { params };",
        },
        CodegenCase {
            name: "split-pass-fail",
            shape: Shape::Split,
            instruction: "Split the students by score: passed lists the names of those at or above passMark, failed the names of the rest, each in the input order.",
            inputs: &[
                Slot {
                    name: "scores",
                    ty: "list[{name: string, score: number}]",
                    description: "each student's score",
                },
                Slot {
                    name: "passMark",
                    ty: "number",
                    description: "the lowest passing score",
                },
            ],
            outputs: &[
                Slot {
                    name: "passed",
                    ty: "list[string]",
                    description: "",
                },
                Slot {
                    name: "failed",
                    ty: "list[string]",
                    description: "",
                },
            ],
            expected: false,
            held_out: vec![
                held(
                    json!({"scores": [
                        {"name": "Noor", "score": 71},
                        {"name": "Ilse", "score": 49.5},
                        {"name": "Kofi", "score": 50}
                    ], "passMark": 50}),
                    json!({"passed": ["Noor", "Kofi"], "failed": ["Ilse"]}),
                ),
                held(
                    json!({"scores": [], "passMark": 60}),
                    json!({"passed": [], "failed": []}),
                ),
                held(
                    json!({"scores": [{"name": "Yusuf", "score": 12}], "passMark": 10}),
                    json!({"passed": ["Yusuf"], "failed": []}),
                ),
            ],
            reference: "return {\n  passed: scores.filter((row) => row.score >= passMark).map((row) => row.name),\n  failed: scores.filter((row) => row.score < passMark).map((row) => row.name),\n};",
        },
        CodegenCase {
            name: "split-batches",
            shape: Shape::Split,
            instruction: "Split the items into consecutive batches of size items each; the last batch may be shorter. No items, no batches.",
            inputs: &[
                Slot {
                    name: "items",
                    ty: "array",
                    description: "the items to batch",
                },
                Slot {
                    name: "size",
                    ty: "integer",
                    description: "how many items go in a batch, at least 1",
                },
            ],
            outputs: &[Slot {
                name: "batches",
                ty: "list[array]",
                description: "",
            }],
            expected: true,
            held_out: vec![
                held(
                    json!({"items": ["a1", "b2", "c3", "d4", "e5"], "size": 2}),
                    json!({"batches": [["a1", "b2"], ["c3", "d4"], ["e5"]]}),
                ),
                held(
                    json!({"items": [{"id": 1}, {"id": 2}, {"id": 3}], "size": 3}),
                    json!({"batches": [[{"id": 1}, {"id": 2}, {"id": 3}]]}),
                ),
                held(json!({"items": [], "size": 4}), json!({"batches": []})),
            ],
            reference: "const batches = [];\nfor (let at = 0; at < items.length; at += size) {\n  batches.push(items.slice(at, at + size));\n}\nreturn { batches };",
        },
        CodegenCase {
            name: "format-markdown",
            shape: Shape::Format,
            instruction: "Render the rows as a Markdown table: the line `| item | qty |`, then `|---|---:|`, then one line per row such as `| tea | 2 |`, the lines joined by newlines with none at the end.",
            inputs: &[Slot {
                name: "rows",
                ty: "list[{item: string, qty: integer}]",
                description: "the shopping list",
            }],
            outputs: &[Slot {
                name: "markdown",
                ty: "string",
                description: "",
            }],
            expected: true,
            held_out: vec![
                held(
                    json!({"rows": [{"item": "oat milk", "qty": 2}, {"item": "rye flour", "qty": 1}]}),
                    json!({"markdown": "| item | qty |\n|---|---:|\n| oat milk | 2 |\n| rye flour | 1 |"}),
                ),
                held(
                    json!({"rows": []}),
                    json!({"markdown": "| item | qty |\n|---|---:|"}),
                ),
            ],
            reference: "const lines = ['| item | qty |', '|---|---:|'];\nfor (const row of rows) lines.push(`| ${row.item} | ${row.qty} |`);\nreturn { markdown: lines.join('\\n') };",
        },
        CodegenCase {
            name: "format-money",
            shape: Shape::Format,
            instruction: "Write the amount in dollars: a $ sign, the dollars with a comma between each group of three digits, a point and always two digits of cents. A negative amount starts with -$.",
            inputs: &[Slot {
                name: "cents",
                ty: "integer",
                description: "an amount in cents; may be negative",
            }],
            outputs: &[Slot {
                name: "text",
                ty: "string",
                description: "",
            }],
            expected: true,
            held_out: vec![
                held(
                    json!({"cents": 123_456_789}),
                    json!({"text": "$1,234,567.89"}),
                ),
                held(json!({"cents": -5}), json!({"text": "-$0.05"})),
                held(json!({"cents": 100_000}), json!({"text": "$1,000.00"})),
            ],
            reference: "const sign = cents < 0 ? '-' : '';\nconst whole = Math.floor(Math.abs(cents) / 100);\nconst rest = String(Math.abs(cents) % 100).padStart(2, '0');\nconst dollars = String(whole).replace(/\\B(?=(\\d{3})+(?!\\d))/g, ',');\nreturn { text: `${sign}$${dollars}.${rest}` };",
        },
        CodegenCase {
            name: "validate-signup",
            shape: Shape::Validate,
            instruction: "Check a signup form. Give errors, the names of the fields that are wrong in the order email, password, age, and valid, true when none is. The email is wrong unless it has exactly one @ with something before it and a dot somewhere after it; the password is wrong when it has fewer than 8 characters or no digit; the age is wrong under 13.",
            inputs: &[Slot {
                name: "form",
                ty: "{email: string, password: string, age: integer}",
                description: "what the person typed",
            }],
            outputs: &[
                Slot {
                    name: "errors",
                    ty: "list[string]",
                    description: "",
                },
                Slot {
                    name: "valid",
                    ty: "boolean",
                    description: "",
                },
            ],
            expected: false,
            held_out: vec![
                held(
                    json!({"form": {"email": "lena.moraes@quarry.example", "password": "kettle42drum", "age": 34}}),
                    json!({"errors": [], "valid": true}),
                ),
                held(
                    json!({"form": {"email": "lena@mailbox", "password": "short7", "age": 12}}),
                    json!({"errors": ["email", "password", "age"], "valid": false}),
                ),
                held(
                    json!({"form": {"email": "two@@signs.example", "password": "nodigitshere", "age": 13}}),
                    json!({"errors": ["email", "password"], "valid": false}),
                ),
            ],
            reference: "const errors = [];\nconst parts = form.email.split('@');\nif (parts.length !== 2 || parts[0] === '' || !parts[1].includes('.')) errors.push('email');\nif (form.password.length < 8 || !/\\d/.test(form.password)) errors.push('password');\nif (form.age < 13) errors.push('age');\nreturn { errors, valid: errors.length === 0 };",
        },
        CodegenCase {
            name: "validate-isbn",
            shape: Shape::Validate,
            instruction: "Say whether the text is a valid ISBN-10. Hyphens are ignored; what is left must be nine digits followed by a digit or X (worth 10), and the sum of the ten values each times its weight (10 for the first, down to 1 for the last) must be a multiple of 11.",
            inputs: &[Slot {
                name: "isbn",
                ty: "string",
                description: "an ISBN-10 as typed, perhaps with hyphens",
            }],
            outputs: &[Slot {
                name: "valid",
                ty: "boolean",
                description: "",
            }],
            expected: true,
            held_out: vec![
                held(json!({"isbn": "0-306-40615-2"}), json!({"valid": true})),
                held(json!({"isbn": "0-306-40615-3"}), json!({"valid": false})),
                held(json!({"isbn": "080442957X"}), json!({"valid": true})),
            ],
            reference: "const text = isbn.replace(/-/g, '');\nif (!/^\\d{9}[\\dX]$/.test(text)) return { valid: false };\nlet sum = 0;\nfor (let at = 0; at < 10; at += 1) {\n  const value = text[at] === 'X' ? 10 : Number(text[at]);\n  sum += value * (10 - at);\n}\nreturn { valid: sum % 11 === 0 };",
        },
        CodegenCase {
            name: "seed-months",
            shape: Shape::Seed,
            instruction: "List the twelve months of the year, January first, each as {name, days}: its English name and its number of days in a year that is not a leap year.",
            inputs: &[],
            outputs: &[Slot {
                name: "months",
                ty: "list[{name: string, days: integer}]",
                description: "",
            }],
            expected: true,
            held_out: vec![held(
                json!({}),
                json!({"months": [
                    {"name": "January", "days": 31}, {"name": "February", "days": 28},
                    {"name": "March", "days": 31}, {"name": "April", "days": 30},
                    {"name": "May", "days": 31}, {"name": "June", "days": 30},
                    {"name": "July", "days": 31}, {"name": "August", "days": 31},
                    {"name": "September", "days": 30}, {"name": "October", "days": 31},
                    {"name": "November", "days": 30}, {"name": "December", "days": 31}
                ]}),
            )],
            reference: "const names = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];\nconst days = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];\nreturn { months: names.map((name, at) => ({ name, days: days[at] })) };",
        },
        CodegenCase {
            name: "seed-primes",
            shape: Shape::Seed,
            instruction: "Give the prime numbers below 100, smallest first.",
            inputs: &[],
            outputs: &[Slot {
                name: "primes",
                ty: "list[integer]",
                description: "",
            }],
            expected: true,
            held_out: vec![held(
                json!({}),
                json!({"primes": [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97]}),
            )],
            reference: "const primes = [];\nfor (let n = 2; n < 100; n += 1) {\n  if (primes.every((p) => n % p !== 0)) primes.push(n);\n}\nreturn { primes };",
        },
    ]
}

/// The cases whose name matches `pattern` ([`crate::codeact::wildcard`]).
#[must_use]
pub fn select(cases: Vec<CodegenCase>, pattern: &str) -> Vec<CodegenCase> {
    cases
        .into_iter()
        .filter(|case| crate::codeact::wildcard(pattern, case.name))
        .collect()
}

/// Whether `got` is `want`: numbers by value (`50` is `50.0`, and within a
/// billionth of each other), objects whatever their key order, the rest
/// exactly.
#[must_use]
pub fn same(got: &Value, want: &Value) -> bool {
    match (got, want) {
        (Value::Number(a), Value::Number(b)) => match (a.as_f64(), b.as_f64()) {
            (Some(a), Some(b)) => a == b || (a - b).abs() <= 1e-9 * a.abs().max(b.abs()),
            _ => false,
        },
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same(a, b))
        }
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len()
                && a.iter()
                    .all(|(key, value)| b.get(key).is_some_and(|other| same(value, other)))
        }
        _ => got == want,
    }
}

/// `value` as JSON, cut to `limit` characters.
fn shown(value: &Value, limit: usize) -> String {
    let text = value.to_string();
    if text.chars().count() > limit {
        let cut: String = text.chars().take(limit).collect();
        format!("{cut}…")
    } else {
        text
    }
}

/// How a node did on a case's held-out inputs.
#[derive(Debug, Clone, PartialEq)]
pub struct HeldOutScore {
    pub passed: usize,
    pub total: usize,
    /// One per failed input, naming it (`held-out #2 {…}`) and what was
    /// wrong.
    pub problems: Vec<String>,
}

fn environment() -> Environment {
    Environment {
        entrance: "kiln eval".into(),
        tools_host: "eval".into(),
        http: kiln_http::default_client(),
        // A generated node is asked for nothing: nobody is there to say yes.
        people: People::Approver {
            host: "kiln eval".into(),
            approver: Rc::new(kiln_capabilities::gate::Headless::new("kiln eval")),
            session: kiln_capabilities::gate::SessionAllow::default(),
        },
        own_tools: None,
        bridge: None,
        workspace: None,
        random: Rc::new(|| [4; 8]),
        on_gate: None,
    }
}

/// Runs `node` on each of `case`'s held-out inputs in the sandbox and
/// compares what it gives with the outputs expected: a run that fails, a
/// missing output and a wrong value each fail that input.
pub async fn score_node(
    case: &CodegenCase,
    node: &CodeNode,
    runner: &dyn SandboxRunner,
) -> HeldOutScore {
    let environment = environment();
    let mut score = HeldOutScore {
        passed: 0,
        total: case.held_out.len(),
        problems: Vec::new(),
    };
    for (at, held) in case.held_out.iter().enumerate() {
        let label = format!(
            "held-out #{} {}",
            at + 1,
            shown(&Value::Object(held.inputs.clone()), 60)
        );
        let ran = node::run_node(
            node,
            &held.inputs,
            node::request(),
            &environment,
            runner,
            AbortSignal::new(),
        )
        .await;
        let wrong: Vec<String> = match ran {
            Err(error) => vec![format!("refused: {error}")],
            Ok(run) => match run.error {
                Some(failure) => vec![format!("{}: {}", failure.code, failure.message)],
                None => held
                    .outputs
                    .iter()
                    .filter_map(|(name, want)| match run.outputs.get(name) {
                        None => Some(format!("gave no `{name}`")),
                        Some(got) if !same(got, want) => Some(format!(
                            "`{name}` is {}, expected {}",
                            shown(got, 80),
                            shown(want, 80)
                        )),
                        Some(_) => None,
                    })
                    .collect(),
            },
        };
        if wrong.is_empty() {
            score.passed += 1;
        } else {
            score
                .problems
                .push(format!("{label}: {}", wrong.join("; ")));
        }
    }
    score
}

/// How one case went.
#[derive(Debug, Clone, PartialEq)]
pub struct CodegenResult {
    pub name: &'static str,
    pub shape: Shape,
    /// Accepted, and every held-out input gave its outputs.
    pub passed: bool,
    /// Accepted on the first round.
    pub first_pass: bool,
    /// Accepted at all, after repairs or not.
    pub accepted: bool,
    pub held_out: HeldOutScore,
    /// Why no node was accepted: the failure's code and message.
    pub failure: Option<(&'static str, String)>,
    pub rounds: u32,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_usd: Option<f64>,
    /// The authoring's, not the held-out runs'.
    pub duration_ms: f64,
}

impl CodegenResult {
    /// One line saying how the case went, for progress while the suite runs.
    #[must_use]
    pub fn line(&self) -> String {
        let outcome = match (&self.failure, self.passed) {
            (Some((code, _)), _) => format!("no node ({code})"),
            (None, true) => "passed".to_owned(),
            (None, false) => format!(
                "accepted, held-out {}/{}",
                self.held_out.passed, self.held_out.total
            ),
        };
        format!(
            "{}: {outcome} in {} round{}, {:.1} s",
            self.name,
            self.rounds,
            if self.rounds == 1 { "" } else { "s" },
            self.duration_ms / 1000.0
        )
    }
}

/// Runs the cases one after another: each authored by `provider`'s
/// `model`, the accepted node scored on the held-out inputs with `runner`;
/// `on_case` hears each result as it comes (a long suite against a slow
/// model says where it is).
pub async fn run_codegen(
    cases: &[CodegenCase],
    provider: &dyn Provider,
    model: &str,
    runner: &dyn SandboxRunner,
    clock: &dyn Clock,
    on_case: &mut dyn FnMut(&CodegenResult),
) -> Vec<CodegenResult> {
    let mut results = Vec::new();
    for case in cases {
        let mut result = CodegenResult {
            name: case.name,
            shape: case.shape,
            passed: false,
            first_pass: false,
            accepted: false,
            held_out: HeldOutScore {
                passed: 0,
                total: case.held_out.len(),
                problems: Vec::new(),
            },
            failure: None,
            rounds: 0,
            input_tokens: 0,
            output_tokens: 0,
            cost_usd: None,
            duration_ms: 0.0,
        };
        let request = match case.request() {
            Ok(request) => request,
            Err(why) => {
                result.failure = Some(("internal", why));
                on_case(&result);
                results.push(result);
                continue;
            }
        };
        let authored = codegen::author(provider, model, &request, clock, &AbortSignal::new()).await;
        let telemetry = authored.telemetry;
        result.rounds = telemetry.rounds;
        result.input_tokens = telemetry.input_tokens;
        result.output_tokens = telemetry.output_tokens;
        result.cost_usd = telemetry.cost_usd;
        result.duration_ms = telemetry.duration_ms;
        match authored.result {
            Ok(submission) => {
                result.accepted = true;
                result.first_pass = telemetry.rounds == 1;
                result.held_out = score_node(case, &submission.node(), runner).await;
                result.passed = result.held_out.passed == result.held_out.total;
            }
            Err(failure) => result.failure = Some((failure.code(), failure.message())),
        }
        on_case(&result);
        results.push(result);
    }
    results
}

fn share(part: usize, whole: usize) -> String {
    let percent = if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    };
    format!("{part}/{whole} ({percent:.0}%)")
}

fn cost(cost: Option<f64>) -> String {
    cost.map_or_else(|| "—".to_owned(), |usd| format!("${usd:.4}"))
}

fn one_line(text: &str, limit: usize) -> String {
    let line = text.replace('\n', " ").replace('|', "\\|");
    if line.chars().count() > limit {
        let cut: String = line.chars().take(limit).collect();
        format!("{cut}…")
    } else {
        line
    }
}

/// The table: a row per case, the totals row, then first-pass acceptance,
/// post-repair acceptance and held-out correctness (over every held-out
/// input, a case without a node failing all of its own), and the pass rate
/// by shape.
#[must_use]
pub fn codegen_table(results: &[CodegenResult]) -> String {
    let mut text = String::from(
        "| case | shape | result | first pass | after repair | held-out | rounds | tokens | cost | time |\n|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let yes = |flag: bool| if flag { "yes" } else { "no" };
    for result in results {
        let verdict = if result.passed {
            "pass".to_owned()
        } else if let Some((code, message)) = &result.failure {
            format!("FAIL ({code}: {})", one_line(message, 120))
        } else {
            format!(
                "FAIL ({})",
                one_line(&result.held_out.problems.join("; "), 160)
            )
        };
        let _ = writeln!(
            text,
            "| {} | {} | {verdict} | {} | {} | {}/{} | {} | {} | {} | {:.1} s |",
            result.name,
            result.shape.as_str(),
            yes(result.first_pass),
            yes(result.accepted),
            result.held_out.passed,
            result.held_out.total,
            result.rounds,
            result.input_tokens + result.output_tokens,
            cost(result.cost_usd),
            result.duration_ms / 1000.0
        );
    }
    let cases = results.len();
    let passed = results.iter().filter(|result| result.passed).count();
    let first_pass = results.iter().filter(|result| result.first_pass).count();
    let accepted = results.iter().filter(|result| result.accepted).count();
    let held_passed: usize = results.iter().map(|result| result.held_out.passed).sum();
    let held_total: usize = results.iter().map(|result| result.held_out.total).sum();
    let priced: Vec<f64> = results
        .iter()
        .filter_map(|result| result.cost_usd)
        .collect();
    let _ = writeln!(
        text,
        "| **total** | | {passed}/{cases} passed | {first_pass}/{cases} | {accepted}/{cases} | {held_passed}/{held_total} | {} | {} | {} | {:.1} s |",
        results.iter().map(|result| result.rounds).sum::<u32>(),
        results
            .iter()
            .map(|result| result.input_tokens + result.output_tokens)
            .sum::<u64>(),
        cost((!priced.is_empty()).then(|| priced.iter().sum())),
        results.iter().map(|result| result.duration_ms).sum::<f64>() / 1000.0
    );
    let _ = writeln!(
        text,
        "\nfirst-pass acceptance {} · post-repair acceptance {} · held-out correctness {} · passed {}",
        share(first_pass, cases),
        share(accepted, cases),
        share(held_passed, held_total),
        share(passed, cases)
    );
    let mut by_shape: BTreeMap<Shape, (usize, usize)> = BTreeMap::new();
    for result in results {
        let entry = by_shape.entry(result.shape).or_default();
        entry.0 += usize::from(result.passed);
        entry.1 += 1;
    }
    let shapes: Vec<String> = Shape::ALL
        .iter()
        .filter_map(|shape| {
            by_shape
                .get(shape)
                .map(|(passed, of)| format!("{} {passed}/{of}", shape.as_str()))
        })
        .collect();
    let _ = writeln!(text, "passed by shape: {}", shapes.join(" · "));
    text
}
