//! Whether a program swc's TypeScript parser refused is plain JavaScript
//! all the same: TypeScript is not quite a superset (a `with` statement
//! parses as JavaScript and not as TypeScript), and a valid JavaScript
//! program is left for the engine to run as written, never refused here.
//! The same wrapper and head as the strip, read with swc's JavaScript
//! parser.

use swc_common::{BytePos, Spanned as _};
use swc_ecma_parser::{EsSyntax, Parser, StringInput, Syntax};

/// Whether `head` parses as JavaScript import declarations (a module) and
/// `wrapped_body` as a JavaScript script, without an error of any kind.
pub(crate) fn is_javascript(head: &str, wrapped_body: &str) -> bool {
    (head.is_empty() || parses(head, true)) && parses(wrapped_body, false)
}

/// Where JavaScript's parser first fails on a program that TypeScript's did
/// not parse either: in `head` or in `wrapped_body`, at a byte offset of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    Head(usize),
    Body(usize),
}

/// Where `head` (import declarations, a module) or `wrapped_body` (a script)
/// first fails to parse as JavaScript; `None` when both parse.
pub(crate) fn first_refusal(head: &str, wrapped_body: &str) -> Option<Refusal> {
    if !head.is_empty()
        && let Some(offset) = refusal(head, true)
    {
        return Some(Refusal::Head(offset));
    }
    refusal(wrapped_body, false).map(Refusal::Body)
}

/// Whether `text` parses as a JavaScript module or script, cleanly.
fn parses(text: &str, module: bool) -> bool {
    refusal(text, module).is_none()
}

/// The byte offset of the first error JavaScript's parser finds in `text`,
/// read as a module or a script.
fn refusal(text: &str, module: bool) -> Option<usize> {
    let Ok(end) = u32::try_from(text.len()) else {
        return Some(0);
    };
    let input = StringInput::new(text, BytePos(1), BytePos(1 + end));
    let mut parser = Parser::new(Syntax::Es(EsSyntax::default()), input, None);
    let failed = if module {
        parser.parse_module().err()
    } else {
        parser.parse_script().err()
    };
    let offset = |error: &swc_ecma_parser::error::Error| {
        usize::try_from(error.span().lo.0.saturating_sub(1)).unwrap_or(usize::MAX)
    };
    let mut offsets: Vec<usize> = parser.take_errors().iter().map(offset).collect();
    offsets.extend(failed.as_ref().map(offset));
    offsets.into_iter().min()
}

#[cfg(test)]
mod tests {
    use super::is_javascript;

    #[test]
    fn javascript_that_typescript_refuses_is_javascript() {
        assert!(is_javascript("", "(async function () {with (a) { b }\n})"));
        assert!(is_javascript(
            "import { a } from \"kiln:csv\";",
            "(async function () {a\n})"
        ));
        assert!(!is_javascript(
            "",
            "(async function () {let a: number = 1\n})"
        ));
        assert!(!is_javascript(
            "import type { a } from \"kiln:csv\";",
            "(async function () {\n})"
        ));
    }
}
