//! Kiln's own sentences on the page — statuses, errors, hints, notes — with
//! the names they quote in backticks (`` Saved `notes.txt`. ``, an error's
//! `` `b` is missing ``) shown as code, not as backticks. Only Kiln's
//! messages go through here; a model's reply is Markdown ([`crate::markdown`])
//! and a program's output stays as it was printed.
//!
//! [`spans`] splits the text, pure and tested natively; [`said`] draws it as
//! text nodes and `<code>` elements (never HTML parsed from the text).

use leptos::prelude::*;

/// One piece of a sentence: plain text, or a quoted name shown as code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Span<'a> {
    Text(&'a str),
    Code(&'a str),
}

/// `text` cut at its backtick pairs. A backtick without a partner, or a pair
/// with nothing between, stays as it is.
pub(crate) fn spans(text: &str) -> Vec<Span<'_>> {
    let mut out = Vec::new();
    // `rest` is what is left after the last pair; the search for the next
    // opening backtick starts at `at` within it.
    let mut rest = text;
    let mut at = 0;
    while let Some(open) = rest[at..].find('`').map(|found| at + found) {
        let Some(close) = rest[open + 1..].find('`').map(|found| open + 1 + found) else {
            break;
        };
        if close == open + 1 {
            // Two backticks together quote nothing: both stay, and the search goes on after them.
            at = close + 1;
            continue;
        }
        if open > 0 {
            out.push(Span::Text(&rest[..open]));
        }
        out.push(Span::Code(&rest[open + 1..close]));
        rest = &rest[close + 1..];
        at = 0;
    }
    if !rest.is_empty() {
        out.push(Span::Text(rest));
    }
    out
}

/// `text` drawn with its quoted names as code.
pub(crate) fn said(text: impl AsRef<str>) -> AnyView {
    spans(text.as_ref())
        .into_iter()
        .map(|span| match span {
            Span::Text(text) => text.to_owned().into_any(),
            Span::Code(code) => {
                view! { <code class="said-code">{code.to_owned()}</code> }.into_any()
            }
        })
        .collect_view()
        .into_any()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_names_become_code_and_a_lone_backtick_stays() {
        assert_eq!(
            spans("Saved `notes.txt`."),
            [
                Span::Text("Saved "),
                Span::Code("notes.txt"),
                Span::Text(".")
            ]
        );
        assert_eq!(
            spans("`a` and `b`"),
            [Span::Code("a"), Span::Text(" and "), Span::Code("b")]
        );
        assert_eq!(spans("no names"), [Span::Text("no names")]);
        assert_eq!(spans(""), []);
        // Unpaired, or a pair that quotes nothing: left as typed.
        assert_eq!(spans("a ` b"), [Span::Text("a ` b")]);
        assert_eq!(
            spans("`` then `x`"),
            [Span::Text("`` then "), Span::Code("x")]
        );
        assert_eq!(
            spans("`x` then `"),
            [Span::Code("x"), Span::Text(" then `")]
        );
        // Not bytes: a name with other scripts is cut at its backticks only.
        assert_eq!(
            spans("Löschen `Ärger` — ok"),
            [
                Span::Text("Löschen "),
                Span::Code("Ärger"),
                Span::Text(" — ok")
            ]
        );
    }
}
