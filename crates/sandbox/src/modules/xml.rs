//! `kiln:xml`: XML to plain data and back over `quick-xml`.

use std::fmt::Write as _;

use boa_engine::{Context, JsNativeError, JsResult, JsString, JsValue};
use serde_json::{Map, Value};

use super::{cell, options, to_js};
use crate::stdlib::{argument, string_argument};

/// `kiln:xml`'s names for attributes and text in the plain data it answers.
struct XmlNames {
    attribute: String,
    text: String,
}

impl XmlNames {
    fn of(options: &Map<String, Value>) -> Self {
        let name = |key: &str, default: &str| match options.get(key) {
            Some(Value::String(name)) => name.clone(),
            _ => default.to_owned(),
        };
        Self {
            attribute: name("attributePrefix", "@"),
            text: name("textKey", "#text"),
        }
    }
}

/// An element being read: its name, what it holds so far, its text.
struct Open {
    name: String,
    fields: Map<String, Value>,
    text: String,
}

impl Open {
    /// The element as plain data: its text alone when it has nothing else.
    fn close(self, names: &XmlNames) -> (String, Value) {
        let text = self.text.trim();
        let value = if self.fields.is_empty() {
            Value::String(text.to_owned())
        } else {
            let mut fields = self.fields;
            if !text.is_empty() {
                fields.insert(names.text.clone(), Value::String(text.to_owned()));
            }
            Value::Object(fields)
        };
        (self.name, value)
    }
}

/// Puts `value` under `name` in `fields`: a name seen again becomes a list.
fn add_child(fields: &mut Map<String, Value>, name: String, value: Value) {
    match fields.get_mut(&name) {
        Some(Value::Array(items)) => items.push(value),
        Some(existing) => {
            let first = existing.take();
            *existing = Value::Array(vec![first, value]);
        }
        None => {
            fields.insert(name, value);
        }
    }
}

fn xml_error(what: &str, error: impl std::fmt::Display) -> JsNativeError {
    JsNativeError::syntax().with_message(format!("kiln:xml parse: {what}: {error}"))
}

/// `parse(xml, {attributePrefix, textKey})`: the document as plain data,
/// `{root: {...}}`. Only XML's own entities and character references are
/// read: a document's own entity definitions are not expanded, so none can
/// grow without bound.
pub(super) fn parse(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    use quick_xml::events::Event;
    let text = string_argument(args, 0, context)?;
    let names = XmlNames::of(&options(args, 1, context)?);
    let mut reader = quick_xml::Reader::from_str(&text);
    let mut stack: Vec<Open> = vec![Open {
        name: String::new(),
        fields: Map::new(),
        text: String::new(),
    }];
    let open = |start: &quick_xml::events::BytesStart<'_>, names: &XmlNames| {
        let name = String::from_utf8_lossy(start.name().as_ref()).into_owned();
        let mut fields = Map::new();
        for attribute in start.attributes() {
            let attribute = attribute.map_err(|error| xml_error("an attribute", error))?;
            let key = String::from_utf8_lossy(attribute.key.as_ref()).into_owned();
            let value = attribute
                .unescape_value()
                .map_err(|error| xml_error("an attribute's value", error))?;
            fields.insert(
                format!("{}{key}", names.attribute),
                Value::String(value.into_owned()),
            );
        }
        Ok::<_, JsNativeError>(Open {
            name,
            fields,
            text: String::new(),
        })
    };
    loop {
        let event = reader
            .read_event()
            .map_err(|error| xml_error(&format!("at byte {}", reader.buffer_position()), error))?;
        match event {
            Event::Start(start) => {
                if stack.len() > kiln_types::MAX_VALUE_DEPTH {
                    return Err(JsNativeError::range()
                        .with_message(format!(
                            "kiln:xml parse: the document nests elements deeper than {} levels",
                            kiln_types::MAX_VALUE_DEPTH
                        ))
                        .into());
                }
                stack.push(open(&start, &names)?);
            }
            Event::Empty(start) => {
                let (name, value) = open(&start, &names)?.close(&names);
                if let Some(parent) = stack.last_mut() {
                    add_child(&mut parent.fields, name, value);
                }
            }
            Event::End(_) => {
                if stack.len() < 2 {
                    return Err(xml_error("an end tag", "it closes no element").into());
                }
                if let Some(element) = stack.pop() {
                    let (name, value) = element.close(&names);
                    if let Some(parent) = stack.last_mut() {
                        add_child(&mut parent.fields, name, value);
                    }
                }
            }
            Event::Text(content) => {
                let content = content.decode().map_err(|error| xml_error("text", error))?;
                if let Some(element) = stack.last_mut() {
                    element.text.push_str(&content);
                }
            }
            Event::CData(content) => {
                let content = content
                    .decode()
                    .map_err(|error| xml_error("CDATA", error))?;
                if let Some(element) = stack.last_mut() {
                    element.text.push_str(&content);
                }
            }
            Event::GeneralRef(reference) => {
                let resolved = match reference
                    .resolve_char_ref()
                    .map_err(|error| xml_error("a character reference", error))?
                {
                    Some(character) => character.to_string(),
                    None => {
                        let name = reference
                            .decode()
                            .map_err(|error| xml_error("a reference", error))?;
                        quick_xml::escape::resolve_predefined_entity(&name)
                            .ok_or_else(|| {
                                xml_error(
                                    "an entity",
                                    format!("`&{name};` is not one of XML's own (&amp; &lt; &gt; &quot; &apos;), and a document's own entities are not expanded"),
                                )
                            })?
                            .to_owned()
                    }
                };
                if let Some(element) = stack.last_mut() {
                    element.text.push_str(&resolved);
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    if stack.len() != 1 {
        return Err(xml_error("the end", "an element is not closed").into());
    }
    let root = stack
        .pop()
        .map(|document| document.fields)
        .unwrap_or_default();
    to_js(&Value::Object(root), context)
}

/// Writes `value` as the content of an element (its attributes already
/// written by the caller into `tag`).
fn xml_write(out: &mut String, name: &str, value: &Value, names: &XmlNames) {
    use quick_xml::escape::escape;
    match value {
        Value::Array(items) => {
            for item in items {
                xml_write(out, name, item, names);
            }
        }
        Value::Object(fields) => {
            let _ = write!(out, "<{name}");
            for (key, field) in fields {
                if let Some(attribute) = key.strip_prefix(names.attribute.as_str())
                    && !names.attribute.is_empty()
                {
                    let text = match field {
                        Value::String(text) => text.clone(),
                        other => other.to_string(),
                    };
                    let _ = write!(out, " {attribute}=\"{}\"", escape(text.as_str()));
                }
            }
            out.push('>');
            for (key, field) in fields {
                if !names.attribute.is_empty() && key.starts_with(names.attribute.as_str()) {
                    continue;
                }
                if *key == names.text {
                    out.push_str(&escape(cell(field).as_str()));
                } else {
                    xml_write(out, key, field, names);
                }
            }
            let _ = write!(out, "</{name}>");
        }
        Value::Null => {
            let _ = write!(out, "<{name}/>");
        }
        other => {
            let _ = write!(out, "<{name}>{}</{name}>", escape(cell(other).as_str()));
        }
    }
}

/// `stringify(value, {attributePrefix, textKey})`: plain data, `{root: …}`,
/// as XML text.
pub(super) fn stringify(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let value = crate::inspect::to_json(&argument(args, 0), context)?;
    let names = XmlNames::of(&options(args, 1, context)?);
    let Value::Object(roots) = value else {
        return Err(JsNativeError::typ()
            .with_message(
                "kiln:xml stringify takes an object, its one key the root element: {note: {...}}",
            )
            .into());
    };
    let valid = |name: &str| {
        name.chars()
            .next()
            .is_some_and(|c| c.is_alphabetic() || c == '_')
            && name
                .chars()
                .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | ':'))
    };
    let mut stack: Vec<&Value> = vec![];
    for (name, value) in &roots {
        if !valid(name) {
            return Err(JsNativeError::typ()
                .with_message(format!(
                    "kiln:xml stringify: `{name}` is not an element name"
                ))
                .into());
        }
        stack.push(value);
    }
    // Every nested key that is neither an attribute nor the text must be an element name.
    while let Some(value) = stack.pop() {
        match value {
            Value::Object(fields) => {
                for (key, field) in fields {
                    let attribute =
                        !names.attribute.is_empty() && key.starts_with(names.attribute.as_str());
                    if !attribute && *key != names.text && !valid(key) {
                        return Err(JsNativeError::typ()
                            .with_message(format!(
                                "kiln:xml stringify: `{key}` is not an element name"
                            ))
                            .into());
                    }
                    stack.push(field);
                }
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    let mut out = String::new();
    for (name, value) in &roots {
        xml_write(&mut out, name, value, &names);
    }
    Ok(JsString::from(out).into())
}
