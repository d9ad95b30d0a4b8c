//! The argument half of the ladder: fold what a model plainly meant onto the
//! schema's own names, refuse what is missing by name, then validate against
//! the JSON Schema.
//!
//! The folds are the reference's (`coerceCapabilityArgs`) and no more:
//! camelCase keys onto snake_case properties, a lone string onto the only
//! required string field, a bare id onto the one required `*_id` key. Each
//! applies only when exactly one target fits, so nothing is guessed.
//!
//! The validator is `boon`, chosen against `jsonschema` 0.61 measured the
//! same way: a bare validator cdylib at `opt-level = "z"` + `wasm-opt -Oz` is
//! 441,360 B gzipped with `boon` against 682,221 B. It ships in the runtime
//! worker, off the page's critical path.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use serde_json::{Map, Value};

use crate::describe::{json_type, key_list};

/// Arguments refused before they reach a permission decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgumentError {
    /// `missing_arguments` or `invalid_arguments`.
    pub code: &'static str,
    pub message: String,
}

/// Where a schema is filed while it compiles. Nothing is fetched or read: a
/// `$ref` to anywhere else (`file:`, `http:`) does not compile.
const SCHEMA_URL: &str = "urn:kiln:input-schema";

/// A compiled input schema (`boon`: every JSON Schema draft, checked against
/// the official test suite, and less than half the download of the
/// alternatives we measured; see ARCHITECTURE.md).
pub struct InputSchema {
    schema: Value,
    compiled: Rc<Compiled>,
}

/// What boon made of one schema.
struct Compiled {
    schemas: boon::Schemas,
    index: boon::SchemaIndex,
}

/// How many compiled schemas a thread keeps ([`COMPILED`]).
const KEPT_SCHEMAS: usize = 512;

thread_local! {
    /// Schemas compiled on this thread, by their JSON text. Every run builds
    /// its registry afresh, and compiling a schema (boon checks it against
    /// its draft's metaschema first) costs far more than the call it guards:
    /// a belt's schemas are compiled once, not once a run. Past
    /// [`KEPT_SCHEMAS`] the cache starts over.
    static COMPILED: RefCell<HashMap<String, Rc<Compiled>>> = RefCell::new(HashMap::new());
}

impl std::fmt::Debug for InputSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InputSchema")
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

impl InputSchema {
    /// Compiles `schema`; the error says why it does not compile.
    pub fn compile(schema: &Value) -> Result<Self, String> {
        if !schema.is_object() && !schema.is_boolean() {
            return Err(format!(
                "the input schema is {}, not a JSON Schema object",
                json_type(schema)
            ));
        }
        let text = schema.to_string();
        if let Some(compiled) = COMPILED.with(|kept| kept.borrow().get(&text).cloned()) {
            return Ok(Self {
                schema: schema.clone(),
                compiled,
            });
        }
        let mut schemas = boon::Schemas::new();
        let mut compiler = boon::Compiler::new();
        // No loaders at all: natively boon would read `file:` URLs, and a
        // tool's schema must not make us read anything.
        compiler.use_loader(Box::new(boon::SchemeUrlLoader::new()));
        let index = compiler
            .add_resource(SCHEMA_URL, schema.clone())
            .and_then(|()| compiler.compile(SCHEMA_URL, &mut schemas))
            .map_err(|error| compile_problem(&error, schema))?;
        let compiled = Rc::new(Compiled { schemas, index });
        COMPILED.with(|kept| {
            let mut kept = kept.borrow_mut();
            if kept.len() >= KEPT_SCHEMAS {
                kept.clear();
            }
            kept.insert(text, compiled.clone());
        });
        Ok(Self {
            schema: schema.clone(),
            compiled,
        })
    }

    fn properties(&self) -> Option<&Map<String, Value>> {
        self.schema.get("properties").and_then(Value::as_object)
    }

    fn required(&self) -> Vec<&str> {
        self.schema
            .get("required")
            .and_then(Value::as_array)
            .map(|keys| keys.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    }

    fn property_type(&self, key: &str) -> Option<&str> {
        self.properties()?.get(key)?.get("type")?.as_str()
    }

    /// Folds, refuses what is missing, and validates. `call` names the call in
    /// messages (`get_workflow (call 3)`).
    pub fn check(&self, call: &str, args: Value) -> Result<Value, ArgumentError> {
        let args = self.coerce(args);
        if let Some(message) = self.unplaced(call, &args) {
            return Err(ArgumentError {
                code: "invalid_arguments",
                message,
            });
        }
        if let Value::Object(map) = &args {
            let missing: Vec<&str> = self
                .required()
                .into_iter()
                .filter(|key| !map.contains_key(*key))
                .collect();
            if !map.is_empty() && !missing.is_empty() {
                let passed: Vec<&str> = map.keys().map(String::as_str).collect();
                return Err(ArgumentError {
                    code: "missing_arguments",
                    message: format!(
                        "{call} is missing required argument{} {}; it was passed {} instead",
                        if missing.len() == 1 { "" } else { "s" },
                        key_list(&missing),
                        key_list(&passed),
                    ),
                });
            }
        }
        self.validate(call, &args, Nouns::ARGUMENTS)?;
        Ok(args)
    }

    /// The reference's folds, each only when exactly one target fits.
    #[must_use]
    pub fn coerce(&self, args: Value) -> Value {
        let required = self.required();
        match args {
            Value::Null => Value::Object(Map::new()),
            Value::String(text) => {
                let strings: Vec<&str> = required
                    .iter()
                    .copied()
                    .filter(|key| self.property_type(key) == Some("string"))
                    .collect();
                match (strings.as_slice(), self.one_required_id(&required)) {
                    ([only], _) => single(only, Value::String(text)),
                    ([], Some(id)) => single(id, Value::String(text)),
                    _ => Value::String(text),
                }
            }
            Value::Number(number) => match self.one_required_id(&required) {
                Some(id) => single(id, Value::Number(number)),
                None => Value::Number(number),
            },
            Value::Object(map) => Value::Object(self.fold_keys(map, &required)),
            other => other,
        }
    }

    /// A lone value that more than one field could take: said so, naming
    /// the candidates, instead of guessing.
    fn unplaced(&self, call: &str, args: &Value) -> Option<String> {
        let required = self.required();
        let candidates: Vec<&str> = match args {
            Value::String(_) => required
                .iter()
                .copied()
                .filter(|key| self.property_type(key) == Some("string") || key.ends_with("_id"))
                .collect(),
            Value::Number(_) => required
                .iter()
                .copied()
                .filter(|key| key.ends_with("_id"))
                .collect(),
            _ => return None,
        };
        (candidates.len() > 1).then(|| {
            format!(
                "{call} was passed a lone {}, and {} could each take it, so it was not guessed; \
                 pass an object naming the field",
                if args.is_string() { "string" } else { "number" },
                key_list(&candidates)
            )
        })
    }

    fn one_required_id<'a>(&self, required: &[&'a str]) -> Option<&'a str> {
        match required
            .iter()
            .filter(|key| key.ends_with("_id"))
            .collect::<Vec<_>>()
            .as_slice()
        {
            [only] => Some(**only),
            _ => None,
        }
    }

    fn fold_keys(&self, map: Map<String, Value>, required: &[&str]) -> Map<String, Value> {
        let known = |key: &str| {
            self.properties()
                .is_some_and(|props| props.contains_key(key))
        };
        let passed: Vec<String> = map.keys().cloned().collect();
        let mut folded = Map::new();
        for (key, value) in map {
            let snake = snake_case(&key);
            let fold = !known(&key)
                && snake != key
                && known(&snake)
                && !passed.contains(&snake)
                && !folded.contains_key(&snake);
            // Two spellings of one key: the second stands under its own name,
            // where validation or the implementation will see it.
            let target = if fold { snake } else { key };
            folded.insert(target, value);
        }
        if let Some(id_key) = self.one_required_id(required)
            && !known("id")
            && !folded.contains_key(id_key)
            && let Some(value) = folded.remove("id")
        {
            folded.insert(id_key.to_owned(), value);
        }
        folded
    }

    /// Validates `value` against the schema as it is, with no folds: a value
    /// a program hands over (`finish`'s), described as "the value" and
    /// "value `/path`" in the message, which starts with `what`.
    ///
    /// # Errors
    ///
    /// The most specific reason the value does not match.
    pub fn validate_value(&self, what: &str, value: &Value) -> Result<(), String> {
        self.validate(what, value, Nouns::VALUE)
            .map_err(|error| error.message)
    }

    fn validate(&self, call: &str, args: &Value, nouns: Nouns) -> Result<(), ArgumentError> {
        let Err(error) = self.compiled.schemas.validate(args, self.compiled.index) else {
            return Ok(());
        };
        // The first leaf of the error tree is the most specific reason.
        let mut leaf = &error;
        while let Some(cause) = leaf.causes.first() {
            leaf = cause;
        }
        let path = leaf.instance_location.to_string();
        let at = if path.is_empty() {
            String::from(nouns.whole)
        } else {
            format!("{} `{path}`", nouns.part)
        };
        let found = args.pointer(&path).map_or("nothing", json_type);
        let message = match &leaf.kind {
            boon::ErrorKind::Type { want, .. } => {
                format!(
                    "{call}: {at} must be {}; got {found}",
                    expected_types(*want)
                )
            }
            boon::ErrorKind::Required { want } if path.is_empty() => {
                format!("{call}: {} is required", key_list(want))
            }
            boon::ErrorKind::Required { want } => {
                format!("{call}: {at} is missing {}", key_list(want))
            }
            boon::ErrorKind::AdditionalProperties { got } => {
                let got: Vec<&str> = got.iter().map(AsRef::as_ref).collect();
                let known = self
                    .properties()
                    .filter(|_| path.is_empty())
                    .map(|props| {
                        let keys: Vec<&str> = props.keys().map(String::as_str).collect();
                        format!("; it takes {}", key_list(&keys))
                    })
                    .unwrap_or_default();
                let has = if path.is_empty() {
                    nouns.whole_has
                } else {
                    "has"
                };
                format!("{call}: {at} {has} unknown keys {}{known}", key_list(&got))
            }
            kind => format!("{call}: {at} is invalid: {kind}; got {found}"),
        };
        Err(ArgumentError {
            code: "invalid_arguments",
            message,
        })
    }
}

/// How a validation message names what it checked.
#[derive(Clone, Copy)]
struct Nouns {
    whole: &'static str,
    whole_has: &'static str,
    part: &'static str,
}

impl Nouns {
    const ARGUMENTS: Self = Self {
        whole: "the arguments",
        whole_has: "have",
        part: "argument",
    };
    const VALUE: Self = Self {
        whole: "the value",
        whole_has: "has",
        part: "value",
    };
}

/// Why a schema does not compile, in one line.
fn compile_problem(error: &boon::CompileError, schema: &Value) -> String {
    let text = match error {
        boon::CompileError::ValidationError { src, .. } => {
            let mut leaf = src;
            while let Some(cause) = leaf.causes.first() {
                leaf = cause;
            }
            let pointer = leaf.instance_location.to_string();
            let found = schema
                .pointer(&pointer)
                .map(|value| format!(" (found {value})"));
            let at = if pointer.is_empty() {
                "its root".to_owned()
            } else {
                format!("`{pointer}`")
            };
            format!(
                "it breaks the JSON Schema metaschema at {at}{}: {}",
                found.unwrap_or_default(),
                leaf.kind
            )
        }
        other => other.to_string(),
    };
    text.replace(SCHEMA_URL, "the schema")
}

fn single(key: &str, value: Value) -> Value {
    let mut map = Map::new();
    map.insert(key.to_owned(), value);
    Value::Object(map)
}

fn expected_types(want: boon::Types) -> String {
    let names: Vec<String> = want
        .iter()
        .map(|one| {
            let name = one.to_string();
            match name.as_str() {
                "array" | "object" | "integer" => format!("an {name}"),
                "null" => name,
                _ => format!("a {name}"),
            }
        })
        .collect();
    names.join(" or ")
}

/// `workflowId` → `workflow_id`, `HTTPMethod` → `http_method`.
#[must_use]
pub fn snake_case(key: &str) -> String {
    let chars: Vec<char> = key.chars().collect();
    let mut out = String::with_capacity(key.len() + 4);
    for (index, &c) in chars.iter().enumerate() {
        if c.is_uppercase() {
            let previous = index.checked_sub(1).and_then(|i| chars.get(i));
            let next = chars.get(index + 1);
            let boundary = previous.is_some_and(|p| p.is_lowercase() || p.is_ascii_digit())
                || (previous.is_some_and(|p| p.is_uppercase())
                    && next.is_some_and(|n| n.is_lowercase()));
            if boundary && !out.ends_with('_') {
                out.push('_');
            }
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_schema_is_compiled_once_per_thread_and_validates_the_same_after() {
        let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
        let first = InputSchema::compile(&schema).expect("compiles");
        let again = InputSchema::compile(&schema).expect("compiles");
        assert!(
            Rc::ptr_eq(&first.compiled, &again.compiled),
            "compiled twice"
        );
        let other = InputSchema::compile(&json!({"type": "object"})).expect("compiles");
        assert!(!Rc::ptr_eq(&first.compiled, &other.compiled));
        assert!(again.validate_value("args", &json!({"n": 1})).is_ok());
        assert!(again.validate_value("args", &json!({"n": "x"})).is_err());
        // One that does not compile is refused every time, never kept.
        for _ in 0..2 {
            assert!(InputSchema::compile(&json!({"type": 3})).is_err());
        }
    }
}
