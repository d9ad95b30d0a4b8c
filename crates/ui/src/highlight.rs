//! A program shown as code: JavaScript split into the pieces a reader tells
//! apart (keywords, strings, comments, numbers), for the approval card and the
//! action blocks. A reading aid, not a parser: text it cannot place is plain,
//! and the pieces always join back into the program exactly.

use leptos::prelude::*;

/// What a piece of the program is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Plain,
    Keyword,
    String,
    Comment,
    Number,
}

const KEYWORDS: &[&str] = &[
    "async",
    "await",
    "break",
    "case",
    "catch",
    "class",
    "const",
    "continue",
    "default",
    "delete",
    "do",
    "else",
    "export",
    "extends",
    "false",
    "finally",
    "for",
    "from",
    "function",
    "if",
    "import",
    "in",
    "instanceof",
    "let",
    "new",
    "null",
    "of",
    "return",
    "switch",
    "this",
    "throw",
    "true",
    "try",
    "typeof",
    "undefined",
    "var",
    "void",
    "while",
    "yield",
];

/// `code` in pieces, in order.
pub(crate) fn pieces(code: &str) -> Vec<(Kind, &str)> {
    let bytes = code.as_bytes();
    let mut start = 0;
    let mut at = 0;
    let flush = |out: &mut Vec<(Kind, usize, usize)>, from: usize, to: usize| {
        if to > from {
            out.push((Kind::Plain, from, to));
        }
    };
    let mut spans: Vec<(Kind, usize, usize)> = Vec::new();
    while at < bytes.len() {
        let byte = bytes[at];
        let next = bytes.get(at + 1).copied();
        let end = if byte == b'/' && next == Some(b'/') {
            Some((
                Kind::Comment,
                code[at..].find('\n').map_or(code.len(), |n| at + n),
            ))
        } else if byte == b'/' && next == Some(b'*') {
            Some((
                Kind::Comment,
                code[at + 2..]
                    .find("*/")
                    .map_or(code.len(), |n| at + 2 + n + 2),
            ))
        } else if matches!(byte, b'"' | b'\'' | b'`') {
            let mut end = at + 1;
            while end < bytes.len() && bytes[end] != byte {
                if bytes[end] == b'\\' {
                    end += 1;
                } else if bytes[end] == b'\n' && byte != b'`' {
                    break;
                }
                end += 1;
            }
            Some((Kind::String, (end + 1).min(bytes.len())))
        } else if byte.is_ascii_digit() && (at == 0 || !is_word(bytes[at - 1])) {
            let mut end = at;
            while end < bytes.len()
                && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'.' || bytes[end] == b'_')
            {
                end += 1;
            }
            Some((Kind::Number, end))
        } else if is_word(byte) && (at == 0 || !is_word(bytes[at - 1])) {
            let mut end = at;
            while end < bytes.len() && is_word(bytes[end]) {
                end += 1;
            }
            let word = &code[at..end];
            // A property (`x.return`) is not the keyword.
            let property = at > 0 && bytes[at - 1] == b'.';
            if !property && KEYWORDS.contains(&word) {
                Some((Kind::Keyword, end))
            } else {
                at = end;
                continue;
            }
        } else {
            None
        };
        match end {
            Some((kind, end)) => {
                flush(&mut spans, start, at);
                spans.push((kind, at, end));
                at = end;
                start = end;
            }
            None => {
                // Step over one whole character (the program may hold any text).
                at += code[at..].chars().next().map_or(1, char::len_utf8);
            }
        }
    }
    flush(&mut spans, start, code.len());
    spans
        .into_iter()
        .map(|(kind, from, to)| (kind, &code[from..to]))
        .collect()
}

fn is_word(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'$' || byte >= 0x80
}

/// `code` as a scrollable, focusable block (a keyboard reaches what does not
/// fit), each piece in its class; the text is the program's, with its acting
/// characters escaped by `escape` (the caller's rule for untrusted text).
pub(crate) fn code_view(
    code: &str,
    escape: fn(&str) -> String,
    label: &'static str,
    testid: &'static str,
) -> impl IntoView + use<> {
    let spans = pieces(code)
        .into_iter()
        .map(|(kind, text)| {
            let text = escape(text);
            match kind {
                Kind::Plain => view! { <span>{text}</span> }.into_any(),
                Kind::Keyword => view! { <span class="tok-kw">{text}</span> }.into_any(),
                Kind::String => view! { <span class="tok-str">{text}</span> }.into_any(),
                Kind::Comment => view! { <span class="tok-com">{text}</span> }.into_any(),
                Kind::Number => view! { <span class="tok-num">{text}</span> }.into_any(),
            }
        })
        .collect_view();
    view! {
        <pre class="code program" tabindex="0" aria-label=label data-testid=testid><code>{spans}</code></pre>
    }
}

#[cfg(test)]
mod tests {
    use super::{Kind, pieces};

    fn kinds(code: &str) -> Vec<(Kind, &str)> {
        pieces(code)
            .into_iter()
            .filter(|(kind, _)| *kind != Kind::Plain)
            .collect()
    }

    #[test]
    fn a_program_splits_into_what_a_reader_tells_apart_and_joins_back_exactly() {
        let code = "// add them\nconst {sum} = await tools.add({a: 20, b: 3.5});\n/* a\n b */ return `sum ${sum}` + 'x\\'y' + x.return;";
        assert_eq!(
            kinds(code),
            [
                (Kind::Comment, "// add them"),
                (Kind::Keyword, "const"),
                (Kind::Keyword, "await"),
                (Kind::Number, "20"),
                (Kind::Number, "3.5"),
                (Kind::Comment, "/* a\n b */"),
                (Kind::Keyword, "return"),
                (Kind::String, "`sum ${sum}`"),
                (Kind::String, "'x\\'y'"),
            ]
        );
        for text in [
            code,
            "",
            "\"unterminated",
            "/* open",
            "é 1é2 $return return$ a1",
            "\u{202e}x",
        ] {
            let joined: String = pieces(text).into_iter().map(|(_, piece)| piece).collect();
            assert_eq!(joined, text);
        }
    }
}
