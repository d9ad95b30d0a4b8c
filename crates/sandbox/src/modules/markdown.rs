//! `kiln:markdown`: CommonMark to HTML over `pulldown-cmark`.

use boa_engine::{Context, JsResult, JsString, JsValue};

use super::{flag, options};
use crate::stdlib::string_argument;

/// `toHtml(markdown, {allowHtml})`.
pub(super) fn to_html(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
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
