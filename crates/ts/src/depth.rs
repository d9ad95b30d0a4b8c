//! How deep a program nests, bounded before swc's parser reads it: that
//! parser recurses once per level with no bound of its own (10,000 `(` or
//! `A<` overflow an 8 MiB stack), and a stack overflow aborts the worker.
//! Brackets, template substitutions and prefix operators are the
//! sandbox's own bound (`kiln_jscheck::source_depth`, 128 levels, so strip
//! refuses nothing the sandbox would run); type arguments (`A<B<C>>`) are
//! TypeScript's, and bounded here the same way.

use kiln_jscheck::source_depth::{self, MAX_SOURCE_DEPTH};

use crate::position::Position;

/// Refuses `source` when it nests deeper than [`MAX_SOURCE_DEPTH`] levels
/// of brackets (and the like) or of angle brackets, as a sentence naming
/// where.
pub(crate) fn check(source: &str) -> Result<(), String> {
    source_depth::check(source)?;
    match deepest_angles(source, MAX_SOURCE_DEPTH) {
        None => Ok(()),
        Some(at) => {
            let Position { line, column } = Position::of(source, at);
            Err(format!(
                "SyntaxError: the program nests type arguments (`A<B<…>>`) deeper than {MAX_SOURCE_DEPTH} levels \
                 at line {line}, column {column}; the parser stops there rather than overflow its stack"
            ))
        }
    }
}

/// The byte offset of the first `<` past `limit` unclosed ones. A `<` is
/// open until a `>` closes it, or until a closing bracket or a `;` ends
/// the run it could be in, so a comparison (`i < n`) is forgotten at the
/// end of its statement or parentheses. It over-counts (a `<` in a string
/// counts), which can only refuse a program with 128 of them in one run.
fn deepest_angles(source: &str, limit: usize) -> Option<usize> {
    let mut open = 0_usize;
    for (at, byte) in source.bytes().enumerate() {
        match byte {
            b'<' => {
                open += 1;
                if open > limit {
                    return Some(at);
                }
            }
            b'>' => open = open.saturating_sub(1),
            b')' | b']' | b'}' | b';' => open = 0,
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::{check, deepest_angles};

    #[test]
    fn type_arguments_nest_to_the_bound_and_comparisons_are_forgotten() {
        let at_bound = format!("let a: {}number{} = 1;", "A<".repeat(128), ">".repeat(128));
        assert_eq!(deepest_angles(&at_bound, 128), None);
        let past = format!("let a: {}number{} = 1;", "A<".repeat(129), ">".repeat(129));
        assert_eq!(deepest_angles(&past, 128), Some(7 + 2 * 128 + 1));
        let comparisons = "for (let i = 0; i < n; i++) { if (a < b) {} }\n".repeat(200);
        assert_eq!(deepest_angles(&comparisons, 128), None);
        let error = check(&format!("\n{past}")).err().unwrap_or_default();
        assert!(error.contains("at line 2, column 265;"), "{error}");
    }
}
