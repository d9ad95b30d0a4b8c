//! One run of swc's stripper (`swc_ts_fast_strip`, strip-only mode) over a
//! text: the text with its types blanked, one character for each character
//! of the text, or the diagnostics it gave, each at a byte offset of the text.

use std::cell::RefCell;
use std::rc::Rc;

use swc_common::errors::{DiagnosticBuilder, Emitter, Handler};
use swc_common::sync::Lrc;
use swc_common::{GLOBALS, Globals, SourceMap};
use swc_ecma_parser::TsSyntax;
use swc_ts_fast_strip::{Mode, Options, operate};

/// How the text is parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Goal {
    /// As a module: the import declarations that open a program.
    Module,
    /// As a script (sloppy, as the sandbox runs a program): the body,
    /// wrapped in an async function.
    Script,
}

/// What swc said was wrong, at a byte offset of the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Diagnostic {
    pub(crate) offset: usize,
    pub(crate) message: String,
}

/// Why a pass gave no text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Failure {
    /// swc refused the text, saying why and where (the first it said).
    Refused(Diagnostic),
    /// swc failed without saying where, or answered a text that does not
    /// line up with its input: a fault of the stripper, not of the program.
    Internal(String),
}

/// `text` with its TypeScript blanked: the same number of characters, each
/// the character of `text` at that place or, where swc removed something,
/// a space or the one character swc put there (`;`, `(` or `)`, which keep
/// the JavaScript that is left parsing as it did).
pub(crate) fn run(text: &str, goal: Goal) -> Result<String, Failure> {
    let diagnostics = Rc::new(RefCell::new(Vec::new()));
    let source_map: Lrc<SourceMap> = Lrc::default();
    let handler = Handler::with_emitter(false, false, Box::new(Collect(Rc::clone(&diagnostics))));
    let options = Options {
        module: Some(goal == Goal::Module),
        parser: TsSyntax::default(),
        mode: Mode::StripOnly,
        ..Options::default()
    };
    let answer = GLOBALS.set(&Globals::new(), || {
        operate(&source_map, &handler, text.to_owned(), options)
    });
    // swc's positions count from where the source map placed the text.
    let start = source_map
        .files()
        .first()
        .map_or(0, |file| file.start_pos.0 as usize);
    match answer {
        Ok(output) => realign(text, &output.code).ok_or_else(|| {
            Failure::Internal("its output does not line up with the program".to_owned())
        }),
        Err(error) => {
            let first = diagnostics.borrow().first().cloned();
            Err(match first {
                Some((at, message)) => Failure::Refused(Diagnostic {
                    offset: at.saturating_sub(start),
                    message,
                }),
                None => Failure::Internal(error.message),
            })
        }
    }
}

/// Keeps each diagnostic's primary position (a global byte position) and
/// message.
struct Collect(Rc<RefCell<Vec<(usize, String)>>>);

impl Emitter for Collect {
    fn emit(&mut self, diagnostic: &mut DiagnosticBuilder<'_>) {
        let at = diagnostic
            .span
            .primary_span()
            .map_or(0, |span| span.lo.0 as usize);
        self.0.borrow_mut().push((at, diagnostic.message()));
    }
}

/// swc keeps UTF-16 offsets: a blanked character becomes as many spaces as
/// it has UTF-16 units, so an astral character (an emoji in a type's string)
/// becomes two. Boa counts columns in characters, so each character of
/// `input` gets exactly one here: itself when swc kept it, else the first
/// character swc put in its place that is not white space, else a space.
/// `None` when `output` does not line up with `input` unit for unit.
fn realign(input: &str, output: &str) -> Option<String> {
    let mut produced = output.chars();
    let mut aligned = String::with_capacity(input.len());
    for character in input.chars() {
        let first = produced.next()?;
        if first == character {
            aligned.push(character);
            continue;
        }
        let mut units = first.len_utf16();
        let mut shown = (!is_white_space(first)).then_some(first);
        while units < character.len_utf16() {
            let next = produced.next()?;
            units += next.len_utf16();
            shown = shown.or((!is_white_space(next)).then_some(next));
        }
        if units != character.len_utf16() {
            return None;
        }
        aligned.push(shown.unwrap_or(' '));
    }
    produced.next().is_none().then_some(aligned)
}

/// ECMAScript's white space and line terminators.
fn is_white_space(character: char) -> bool {
    matches!(
        character,
        '\u{0009}'..='\u{000D}'
            | '\u{0020}'
            | '\u{00A0}'
            | '\u{1680}'
            | '\u{2000}'..='\u{200A}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{202F}'
            | '\u{205F}'
            | '\u{3000}'
            | '\u{FEFF}'
    )
}

#[cfg(test)]
mod tests {
    use super::{Failure, Goal, realign, run};

    #[test]
    fn an_astral_character_blanked_becomes_one_space() {
        assert_eq!(
            run("let a: \"😀\" = 1; a", Goal::Script),
            Ok("let a      = 1; a".to_owned())
        );
        assert_eq!(realign("é😀x", "   x"), Some("  x".to_owned()));
        assert_eq!(realign("ab", "a"), None);
        assert_eq!(realign("a", "ab"), None);
        assert_eq!(realign("😀", "(  "), None);
    }

    #[test]
    fn a_refusal_names_where_in_the_text() {
        let Err(Failure::Refused(diagnostic)) = run("let a = ;", Goal::Script) else {
            panic!("not refused");
        };
        assert_eq!(diagnostic.offset, 8, "{diagnostic:?}");
    }
}
