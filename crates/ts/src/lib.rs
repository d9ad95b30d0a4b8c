//! A program written in TypeScript, run as JavaScript: [`strip`] replaces
//! its types with white space, so every character left keeps its line and
//! column and an error the engine reports points at the source the model
//! wrote. There is no type checking: `const n: number = "a"` runs.
//!
//! The stripping is `swc_ts_fast_strip`'s (what Node.js's type stripping,
//! amaro, is built on), in its strip-only mode: TypeScript that would make
//! JavaScript of its own (`enum`, a `namespace` with values, parameter
//! properties) is refused by name, never rewritten. A program is the body of
//! an async function, which swc cannot parse as such, so `strip` parses its
//! opening import declarations apart, as a module, and its body inside the
//! sandbox's own wrapper, placed on the body's first line so no line moves.
//!
//! Modules: `depth` bounds nesting before any parse, `outline` finds the
//! opening imports and the type-only exports (one parse as a module), `pass`
//! is one run of swc's stripper with its output lined up character for
//! character, `plain` tells whether a program swc's TypeScript parser
//! refused is JavaScript all the same, and `position` turns a byte offset
//! into the line and column a person reads.
//!
//! **Architecture invariant:** valid JavaScript is never altered: `strip`
//! answers `Ok(None)` whenever nothing was removed, so the caller runs the
//! source it was given.

mod depth;
mod outline;
mod pass;
mod plain;
mod position;

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};

use outline::Outline;
use pass::{Diagnostic, Failure, Goal};
use position::Position;

/// The longest source [`strip`] reads, in characters: parsing is linear, and
/// this bounds its time and memory on any input.
pub const MAX_SOURCE_CHARS: usize = 1_000_000;

/// How the body is wrapped for its parse: the sandbox's own wrapper, so
/// what parses here parses there. The opening stays on the body's first
/// line, and the closing starts a line of its own, so that a `//` comment
/// on the body's last line does not swallow it.
const OPEN: &str = "(async function () {";
const CLOSE: &str = "\n})";

/// `source` with its TypeScript types replaced by white space, so every
/// remaining character keeps its line and column; `Ok(None)` when the source
/// has no TypeScript syntax (plain JavaScript is left alone, never
/// re-printed).
///
/// `source` is a program: the body of an async function (top-level `await`
/// and `return` allowed), opened by any number of `import` declarations,
/// which are kept as written (less any `type` in them).
///
/// # Errors
///
/// A [`StripError`] naming what is wrong and where: a source over
/// [`MAX_SOURCE_CHARS`], syntax that is neither TypeScript nor JavaScript,
/// or TypeScript that cannot be stripped because it makes code of its own.
pub fn strip(source: &str) -> Result<Option<String>, StripError> {
    let chars = source.chars().count();
    if chars > MAX_SOURCE_CHARS {
        return Err(StripError::TooLong { chars });
    }
    depth::check(source).map_err(|message| StripError::TooDeep { message })?;
    // swc's stripper asserts on spans it does not expect rather than
    // returning an error. Natively such a panic is this program's error, not
    // the host's crash; in the browser's wasm, where a panic aborts, the
    // tests over hostile programs are what keep it from happening.
    let stripped =
        catch_unwind(AssertUnwindSafe(|| strip_program(source))).unwrap_or_else(|_| {
            Err(StripError::Internal {
                message: "the parser panicked".to_owned(),
            })
        })?;
    Ok((stripped != source).then_some(stripped))
}

/// [`strip`] after its bound: the head and the body stripped apart, joined.
fn strip_program(source: &str) -> Result<String, StripError> {
    let outline = outline::read(source);
    let head = &source[..outline.imports_end];
    let body = body_text(source, &outline);
    let wrapped = format!("{OPEN}{body}{CLOSE}");
    let stripped = if head.is_empty() {
        Ok(String::new())
    } else {
        pass::run(head, Goal::Module).map_err(|failure| error_at(head, 0, failure))
    }
    .and_then(|head_stripped| {
        let body_stripped = pass::run(&wrapped, Goal::Script)
            .map_err(|failure| error_at(&body, OPEN.len(), failure))?;
        Ok((head_stripped, body_stripped))
    });
    let (head_stripped, body_stripped) = match stripped {
        Ok(both) => both,
        // JavaScript that TypeScript does not parse runs as written.
        Err(StripError::Syntax { .. })
            if plain::is_javascript(head, &javascript_body(source, &outline)) =>
        {
            return Ok(source.to_owned());
        }
        Err(error) => return Err(error),
    };
    let unwrapped = body_stripped
        .strip_prefix(OPEN)
        .and_then(|rest| rest.strip_suffix(CLOSE))
        .ok_or_else(|| StripError::Internal {
            message: "the stripper changed the wrapper around the body".to_owned(),
        })?;
    // The body's first characters are the head, blanked: skip as many.
    let head_chars = head.chars().count();
    let rest = unwrapped
        .char_indices()
        .nth(head_chars)
        .map_or("", |(at, _)| &unwrapped[at..]);
    Ok(head_stripped + rest)
}

/// The body as JavaScript reads it: the opening imports blanked, wrapped.
fn javascript_body(source: &str, outline: &Outline) -> String {
    let imports_only = Outline {
        imports_end: outline.imports_end,
        exports: Vec::new(),
    };
    format!("{OPEN}{}{CLOSE}", body_text(source, &imports_only))
}

/// What the body's parse reads: `source` with its opening imports and the
/// `export` of its type-only exports blanked, character for character, so
/// each line and column of `source` is the same here.
fn body_text(source: &str, outline: &Outline) -> String {
    let mut text = String::with_capacity(source.len());
    let mut exports = outline.exports.iter().peekable();
    for (at, character) in source.char_indices() {
        while exports.next_if(|blank| blank.end <= at).is_some() {}
        let blank = exports.peek().filter(|blank| blank.start <= at);
        if at < outline.imports_end || blank.is_some() {
            text.push(match character {
                '\n' | '\r' | '\u{2028}' | '\u{2029}' => character,
                _ if blank.is_some_and(|blank| blank.semicolon && blank.start == at) => ';',
                _ => ' ',
            });
        } else {
            text.push(character);
        }
    }
    text
}

/// A pass's failure as the program's error. `text` is what the pass read
/// after `shift` bytes of wrapper on its first line (the head, or the body
/// text), each of its lines and columns the program's.
fn error_at(text: &str, shift: usize, failure: Failure) -> StripError {
    let (offset, message) = match failure {
        Failure::Refused(Diagnostic { offset, message }) => (offset, message),
        Failure::Internal(message) => return StripError::Internal { message },
    };
    let Position { line, column } = Position::of(text, offset.saturating_sub(shift));
    match Unsupported::from_message(&message) {
        Some(feature) => StripError::Unsupported {
            feature,
            line,
            column,
        },
        None => StripError::Syntax {
            message,
            line,
            column,
        },
    }
}

/// What a run does with a program the engine would not parse:
/// `Ok(Some(javascript))` when it is TypeScript, `Ok(None)` when it is not
/// (the engine's own syntax error stands, with its own words and position),
/// `Err(sentence)` with the hint for TypeScript that cannot run as
/// JavaScript (an `enum`), which replaces that error, and `Err(sentence)` for
/// a syntax error in a TypeScript program: one that TypeScript's parser
/// finds later than JavaScript's, whose first complaint is the program's
/// first annotation, not its mistake.
///
/// # Errors
///
/// The sentence, for TypeScript that makes JavaScript of its own, or for
/// TypeScript with a syntax error past its first annotation.
pub fn javascript_of(source: &str) -> Result<Option<String>, String> {
    match strip(source) {
        Ok(stripped) => Ok(stripped),
        Err(error @ StripError::Unsupported { .. }) => Err(error.with_hint().to_string()),
        Err(error @ StripError::Syntax { line, column, .. })
            if javascript_fails_before(source, Position { line, column }) =>
        {
            Err(error.to_string())
        }
        Err(_) => Ok(None),
    }
}

/// Whether JavaScript's parser fails on `source` before `at`, where
/// TypeScript's did: then the program is TypeScript up to there.
fn javascript_fails_before(source: &str, at: Position) -> bool {
    let outline = outline::read(source);
    let head = &source[..outline.imports_end];
    let body = javascript_body(source, &outline);
    let failed = match plain::first_refusal(head, &body) {
        Some(plain::Refusal::Head(offset)) => Position::of(head, offset),
        Some(plain::Refusal::Body(offset)) => {
            let text = &body[OPEN.len()..body.len() - CLOSE.len()];
            Position::of(text, offset.saturating_sub(OPEN.len()))
        }
        None => return false,
    };
    (failed.line, failed.column) < (at.line, at.column)
}

/// Why a program could not be stripped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StripError {
    /// The source is over [`MAX_SOURCE_CHARS`].
    #[error(
        "the program is {chars} characters long, over the {MAX_SOURCE_CHARS} a TypeScript program may have"
    )]
    TooLong { chars: usize },
    /// The source nests deeper than the parser may recurse (the sentence
    /// names the bound and where).
    #[error("{message}")]
    TooDeep { message: String },
    /// Neither TypeScript nor JavaScript: what the parser said, where.
    #[error("SyntaxError: {message} at line {line}, column {column}")]
    Syntax {
        message: String,
        line: usize,
        column: usize,
    },
    /// TypeScript that makes JavaScript of its own, so blanking it would
    /// change what the program does.
    #[error(
        "TypeScript's {feature} at line {line}, column {column} cannot be stripped: it makes JavaScript of its own"
    )]
    Unsupported {
        feature: Unsupported,
        line: usize,
        column: usize,
    },
    /// The stripper failed on its own account (a fault to report, not the
    /// program's).
    #[error("the TypeScript stripper failed: {message}")]
    Internal { message: String },
}

impl StripError {
    /// What to write instead, when there is a plain way.
    #[must_use]
    pub fn hint(&self) -> Option<&'static str> {
        match self {
            StripError::TooLong { .. } => Some("split the work into smaller programs"),
            StripError::Unsupported { feature, .. } => Some(feature.hint()),
            StripError::TooDeep { .. } => Some("nest less: name the inner parts"),
            StripError::Syntax { .. } | StripError::Internal { .. } => None,
        }
    }

    /// The message, then the hint on its own `hint: ` line: the error as one
    /// text, for the edge that shows it to a person or a model.
    #[must_use]
    pub fn with_hint(&self) -> WithHint<'_> {
        WithHint(self)
    }
}

/// A [`StripError`] shown with its hint ([`StripError::with_hint`]).
#[derive(Debug, Clone, Copy)]
pub struct WithHint<'a>(&'a StripError);

impl fmt::Display for WithHint<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        match self.0.hint() {
            Some(hint) => write!(f, "\nhint: {hint}"),
            None => Ok(()),
        }
    }
}

/// TypeScript that strip-only mode refuses, each named as the stripper
/// names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unsupported {
    /// `enum Color { Red }`: makes an object.
    Enum,
    /// `namespace N { export const x = 1 }`: makes an object (a namespace of
    /// types only is stripped).
    Namespace,
    /// `constructor(private x: number)`: assigns a field.
    ParameterProperty,
    /// `import x = require("m")` or `import x = N.y`: makes a binding.
    ImportEquals,
    /// `export = x`.
    ExportAssignment,
    /// `<T>value`: a type assertion in angle brackets, which swc does not
    /// strip (it reads like JSX).
    AngleBracketAssertion,
    /// `-x ** 2` whose unary or `await` side only parses once its type is
    /// gone: ambiguous without parentheses.
    UnparenthesizedExponent,
}

impl Unsupported {
    /// The feature, from the stripper's message.
    fn from_message(message: &str) -> Option<Self> {
        [
            ("enum is not supported", Self::Enum),
            ("namespace declaration is not supported", Self::Namespace),
            ("`module` keyword is not supported", Self::Namespace),
            (
                "parameter property is not supported",
                Self::ParameterProperty,
            ),
            (
                "import equals declaration is not supported",
                Self::ImportEquals,
            ),
            ("export assignment is not supported", Self::ExportAssignment),
            (
                "angle-bracket syntax for type assertions",
                Self::AngleBracketAssertion,
            ),
            ("left-hand side of `**`", Self::UnparenthesizedExponent),
        ]
        .into_iter()
        .find_map(|(words, feature)| message.contains(words).then_some(feature))
    }

    /// What to write instead, in plain JavaScript.
    fn hint(self) -> &'static str {
        match self {
            Self::Enum => {
                "write plain JavaScript instead: an object of constants, `const Color = { Red: \"Red\", Green: \"Green\" };`"
            }
            Self::Namespace => {
                "write plain JavaScript instead: the namespace's functions and constants at the top level, or an object of them"
            }
            Self::ParameterProperty => {
                "write plain JavaScript instead: take the parameter plainly and assign it in the constructor, `this.x = x;`"
            }
            Self::ImportEquals => {
                "write plain JavaScript instead: `import { name } from \"kiln:…\";` at the top, or a `const`"
            }
            Self::ExportAssignment => "a program exports nothing: remove the `export =`",
            Self::AngleBracketAssertion => "write `value as T` instead of `<T>value`",
            Self::UnparenthesizedExponent => "put the left-hand side of `**` in parentheses",
        }
    }
}

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Enum => "`enum`",
            Self::Namespace => "`namespace` with values",
            Self::ParameterProperty => "parameter property",
            Self::ImportEquals => "`import … =`",
            Self::ExportAssignment => "`export =`",
            Self::AngleBracketAssertion => "`<T>value` type assertion",
            Self::UnparenthesizedExponent => "unparenthesized `**` operand",
        })
    }
}
