//! The modules a program imports (`kiln_types::guest::MODULES`), each over a
//! well-kept Rust crate compiled into the sandbox, identical natively and in
//! the browser: `kiln:csv` (the `csv` crate), `kiln:html` (`scraper`, the
//! html5ever parser and Servo's selector engine, and a Markdown writer over
//! its tree), `kiln:markdown` (`pulldown-cmark`), `kiln:yaml`
//! (`serde_norway`, serde_yaml's maintained fork), `kiln:xml` (`quick-xml`),
//! `kiln:diff` (`similar`).
//!
//! The run's importer (`imports` rewrites declarations into calls of it)
//! builds a module's namespace the first time the run imports it and keeps
//! it for the run. Every export takes text through the standard library's
//! bound ([`crate::stdlib::MAX_TEXT_CHARS`]) and answers plain data; bad
//! input is a catchable error naming what was wrong.

use std::fmt::Write as _;

use boa_engine::object::ObjectInitializer;
use boa_engine::object::builtins::JsArray;
use boa_engine::property::Attribute;
use boa_engine::{Context, JsNativeError, JsObject, JsResult, JsString, JsValue, NativeFunction};
use serde_json::{Map, Value, json};

use crate::stdlib::{argument, string_argument};

/// The most elements `select` answers.
pub const MAX_SELECT: usize = 1000;
/// `select`'s limit when the program names none.
pub const DEFAULT_SELECT: usize = 100;

/// The run's importer: `__kiln_import(specifier)` answers the module's
/// namespace, made once per run.
pub(crate) fn importer(context: &mut Context) -> JsObject {
    let cache = JsObject::with_null_proto();
    NativeFunction::from_copy_closure_with_captures(
        |_, args, cache: &JsObject, context| {
            let specifier = string_argument(args, 0, context)?;
            let key = JsString::from(specifier.as_str());
            if cache.has_own_property(key.clone(), context)? {
                return cache.get(key, context);
            }
            let namespace = namespace(&specifier, context)?;
            cache.create_data_property_or_throw(key, namespace.clone(), context)?;
            Ok(namespace.into())
        },
        cache,
    )
    .to_js_function(context.realm())
    .into()
}

/// A module's namespace: a frozen object of its exports.
fn namespace(specifier: &str, context: &mut Context) -> JsResult<JsObject> {
    let exports: &[(&str, NativeFunction, usize)] = match specifier {
        "kiln:csv" => &[
            ("parse", NativeFunction::from_fn_ptr(csv_parse), 2),
            ("stringify", NativeFunction::from_fn_ptr(csv_stringify), 2),
        ],
        "kiln:html" => &[
            ("select", NativeFunction::from_fn_ptr(html_select), 3),
            (
                "toMarkdown",
                NativeFunction::from_fn_ptr(html_to_markdown),
                1,
            ),
        ],
        "kiln:markdown" => &[("toHtml", NativeFunction::from_fn_ptr(markdown_to_html), 2)],
        "kiln:yaml" => &[
            ("parse", NativeFunction::from_fn_ptr(yaml_parse), 1),
            ("stringify", NativeFunction::from_fn_ptr(yaml_stringify), 1),
        ],
        "kiln:xml" => &[
            ("parse", NativeFunction::from_fn_ptr(xml_parse), 2),
            ("stringify", NativeFunction::from_fn_ptr(xml_stringify), 2),
        ],
        "kiln:diff" => &[
            ("lines", NativeFunction::from_fn_ptr(diff_lines), 2),
            ("words", NativeFunction::from_fn_ptr(diff_words), 2),
            ("unified", NativeFunction::from_fn_ptr(diff_unified), 3),
        ],
        _ => {
            return Err(JsNativeError::typ()
                .with_message(format!("there is no module `{specifier}`"))
                .into());
        }
    };
    let mut object = ObjectInitializer::new(context);
    for (name, function, length) in exports {
        object.function(function.clone(), JsString::from(*name), *length);
    }
    object.property(
        boa_engine::JsSymbol::to_string_tag(),
        JsString::from("Module"),
        Attribute::empty(),
    );
    let object = object.build();
    object.set_integrity_level(boa_engine::object::IntegrityLevel::Frozen, context)?;
    Ok(object)
}

/// Argument `index` as JSON (an options object; `{}` when absent).
fn options(args: &[JsValue], index: usize, context: &mut Context) -> JsResult<Map<String, Value>> {
    let value = argument(args, index);
    if value.is_undefined() || value.is_null() {
        return Ok(Map::new());
    }
    match crate::inspect::to_json(&value, context)? {
        Value::Object(map) => Ok(map),
        other => Err(JsNativeError::typ()
            .with_message(format!("the options must be an object; got {other}"))
            .into()),
    }
}

fn flag(options: &Map<String, Value>, name: &str, default: bool) -> JsResult<bool> {
    match options.get(name) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(value)) => Ok(*value),
        Some(other) => Err(JsNativeError::typ()
            .with_message(format!("`{name}` must be true or false; got {other}"))
            .into()),
    }
}

/// A one-character option (`delimiter`, `quote`) as its byte.
fn byte(options: &Map<String, Value>, name: &str, default: u8) -> JsResult<u8> {
    match options.get(name) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::String(text)) if text.len() == 1 && text.is_ascii() => Ok(text.as_bytes()[0]),
        Some(other) => Err(JsNativeError::typ()
            .with_message(format!(
                "`{name}` must be one ASCII character, such as \",\" or \"\\t\"; got {other}"
            ))
            .into()),
    }
}

fn to_js(value: &Value, context: &mut Context) -> JsResult<JsValue> {
    JsValue::from_json(value, context)
}

/// `parse(text, {header, delimiter, quote, trim})`.
fn csv_parse(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let text = string_argument(args, 0, context)?;
    let options = options(args, 1, context)?;
    let header = flag(&options, "header", true)?;
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .delimiter(byte(&options, "delimiter", b',')?)
        .quote(byte(&options, "quote", b'"')?)
        .trim(if flag(&options, "trim", false)? {
            csv::Trim::All
        } else {
            csv::Trim::None
        })
        .from_reader(text.as_bytes());
    let mut records = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|error| {
            JsNativeError::syntax().with_message(format!("kiln:csv parse: {error}"))
        })?;
        records.push(record.iter().map(str::to_owned).collect::<Vec<String>>());
    }
    if !header {
        return to_js(&json!(records), context);
    }
    let mut rows = records.into_iter();
    let Some(names) = rows.next() else {
        return to_js(&json!([]), context);
    };
    // A name the header repeats gets a suffix (`a`, `a_1`), so no column is lost.
    let mut keys: Vec<String> = Vec::with_capacity(names.len());
    for name in names {
        let mut key = name.clone();
        let mut suffix = 0;
        while keys.contains(&key) {
            suffix += 1;
            key = format!("{name}_{suffix}");
        }
        keys.push(key);
    }
    // Built straight into the engine's objects, each key made once: going
    // through JSON values first cost about half the time of a parse.
    let keys: Vec<JsString> = keys
        .iter()
        .map(|key| JsString::from(key.as_str()))
        .collect();
    let extra = JsString::from("_extra");
    let mut objects = Vec::new();
    for row in rows {
        let object = JsObject::with_object_proto(context.intrinsics());
        for (index, key) in keys.iter().enumerate() {
            let cell: JsValue = row
                .get(index)
                .map_or_else(JsValue::null, |cell| JsString::from(cell.as_str()).into());
            object.create_data_property_or_throw(key.clone(), cell, context)?;
        }
        if row.len() > keys.len() {
            let cells = row[keys.len()..]
                .iter()
                .map(|cell| JsString::from(cell.as_str()).into());
            let cells = JsArray::from_iter(cells, context);
            object.create_data_property_or_throw(extra.clone(), cells, context)?;
        }
        objects.push(JsValue::from(object));
    }
    Ok(JsArray::from_iter(objects, context).into())
}

/// A cell as CSV text: strings as they are, `null` empty, anything else its JSON.
fn cell(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// `stringify(rows, {header, delimiter})`.
fn csv_stringify(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let rows = crate::inspect::to_json(&argument(args, 0), context)?;
    let options = options(args, 1, context)?;
    let Value::Array(rows) = rows else {
        return Err(JsNativeError::typ()
            .with_message("kiln:csv stringify takes an array of rows (objects or arrays)")
            .into());
    };
    let mut writer = csv::WriterBuilder::new()
        .flexible(true)
        .delimiter(byte(&options, "delimiter", b',')?)
        .from_writer(Vec::new());
    let objects = rows.iter().any(Value::is_object);
    let mut keys: Vec<String> = Vec::new();
    if objects {
        for row in &rows {
            if let Value::Object(object) = row {
                for key in object.keys() {
                    if !keys.contains(key) {
                        keys.push(key.clone());
                    }
                }
            }
        }
    }
    let failed = |error: csv::Error| {
        JsNativeError::error().with_message(format!("kiln:csv stringify: {error}"))
    };
    if objects && flag(&options, "header", true)? {
        writer.write_record(&keys).map_err(failed)?;
    }
    for (index, row) in rows.iter().enumerate() {
        let cells: Vec<String> = match row {
            Value::Object(object) => keys
                .iter()
                .map(|key| object.get(key).map_or_else(String::new, cell))
                .collect(),
            Value::Array(values) => values.iter().map(cell).collect(),
            other => {
                return Err(JsNativeError::typ()
                    .with_message(format!(
                        "kiln:csv stringify: row {index} is {other}, not an object or an array"
                    ))
                    .into());
            }
        };
        writer.write_record(&cells).map_err(failed)?;
    }
    let bytes = writer
        .into_inner()
        .map_err(|error| JsNativeError::error().with_message(error.to_string()))?;
    Ok(JsString::from(String::from_utf8_lossy(&bytes).as_ref()).into())
}

/// Text with runs of white space made one space, trimmed.
fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// How deep a page may nest its elements: as deep as browsers build (they
/// stop at 512). A deeper page is refused, because the parser's and the
/// selector engine's work grows with the depth times the elements.
pub const MAX_HTML_DEPTH: usize = 512;

/// Elements that never hold others, or that the parser closes when a sibling
/// opens, so they do not make a page deeper.
const FLAT: &[&str] = &[
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
    "wbr", "p", "li", "dt", "dd", "td", "th", "tr", "option", "optgroup", "thead", "tbody",
    "tfoot", "colgroup", "caption", "rb", "rt", "rp",
];

/// How deep `html` nests its elements, read from its tags without building
/// a tree (comments and the text of `script`, `style` and `textarea` skipped).
fn nesting(html: &str) -> usize {
    let bytes = html.as_bytes();
    let (mut at, mut depth, mut deepest) = (0, 0_usize, 0);
    while let Some(offset) = bytes[at..].iter().position(|&b| b == b'<') {
        at += offset + 1;
        if bytes[at..].starts_with(b"!--") {
            at = html[at..]
                .find("-->")
                .map_or(bytes.len(), |end| at + end + 3);
            continue;
        }
        let closing = bytes.get(at) == Some(&b'/');
        let start = if closing { at + 1 } else { at };
        let length = bytes[start..]
            .iter()
            .position(|b| !b.is_ascii_alphanumeric())
            .unwrap_or(bytes.len() - start);
        if length == 0 || !bytes[start].is_ascii_alphabetic() {
            continue;
        }
        let name = html[start..start + length].to_ascii_lowercase();
        let end = html[start..]
            .find('>')
            .map_or(bytes.len(), |end| start + end);
        let self_closing = end > 0 && bytes.get(end - 1) == Some(&b'/');
        at = end.min(bytes.len());
        if FLAT.contains(&name.as_str()) || self_closing {
            continue;
        }
        if closing {
            depth = depth.saturating_sub(1);
            continue;
        }
        depth += 1;
        deepest = deepest.max(depth);
        if matches!(name.as_str(), "script" | "style" | "textarea" | "title") {
            let close = format!("</{name}");
            let rest = html[at..].to_ascii_lowercase();
            at = rest.find(&close).map_or(bytes.len(), |found| at + found);
        }
    }
    deepest
}

/// `html` parsed, or a `RangeError` when it nests past [`MAX_HTML_DEPTH`].
fn parse_page(html: &str, what: &str) -> JsResult<scraper::Html> {
    let depth = nesting(html);
    if depth > MAX_HTML_DEPTH {
        return Err(JsNativeError::range()
            .with_message(format!(
                "kiln:html {what}: the page nests elements {depth} levels deep, more than the {MAX_HTML_DEPTH} a page may (browsers stop there too)"
            ))
            .into());
    }
    Ok(scraper::Html::parse_document(html))
}

/// `select(html, selector, {limit})`.
fn html_select(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let html = string_argument(args, 0, context)?;
    let css = string_argument(args, 1, context)?;
    let options = options(args, 2, context)?;
    let limit = match options.get("limit") {
        None | Some(Value::Null) => DEFAULT_SELECT,
        Some(Value::Number(number)) => match number.as_u64() {
            Some(limit) if (1..=MAX_SELECT as u64).contains(&limit) => {
                usize::try_from(limit).unwrap_or(MAX_SELECT)
            }
            _ => {
                return Err(JsNativeError::range()
                    .with_message(format!(
                        "kiln:html select: `limit` is an integer from 1 to {MAX_SELECT}; got {number}"
                    ))
                    .into());
            }
        },
        Some(other) => {
            return Err(JsNativeError::typ()
                .with_message(format!(
                    "kiln:html select: `limit` is a number; got {other}"
                ))
                .into());
        }
    };
    let selector = scraper::Selector::parse(&css).map_err(|error| {
        JsNativeError::syntax().with_message(format!(
            "kiln:html select: `{css}` is not a CSS selector: {error}"
        ))
    })?;
    let document = parse_page(&html, "select")?;
    let matches: Vec<Value> = document
        .select(&selector)
        .take(limit)
        .map(|element| {
            let attributes: Map<String, Value> = element
                .value()
                .attrs()
                .map(|(name, value)| (name.to_owned(), json!(value)))
                .collect();
            json!({
                "tag": element.value().name(),
                "text": collapse(&element.text().collect::<String>()),
                "html": element.html(),
                "attributes": attributes,
            })
        })
        .collect();
    to_js(&Value::Array(matches), context)
}

/// `toMarkdown(html)`.
fn html_to_markdown(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let html = string_argument(args, 0, context)?;
    let document = parse_page(&html, "toMarkdown")?;
    let mut writer = Markdown::default();
    writer.children(document.tree.root(), 0);
    Ok(JsString::from(writer.finish()).into())
}

/// Elements whose content is not the page's text.
const SKIPPED: &[&str] = &[
    "script", "style", "noscript", "template", "head", "svg", "iframe", "object",
];

/// How deep the writer follows elements; deeper content is written as its
/// text (the tree is walked without recursion there).
const MAX_MARKDOWN_DEPTH: usize = 64;

/// Markdown written from a parsed page: blocks separated by blank lines,
/// inline text with its white space collapsed.
#[derive(Default)]
struct Markdown {
    out: String,
    /// The prefix of each new line: blockquote markers and list indents.
    prefix: String,
    /// The inline text of the block being written.
    line: String,
    /// Inside `<pre>`: text kept as it is.
    pre: bool,
}

type NodeRef<'a> = ego_tree::NodeRef<'a, scraper::Node>;

impl Markdown {
    fn children(&mut self, node: NodeRef<'_>, depth: usize) {
        for child in node.children() {
            self.node(child, depth + 1);
        }
    }

    /// Ends the block being written.
    fn block(&mut self) {
        let line = collapse(&self.line);
        self.line.clear();
        if line.is_empty() {
            return;
        }
        if !self.out.is_empty() {
            self.out.push_str("\n\n");
        }
        self.out.push_str(&self.prefix);
        self.out.push_str(&line);
    }

    fn text(&mut self, text: &str) {
        if self.pre {
            self.line.push_str(text);
        } else {
            // Characters Markdown would read as syntax stay text.
            for c in text.chars() {
                if matches!(c, '*' | '_' | '`' | '[' | ']' | '\\') {
                    self.line.push('\\');
                }
                self.line.push(c);
            }
        }
    }

    fn inline(&mut self, node: NodeRef<'_>, depth: usize, open: &str, close: &str) {
        self.line.push_str(open);
        self.children(node, depth);
        self.line.push_str(close);
    }

    fn node(&mut self, node: NodeRef<'_>, depth: usize) {
        let element = match node.value() {
            scraper::Node::Text(text) => return self.text(text),
            scraper::Node::Element(element) => element,
            scraper::Node::Document | scraper::Node::Fragment => {
                return self.children(node, depth);
            }
            _ => return,
        };
        let name = element.name();
        if SKIPPED.contains(&name) {
            return;
        }
        if depth > MAX_MARKDOWN_DEPTH {
            if let Some(element) = scraper::ElementRef::wrap(node) {
                let text: String = element.text().collect();
                self.text(&text);
            }
            return;
        }
        match name {
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                self.block();
                let level = usize::from(name.as_bytes()[1] - b'0');
                self.line.push_str(&"#".repeat(level));
                self.line.push(' ');
                self.children(node, depth);
                self.block();
            }
            "p" | "div" | "section" | "article" | "main" | "header" | "footer" | "nav"
            | "aside" | "figure" | "table" | "tr" | "dl" | "dt" | "dd" | "form" => {
                self.block();
                self.children(node, depth);
                if name == "tr" {
                    self.line.push_str(" |");
                }
                self.block();
            }
            "td" | "th" => {
                self.line.push_str(" | ");
                self.children(node, depth);
            }
            "br" => self.line.push_str("  \n"),
            "hr" => {
                self.block();
                self.line.push_str("---");
                self.block();
            }
            "strong" | "b" => self.inline(node, depth, "**", "**"),
            "em" | "i" => self.inline(node, depth, "*", "*"),
            "del" | "s" => self.inline(node, depth, "~~", "~~"),
            "code" if !self.pre => self.inline(node, depth, "`", "`"),
            "a" => {
                let href = element.attr("href").unwrap_or("").to_owned();
                if href.is_empty() || href.starts_with("javascript:") {
                    return self.children(node, depth);
                }
                self.line.push('[');
                self.children(node, depth);
                let _ = write!(self.line, "]({href})");
            }
            "img" => {
                let alt = element.attr("alt").unwrap_or("");
                if let Some(src) = element.attr("src") {
                    let _ = write!(self.line, "![{}]({src})", collapse(alt));
                }
            }
            "pre" => {
                self.block();
                self.pre = true;
                let mut text = String::new();
                std::mem::swap(&mut text, &mut self.line);
                self.children(node, depth);
                let code = std::mem::take(&mut self.line);
                self.line = text;
                self.pre = false;
                if !self.out.is_empty() {
                    self.out.push_str("\n\n");
                }
                let _ = write!(
                    self.out,
                    "{0}```\n{1}\n{0}```",
                    self.prefix,
                    code.trim_end()
                );
            }
            "blockquote" => {
                self.block();
                self.prefix.push_str("> ");
                self.children(node, depth);
                self.block();
                self.prefix.truncate(self.prefix.len() - 2);
            }
            "ul" | "ol" => {
                self.block();
                let ordered = name == "ol";
                let mut number = 0;
                for child in node.children() {
                    let is_item = matches!(child.value(), scraper::Node::Element(item) if item.name() == "li");
                    if !is_item {
                        self.node(child, depth + 1);
                        continue;
                    }
                    number += 1;
                    let marker = if ordered {
                        format!("{number}. ")
                    } else {
                        "- ".to_owned()
                    };
                    self.line.push_str(&marker);
                    self.children(child, depth + 1);
                    let line = collapse(&self.line);
                    self.line.clear();
                    if !self.out.is_empty() {
                        self.out.push_str(if number == 1 { "\n\n" } else { "\n" });
                    }
                    self.out.push_str(&self.prefix);
                    self.out.push_str(&line);
                }
            }
            _ => self.children(node, depth),
        }
    }

    fn finish(mut self) -> String {
        self.block();
        self.out
    }
}

/// `toHtml(markdown, {allowHtml})`.
fn markdown_to_html(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    use pulldown_cmark::{Event, Options, Parser};
    let markdown = string_argument(args, 0, context)?;
    let allow_html = flag(&options(args, 1, context)?, "allowHtml", false)?;
    let parser = Parser::new_ext(
        &markdown,
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS,
    )
    .map(|event| match event {
        // Raw HTML is the page's to allow: by default it is shown as text.
        Event::Html(html) | Event::InlineHtml(html) if !allow_html => Event::Text(html),
        other => other,
    });
    let mut html = String::with_capacity(markdown.len() * 3 / 2);
    pulldown_cmark::html::push_html(&mut html, parser);
    Ok(JsString::from(html).into())
}

/// `parse(text)`: YAML to plain data.
fn yaml_parse(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let text = string_argument(args, 0, context)?;
    let value: Value = serde_norway::from_str(&text).map_err(|error| {
        JsNativeError::syntax().with_message(format!("kiln:yaml parse: {error}"))
    })?;
    kiln_types::check_depth(&value).map_err(|why| {
        JsNativeError::range().with_message(format!("kiln:yaml parse: the document {why}"))
    })?;
    to_js(&value, context)
}

/// `stringify(value)`: plain data to YAML.
fn yaml_stringify(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let value = crate::inspect::to_json(&argument(args, 0), context)?;
    let text = serde_norway::to_string(&value).map_err(|error| {
        JsNativeError::typ().with_message(format!("kiln:yaml stringify: {error}"))
    })?;
    Ok(JsString::from(text).into())
}

/// The most lines, or words, either side of a diff may have: the work grows
/// with the tokens times the differences.
pub const MAX_DIFF_TOKENS: usize = 20_000;

/// The two texts of a diff, each within the text bound and [`MAX_DIFF_TOKENS`]
/// `unit`s, as `count` counts them.
fn diff_texts(
    args: &[JsValue],
    context: &mut Context,
    what: &str,
    unit: &str,
    count: fn(&str) -> usize,
) -> JsResult<(String, String)> {
    let before = string_argument(args, 0, context)?;
    let after = string_argument(args, 1, context)?;
    for (side, text) in [("before", &before), ("after", &after)] {
        let tokens = count(text);
        if tokens > MAX_DIFF_TOKENS {
            return Err(JsNativeError::range()
                .with_message(format!(
                    "kiln:diff {what}: the {side} text has {tokens} {unit}, more than the {MAX_DIFF_TOKENS} a diff compares"
                ))
                .into());
        }
    }
    Ok((before, after))
}

fn count_lines(text: &str) -> usize {
    text.lines().count()
}

fn count_words(text: &str) -> usize {
    text.split_whitespace().count()
}

/// A diff's changes grouped into runs: `{value, added, removed, count}`.
fn runs<'a>(changes: impl Iterator<Item = (similar::ChangeTag, &'a str)>) -> Value {
    let mut runs: Vec<(similar::ChangeTag, String, usize)> = Vec::new();
    for (tag, value) in changes {
        match runs.last_mut() {
            Some((last, text, count)) if *last == tag => {
                text.push_str(value);
                *count += 1;
            }
            _ => runs.push((tag, value.to_owned(), 1)),
        }
    }
    Value::Array(
        runs.into_iter()
            .map(|(tag, value, count)| {
                json!({
                    "value": value,
                    "added": tag == similar::ChangeTag::Insert,
                    "removed": tag == similar::ChangeTag::Delete,
                    "count": count,
                })
            })
            .collect(),
    )
}

/// `lines(before, after)`.
fn diff_lines(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let (before, after) = diff_texts(args, context, "lines", "lines", count_lines)?;
    let diff = similar::TextDiff::from_lines(&before, &after);
    let changes = diff
        .iter_all_changes()
        .map(|change| (change.tag(), change.value()));
    to_js(&runs(changes), context)
}

/// `words(before, after)`.
fn diff_words(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let (before, after) = diff_texts(args, context, "words", "words", count_words)?;
    let diff = similar::TextDiff::from_words(&before, &after);
    let changes = diff
        .iter_all_changes()
        .map(|change| (change.tag(), change.value()));
    to_js(&runs(changes), context)
}

/// `unified(before, after, {context, from, to})`.
fn diff_unified(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let (before, after) = diff_texts(args, context, "unified", "lines", count_lines)?;
    let options = options(args, 2, context)?;
    let radius = match options.get("context") {
        None | Some(Value::Null) => 3,
        Some(Value::Number(number)) => number
            .as_u64()
            .filter(|radius| *radius <= 1000)
            .and_then(|radius| usize::try_from(radius).ok())
            .ok_or_else(|| {
                JsNativeError::range().with_message(format!(
                    "kiln:diff unified: `context` is a number of lines from 0 to 1000; got {number}"
                ))
            })?,
        Some(other) => {
            return Err(JsNativeError::typ()
                .with_message(format!(
                    "kiln:diff unified: `context` is a number; got {other}"
                ))
                .into());
        }
    };
    if before == after {
        return Ok(JsString::from("").into());
    }
    let name = |key: &str, default: &str| match options.get(key) {
        Some(Value::String(name)) => name.clone(),
        _ => default.to_owned(),
    };
    let diff = similar::TextDiff::from_lines(&before, &after);
    let text = diff
        .unified_diff()
        .context_radius(radius)
        .header(&name("from", "before"), &name("to", "after"))
        .to_string();
    Ok(JsString::from(text).into())
}

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
fn xml_parse(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
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
fn xml_stringify(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
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
