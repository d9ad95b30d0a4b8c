//! `kiln:html`: pages parsed by `scraper` (html5ever and Servo's selector
//! engine), and a Markdown writer over its tree.

use std::fmt::Write as _;

use kiln_types::library::{Answer, Failure, LibraryCall};
use serde_json::{Map, Value, json};

/// The most elements `select` answers.
pub const MAX_SELECT: usize = 1000;
/// `select`'s limit when the program names none.
pub const DEFAULT_SELECT: usize = 100;

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
fn parse_page(html: &str, what: &str) -> Result<scraper::Html, Failure> {
    let depth = nesting(html);
    if depth > MAX_HTML_DEPTH {
        return Err(Failure::range(format!(
            "kiln:html {what}: the page nests elements {depth} levels deep, more than the {MAX_HTML_DEPTH} a page may (browsers stop there too)"
        )));
    }
    Ok(scraper::Html::parse_document(html))
}

/// `select(html, selector, {limit})`.
pub(super) fn select(call: &LibraryCall) -> Result<Answer, Failure> {
    let html = call.text(0);
    let css = call.text(1);
    let options = call.options(2);
    let limit = match options.get("limit") {
        None | Some(Value::Null) => DEFAULT_SELECT,
        Some(Value::Number(number)) => match number.as_u64() {
            Some(limit) if (1..=MAX_SELECT as u64).contains(&limit) => {
                usize::try_from(limit).unwrap_or(MAX_SELECT)
            }
            _ => {
                return Err(Failure::range(format!(
                    "kiln:html select: `limit` is an integer from 1 to {MAX_SELECT}; got {number}"
                )));
            }
        },
        Some(other) => {
            return Err(Failure::type_error(format!(
                "kiln:html select: `limit` is a number; got {other}"
            )));
        }
    };
    let selector = scraper::Selector::parse(css).map_err(|error| {
        Failure::syntax(format!(
            "kiln:html select: `{css}` is not a CSS selector: {error}"
        ))
    })?;
    let document = parse_page(html, "select")?;
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
    Ok(Answer::Json(Value::Array(matches)))
}

/// `toMarkdown(html)`.
pub(super) fn to_markdown(call: &LibraryCall) -> Result<Answer, Failure> {
    let document = parse_page(call.text(0), "toMarkdown")?;
    let mut writer = Markdown::default();
    writer.children(document.tree.root(), 0);
    Ok(Answer::Text(writer.finish()))
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
