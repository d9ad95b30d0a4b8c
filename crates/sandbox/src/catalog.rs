//! Admission of a run's tool catalog, by the codemode rules: what the guest's
//! `tools` object exposes, which names only reject, and the warnings a reader
//! sees. Pure: no engine, no I/O.

use std::collections::{BTreeMap, BTreeSet};

use kiln_types::tool_result::Warning;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Names never exposed on `tools`, even as unavailable tools.
pub const RESERVED_NAMES: [&str; 9] = [
    "__proto__",
    "constructor",
    "prototype",
    "tools",
    "console",
    // Called by the engine on its own: `await tools`, `"" + tools`,
    // `JSON.stringify(tools)` would make calls the program never wrote.
    "then",
    "toString",
    "valueOf",
    "toJSON",
];

/// One usable tool of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogEntry {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
    /// The provider that serves it (`tools`' module in warnings and details).
    pub module: String,
}

/// A name that is on `tools` but only rejects with `tool_unavailable`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable {
    pub reason: String,
    pub module: String,
}

/// The outcome of admission.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Admission {
    /// Usable tools, by name.
    pub tools: BTreeMap<String, CatalogEntry>,
    /// Names that only reject, by name.
    pub unavailable: BTreeMap<String, Unavailable>,
    pub warnings: Vec<Warning>,
}

/// A catalog that refuses the whole run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidCatalog {
    pub message: String,
}

impl InvalidCatalog {
    pub const CODE: &'static str = "invalid_catalog";
}

impl std::fmt::Display for InvalidCatalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, Self::CODE)
    }
}

impl std::error::Error for InvalidCatalog {}

pub use kiln_types::words::is_identifier;
use kiln_types::words::json_type;

fn entry_warning(
    module: &str,
    tool: Option<&str>,
    index: usize,
    reason: &str,
    message: String,
) -> Warning {
    Warning {
        code: "tool_entry_invalid".into(),
        message,
        module: Some(module.to_owned()),
        tool: tool.map(str::to_owned),
        index: tool.is_none().then_some(index),
        reason: Some(reason.to_owned()),
    }
}

impl Admission {
    /// Admits `catalog` (a JSON array of entries) served by `module`, unless
    /// an entry names its own `module` (a registry with several sources).
    pub fn admit(catalog: &Value, default_module: &str) -> Result<Self, InvalidCatalog> {
        let module = default_module;
        let Value::Array(entries) = catalog else {
            return Err(InvalidCatalog {
                message: format!(
                    "the tool catalog must be a JSON array of entries; got {}",
                    json_type(catalog)
                ),
            });
        };
        let mut admission = Self::default();
        let mut claims: BTreeMap<String, usize> = BTreeMap::new();
        let mut candidates = Vec::new();
        for (index, entry) in entries.iter().enumerate() {
            let Some(object) = entry.as_object() else {
                admission.warnings.push(entry_warning(
                    module,
                    None,
                    index,
                    "malformed",
                    format!(
                        "catalog entry {index} is {}, not an object; it was dropped",
                        json_type(entry)
                    ),
                ));
                continue;
            };
            let Some(name) = object.get("name").and_then(Value::as_str) else {
                admission.warnings.push(entry_warning(
                    module,
                    None,
                    index,
                    "malformed",
                    format!("catalog entry {index} has no string `name`; it was dropped"),
                ));
                continue;
            };
            if !is_identifier(name) || RESERVED_NAMES.contains(&name) {
                let why = if is_identifier(name) {
                    "is reserved"
                } else {
                    "is not a JavaScript identifier"
                };
                admission.warnings.push(entry_warning(
                    module,
                    Some(name),
                    index,
                    "invalid_name",
                    format!("tool name `{name}` {why}, so it is not exposed on `tools`"),
                ));
                continue;
            }
            *claims.entry(name.to_owned()).or_default() += 1;
            let own_module = object
                .get("module")
                .and_then(Value::as_str)
                .unwrap_or(module);
            candidates.push((
                index,
                name.to_owned(),
                own_module.to_owned(),
                parse_fields(object, name),
            ));
        }

        let duplicated: BTreeSet<&String> = claims
            .iter()
            .filter(|(_, n)| **n > 1)
            .map(|(name, _)| name)
            .collect();
        for name in &duplicated {
            admission.warnings.push(entry_warning(
                module,
                Some(name),
                0,
                "duplicate_name",
                format!(
                    "{} catalog entries claim the tool name `{name}`; none of them is used",
                    claims[*name]
                ),
            ));
            admission.unavailable.insert(
                (*name).clone(),
                Unavailable {
                    reason: "duplicate_name".into(),
                    module: module.into(),
                },
            );
        }
        for (index, name, own_module, fields) in candidates {
            let module = own_module.as_str();
            if duplicated.contains(&name) {
                continue;
            }
            match fields {
                Ok((description, input_schema)) => {
                    admission.tools.insert(
                        name.clone(),
                        CatalogEntry {
                            name,
                            description,
                            input_schema,
                            module: module.to_owned(),
                        },
                    );
                }
                Err(problem) => {
                    admission.warnings.push(entry_warning(
                        module,
                        Some(&name),
                        index,
                        "malformed",
                        problem,
                    ));
                    admission.unavailable.insert(
                        name,
                        Unavailable {
                            reason: "malformed".into(),
                            module: module.into(),
                        },
                    );
                }
            }
        }
        Ok(admission)
    }

    /// Every name on `tools`, usable or not, in order.
    #[must_use]
    pub fn exposed_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .tools
            .keys()
            .chain(self.unavailable.keys())
            .map(String::as_str)
            .collect();
        names.sort_unstable();
        names
    }

    /// `sha256:<hex>` over the retained usable entries (name, description,
    /// schema), in name order.
    #[must_use]
    pub fn digest(&self) -> String {
        let mut hasher = Sha256::new();
        for entry in self.tools.values() {
            let canonical = serde_json::json!([
                entry.name,
                entry.description,
                entry.input_schema,
                entry.module
            ]);
            hasher.update(canonical.to_string().as_bytes());
            hasher.update(b"\n");
        }
        let hex: String = hasher
            .finalize()
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect();
        format!("sha256:{hex}")
    }
}

fn parse_fields(
    object: &serde_json::Map<String, Value>,
    name: &str,
) -> Result<(String, Value), String> {
    let description = match object.get("description") {
        None => String::new(),
        Some(Value::String(text)) => text.clone(),
        Some(other) => {
            return Err(format!(
                "tool `{name}`: `description` must be a string, not {}",
                json_type(other)
            ));
        }
    };
    let input_schema = match object.get("input_schema") {
        None => serde_json::json!({"type": "object"}),
        Some(schema @ (Value::Object(_) | Value::Bool(_))) => schema.clone(),
        Some(other) => {
            return Err(format!(
                "tool `{name}`: `input_schema` must be a JSON Schema object, not {}",
                json_type(other)
            ));
        }
    };
    Ok((description, input_schema))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn admission_follows_the_codemode_rules() {
        let catalog = json!([
            {"name": "echo", "description": "Echoes", "input_schema": {"type": "object"}},
            {"name": "get-sum"},
            {"name": "constructor"},
            {"name": "dup"}, {"name": "dup"},
            {"name": "bad", "description": 3},
            "not an object",
            {"description": "nameless"},
        ]);
        let admission = Admission::admit(&catalog, "demo").unwrap();
        assert_eq!(admission.tools.keys().collect::<Vec<_>>(), ["echo"]);
        assert_eq!(admission.exposed_names(), ["bad", "dup", "echo"]);
        assert_eq!(admission.unavailable["dup"].reason, "duplicate_name");
        assert_eq!(admission.unavailable["bad"].reason, "malformed");
        let lines: Vec<String> = admission
            .warnings
            .iter()
            .map(|w| {
                format!(
                    "{} {:?} {:?} {}",
                    w.reason.as_deref().unwrap_or(""),
                    w.tool,
                    w.index,
                    w.message
                )
            })
            .collect();
        assert_eq!(
            lines,
            [
                "invalid_name Some(\"get-sum\") None tool name `get-sum` is not a JavaScript identifier, so it is not exposed on `tools`",
                "invalid_name Some(\"constructor\") None tool name `constructor` is reserved, so it is not exposed on `tools`",
                "malformed None Some(6) catalog entry 6 is a string, not an object; it was dropped",
                "malformed None Some(7) catalog entry 7 has no string `name`; it was dropped",
                "duplicate_name Some(\"dup\") None 2 catalog entries claim the tool name `dup`; none of them is used",
                "malformed Some(\"bad\") None tool `bad`: `description` must be a string, not a number",
            ]
        );
    }

    #[test]
    fn names_the_engine_calls_on_its_own_are_reserved() {
        for name in ["then", "toString", "valueOf", "toJSON"] {
            let admission = Admission::admit(&json!([{"name": name}]), "demo").unwrap();
            assert!(admission.exposed_names().is_empty(), "{name}");
            let warning = &admission.warnings[0];
            assert_eq!(warning.reason.as_deref(), Some("invalid_name"), "{name}");
            assert!(
                warning.message.contains("is reserved"),
                "{name}: {}",
                warning.message
            );
        }
    }

    #[test]
    fn a_catalog_that_is_not_an_array_refuses_the_run() {
        let error = Admission::admit(&json!({"echo": {}}), "demo").unwrap_err();
        assert_eq!(
            error.to_string(),
            "the tool catalog must be a JSON array of entries; got an object (invalid_catalog)"
        );
    }

    #[test]
    fn the_digest_covers_usable_entries_only() {
        let one = Admission::admit(&json!([{"name": "echo"}]), "demo").unwrap();
        let with_junk = Admission::admit(
            &json!([{"name": "echo"}, {"name": "a-b"}, {"name": "x", "input_schema": 1}]),
            "demo",
        )
        .unwrap();
        assert_eq!(one.digest(), with_junk.digest());
        let other =
            Admission::admit(&json!([{"name": "echo", "description": "changed"}]), "demo").unwrap();
        assert_ne!(one.digest(), other.digest());
        assert!(one.digest().starts_with("sha256:"));
    }
}
