//! A tool as a TypeScript declaration, written from its JSON Schema: what
//! `tools.describe(name)` answers in a program and what an agent's tool
//! search lists. Models read TypeScript more readily than JSON Schema, and it
//! is shorter:
//!
//! ```text
//! /** Reads one file of the workspace. */
//! declare function file_read(args: {
//!   /** The file */
//!   path: string;
//!   limit?: number;
//! }): Promise<unknown>;
//! ```
//!
//! Types follow the schema as far as TypeScript says it: `type` (one or a
//! list), `enum` and `const` as literal unions, `anyOf`/`oneOf` as unions,
//! `items`, `properties` with `required`, `additionalProperties` as an index
//! signature. What it cannot say (formats, bounds, patterns) stays in the
//! schema the ladder checks; a schema nested past [`MAX_DEPTH`] is `unknown`
//! there.

use serde_json::Value;

/// How deep a schema is written before the rest is `unknown`.
pub const MAX_DEPTH: usize = 8;

/// `name`'s declaration: its description as a doc comment, its arguments
/// from `input_schema`, answering `Promise<unknown>` (or the type of
/// `result_schema` when it says one).
#[must_use]
pub fn declaration(
    name: &str,
    description: &str,
    input_schema: &Value,
    result_schema: Option<&Value>,
) -> String {
    let mut text = doc(description, "");
    let args = type_of(input_schema, 0, "");
    let result = result_schema
        .filter(|schema| schema.as_object().is_some_and(|object| !object.is_empty()))
        .map_or_else(|| "unknown".to_owned(), |schema| type_of(schema, 0, ""));
    let optional = input_schema
        .get("required")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty);
    let args = if optional {
        format!("args?: {args}")
    } else {
        format!("args: {args}")
    };
    text.push_str(&format!(
        "declare function {name}({args}): Promise<{result}>;"
    ));
    text
}

/// A doc comment of `text` at `indent`, or nothing when it is empty.
fn doc(text: &str, indent: &str) -> String {
    let text = text.trim();
    if text.is_empty() {
        return String::new();
    }
    // A `*/` in a description would end the comment early.
    let text = text.replace("*/", "*\\/");
    if !text.contains('\n') {
        return format!("{indent}/** {text} */\n");
    }
    let mut out = format!("{indent}/**\n");
    for line in text.lines() {
        out.push_str(&format!("{indent} * {}\n", line.trim_end()).replace(" * \n", " *\n"));
    }
    out.push_str(&format!("{indent} */\n"));
    out
}

/// A property name as TypeScript writes it: bare when it is an identifier.
fn key(name: &str) -> String {
    let identifier = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
    if identifier {
        name.to_owned()
    } else {
        Value::String(name.to_owned()).to_string()
    }
}

fn union(types: Vec<String>) -> String {
    let mut seen: Vec<String> = Vec::new();
    for ty in types {
        if !seen.contains(&ty) {
            seen.push(ty);
        }
    }
    match seen.len() {
        0 => "never".into(),
        1 => seen.remove(0),
        _ => seen.join(" | "),
    }
}

/// The TypeScript type of `schema`, nested `depth` deep, lines indented by
/// `indent`.
fn type_of(schema: &Value, depth: usize, indent: &str) -> String {
    let Some(object) = schema.as_object() else {
        // `true` is any value, `false` none.
        return if schema == &Value::Bool(false) {
            "never".into()
        } else {
            "unknown".into()
        };
    };
    if depth >= MAX_DEPTH {
        return "unknown".into();
    }
    if let Some(value) = object.get("const") {
        return value.to_string();
    }
    if let Some(Value::Array(values)) = object.get("enum") {
        return union(values.iter().map(Value::to_string).collect());
    }
    for combinator in ["anyOf", "oneOf"] {
        if let Some(Value::Array(options)) = object.get(combinator) {
            return union(
                options
                    .iter()
                    .map(|option| type_of(option, depth + 1, indent))
                    .collect(),
            );
        }
    }
    let named = |ty: &str| -> String {
        match ty {
            "string" => "string".into(),
            "number" | "integer" => "number".into(),
            "boolean" => "boolean".into(),
            "null" => "null".into(),
            "array" => {
                let item = object.get("items").map_or_else(
                    || "unknown".to_owned(),
                    |items| type_of(items, depth + 1, indent),
                );
                if item.contains(' ') && !item.starts_with('{') {
                    format!("({item})[]")
                } else {
                    format!("{item}[]")
                }
            }
            "object" => object_type(object, depth, indent),
            _ => "unknown".into(),
        }
    };
    match object.get("type") {
        Some(Value::String(ty)) => named(ty),
        Some(Value::Array(types)) => {
            union(types.iter().filter_map(Value::as_str).map(named).collect())
        }
        _ if object.contains_key("properties") => object_type(object, depth, indent),
        _ => "unknown".into(),
    }
}

fn object_type(object: &serde_json::Map<String, Value>, depth: usize, indent: &str) -> String {
    let required: Vec<&str> = object
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let inner = format!("{indent}  ");
    let mut lines = Vec::new();
    if let Some(Value::Object(properties)) = object.get("properties") {
        for (name, property) in properties {
            let description = property
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or("");
            let mark = if required.contains(&name.as_str()) {
                ""
            } else {
                "?"
            };
            lines.push(format!(
                "{}{inner}{}{mark}: {};",
                doc(description, &inner),
                key(name),
                type_of(property, depth + 1, &inner)
            ));
        }
    }
    // Other keys: typed when the schema types them, any when it allows them
    // outright or lists no properties at all.
    let others = match object.get("additionalProperties") {
        Some(schema @ Value::Object(_)) => Some(type_of(schema, depth + 1, &inner)),
        Some(Value::Bool(true)) => Some("unknown".to_owned()),
        None if !object.contains_key("properties") => Some("unknown".to_owned()),
        _ => None,
    };
    if let Some(others) = others {
        lines.push(format!("{inner}[key: string]: {others};"));
    }
    if lines.is_empty() {
        return "{}".into();
    }
    format!("{{\n{}\n{indent}}}", lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_tool_reads_as_a_typescript_function() {
        let schema = json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "The file"},
                "limit": {"type": "integer"},
                "mode": {"enum": ["text", "bytes"]},
                "tags": {"type": "array", "items": {"type": ["string", "null"]}},
                "headers": {"type": "object", "additionalProperties": {"type": "string"}},
                "content-type": {"const": "json"}
            },
            "required": ["path"],
            "additionalProperties": false
        });
        assert_eq!(
            declaration("file_read", "Reads one file.", &schema, None),
            "/** Reads one file. */\ndeclare function file_read(args: {\n  /** The file */\n  path: string;\n  limit?: number;\n  mode?: \"text\" | \"bytes\";\n  tags?: (string | null)[];\n  headers?: {\n    [key: string]: string;\n  };\n  \"content-type\"?: \"json\";\n}): Promise<unknown>;"
        );
        assert_eq!(
            declaration(
                "clock",
                "",
                &json!({"type": "object", "properties": {}}),
                Some(&json!({"type": "string"}))
            ),
            "declare function clock(args?: {}): Promise<string>;"
        );
        // A schema nested without end stops at the depth bound.
        let mut deep = json!({"type": "string"});
        for _ in 0..20 {
            deep = json!({"type": "array", "items": deep});
        }
        let text = declaration(
            "deep",
            "a */ b",
            &json!({"type": "object", "properties": {"x": deep}}),
            None,
        );
        assert!(
            text.contains("unknown[][][][][][][]") && text.starts_with("/** a *\\/ b */"),
            "{text}"
        );
    }
}
