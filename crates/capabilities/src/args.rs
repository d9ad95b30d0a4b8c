//! The argument half of the ladder: fold what a model plainly meant onto the
//! schema's own names, refuse what is missing by name, then validate against
//! the JSON Schema.
//!
//! The folds are the reference's (`coerceCapabilityArgs`) and no more:
//! camelCase keys onto snake_case properties, a lone string onto the only
//! required string field, a bare id onto the one required `*_id` key. Each
//! applies only when exactly one target fits, so nothing is guessed.

use serde_json::{Map, Value};

use crate::describe::{json_type, key_list};

/// Arguments refused before they reach a permission decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgumentError {
    /// `missing_arguments` or `invalid_arguments`.
    pub code: &'static str,
    pub message: String,
}

/// A compiled input schema.
pub struct InputSchema {
    schema: Value,
    validator: jsonschema::Validator,
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
        let validator = jsonschema::validator_for(schema).map_err(|error| {
            let path = error.instance_path().as_str();
            if path.is_empty() {
                error.to_string()
            } else {
                format!("{error} (at {path})")
            }
        })?;
        Ok(Self {
            schema: schema.clone(),
            validator,
        })
    }

    #[must_use]
    pub fn schema(&self) -> &Value {
        &self.schema
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
        self.validate(call, &args)?;
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

    fn validate(&self, call: &str, args: &Value) -> Result<(), ArgumentError> {
        let Some(error) = self.validator.iter_errors(args).next() else {
            return Ok(());
        };
        let path = error.instance_path().as_str().to_owned();
        let at = if path.is_empty() {
            String::from("the arguments")
        } else {
            format!("argument `{path}`")
        };
        let message = match error.kind() {
            jsonschema::error::ValidationErrorKind::Type { kind } => format!(
                "{call}: {at} must be {}; got {}",
                expected_types(kind),
                json_type(error.instance())
            ),
            jsonschema::error::ValidationErrorKind::Required { property } => format!(
                "{call}: {} is required",
                property
                    .as_str()
                    .map_or_else(|| property.to_string(), |key| format!("`{key}`"))
            ),
            _ => format!(
                "{call}: {at} is invalid: {error}; got {}",
                json_type(error.instance())
            ),
        };
        Err(ArgumentError {
            code: "invalid_arguments",
            message,
        })
    }
}

fn single(key: &str, value: Value) -> Value {
    let mut map = Map::new();
    map.insert(key.to_owned(), value);
    Value::Object(map)
}

fn expected_types(kind: &jsonschema::error::TypeKind) -> String {
    use jsonschema::error::TypeKind;
    let article = |name: String| match name.as_str() {
        "array" | "object" | "integer" => format!("an {name}"),
        "null" => name,
        _ => format!("a {name}"),
    };
    match kind {
        TypeKind::Single(one) => article(one.to_string()),
        TypeKind::Multiple(set) => set
            .iter()
            .map(|one| article(one.to_string()))
            .collect::<Vec<_>>()
            .join(" or "),
    }
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
