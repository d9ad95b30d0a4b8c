//! `kiln:markdown`: CommonMark to HTML over `pulldown-cmark`.

use kiln_types::library::{Answer, Failure, LibraryCall};

use super::flag;

/// `toHtml(markdown, {allowHtml})`.
pub(super) fn to_html(call: &LibraryCall) -> Result<Answer, Failure> {
    use pulldown_cmark::{Event, Options, Parser};
    let markdown = call.text(0);
    let allow_html = flag(&call.options(1), "allowHtml", false)?;
    let parser = Parser::new_ext(
        markdown,
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS,
    )
    .map(|event| match event {
        // Raw HTML is the page's to allow: by default it is shown as text.
        Event::Html(html) | Event::InlineHtml(html) if !allow_html => Event::Text(html),
        other => other,
    });
    let mut html = String::with_capacity(markdown.len() * 3 / 2);
    pulldown_cmark::html::push_html(&mut html, parser);
    Ok(Answer::Text(html))
}
