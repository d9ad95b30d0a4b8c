//! Whether a program swc's TypeScript parser refused is plain JavaScript
//! all the same: TypeScript is not quite a superset (a `with` statement
//! parses as JavaScript and not as TypeScript), and a valid JavaScript
//! program is left for the engine to run as written, never refused here.
//! The same wrapper and head as the strip, read with swc's JavaScript
//! parser.

use swc_common::BytePos;
use swc_ecma_parser::{EsSyntax, Parser, StringInput, Syntax};

/// Whether `head` parses as JavaScript import declarations (a module) and
/// `wrapped_body` as a JavaScript script, without an error of any kind.
pub(crate) fn is_javascript(head: &str, wrapped_body: &str) -> bool {
    (head.is_empty() || parses(head, true)) && parses(wrapped_body, false)
}

/// Whether `text` parses as a JavaScript module or script, cleanly.
fn parses(text: &str, module: bool) -> bool {
    let Ok(end) = u32::try_from(text.len()) else {
        return false;
    };
    let input = StringInput::new(text, BytePos(1), BytePos(1 + end));
    let mut parser = Parser::new(Syntax::Es(EsSyntax::default()), input, None);
    let parsed = if module {
        parser.parse_module().is_ok()
    } else {
        parser.parse_script().is_ok()
    };
    parsed && parser.take_errors().is_empty()
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
