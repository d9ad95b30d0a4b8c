//! Text from a model, a tool or a program as the CLI may print it for a
//! person: [`escaped`] writes every character a terminal would act on
//! instead of showing visibly, so nothing a model says, a program logs or a
//! server answers can retitle the terminal, erase a line or draw a prompt
//! beside the real one.
//!
//! What acts is decided in one place, [`kiln_types::permission::card_text`]
//! (the approval cards' form, which also escapes line breaks so nothing can
//! draw a line of a card): every control character — C0, DEL and C1 (such as
//! U+009B, a terminal's command introducer) — and every bidirectional mark,
//! embedding, override and isolate. Prose keeps its line breaks and tabs.
//! Each character is judged alone, so text printed in pieces as it streams is
//! escaped piece by piece to the same effect: an escape sequence cut across
//! two pieces is still shown, not run.
//!
//! `--json` output is not passed through here: it is JSON, for programs.

use kiln_types::permission::card_text;

/// `text` for a terminal: what [`card_text`] escapes, except `\n` and `\t`.
#[must_use]
pub(crate) fn escaped(text: &str) -> String {
    let mut shown = String::with_capacity(text.len());
    for piece in text.split_inclusive(['\n', '\t']) {
        match piece.strip_suffix(['\n', '\t']) {
            Some(body) => {
                shown.push_str(&card_text(body));
                // The layout character `split_inclusive` kept.
                shown.push_str(&piece[body.len()..]);
            }
            None => shown.push_str(&card_text(piece)),
        }
    }
    shown
}

/// A program's progress report as the CLI prints it on stderr:
/// `kiln: node `a` 42% · reading rows` (the message escaped like a card's,
/// line breaks too, so it stays one line).
#[must_use]
pub(crate) fn progress_line(node: Option<&str>, progress: &kiln_types::Progress) -> String {
    let mut line = String::from("kiln: ");
    if let Some(node) = node {
        line.push_str(&format!("node `{}` ", card_text(node)));
    }
    line.push_str(&format!("{:.0}%", progress.percent));
    if let Some(message) = &progress.message {
        line.push_str(" · ");
        line.push_str(&card_text(message));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_progress_line_is_one_line_with_what_acts_shown() {
        let progress = kiln_types::Progress {
            percent: 41.6,
            message: Some("rows\n\u{1b}[2Jdone".into()),
        };
        let line = progress_line(Some("parse"), &progress);
        assert!(line.starts_with("kiln: node `parse` 42% · rows"), "{line}");
        assert!(!line.contains('\n') && !line.contains('\u{1b}'), "{line}");
        assert_eq!(
            progress_line(
                None,
                &kiln_types::Progress {
                    percent: 100.0,
                    message: None
                }
            ),
            "kiln: 100%"
        );
    }

    /// A character a terminal acts on rather than shows (a line break and a
    /// tab are layout).
    fn acts(character: char) -> bool {
        (character.is_control() && !matches!(character, '\n' | '\t'))
            || matches!(
                character,
                '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
            )
    }

    #[test]
    fn what_a_terminal_acts_on_is_shown_and_prose_keeps_its_layout() {
        for (text, shown) in [
            ("plain words", "plain words"),
            ("two\nlines\tand a tab\n", "two\nlines\tand a tab\n"),
            ("\u{1b}]0;pwned\u{7}", "\\u{001B}]0;pwned\\u{0007}"),
            ("\u{1b}[2Kgone", "\\u{001B}[2Kgone"),
            ("\u{9b}31m", "\\u{009B}31m"),
            ("back\rover", "back\\u{000D}over"),
            ("\u{7f}\u{0}", "\\u{007F}\\u{0000}"),
            (
                "\u{202a}\u{202e}\u{2066}\u{2069}\u{200e}\u{200f}\u{61c}",
                "\\u{202A}\\u{202E}\\u{2066}\\u{2069}\\u{200E}\\u{200F}\\u{061C}",
            ),
            ("é ü 日本 ✓", "é ü 日本 ✓"),
            ("", ""),
        ] {
            assert_eq!(escaped(text), shown, "{text:?}");
        }
    }

    #[test]
    fn nothing_that_acts_survives_even_when_printed_in_pieces() {
        let hostile = "say \u{1b}]0;title\u{7}\n\u{1b}[2K\t\u{9b}31m \u{202e}evil\u{2067}\u{85}";
        // Every way of cutting it in two, as deltas arrive.
        for (at, _) in hostile.char_indices() {
            let (head, tail) = hostile.split_at(at);
            let printed = escaped(head) + &escaped(tail);
            assert_eq!(printed, escaped(hostile), "cut at {at}");
            assert!(!printed.chars().any(acts), "{printed:?}");
            assert_eq!(printed.matches('\n').count(), 1, "{printed:?}");
            assert_eq!(printed.matches('\t').count(), 1, "{printed:?}");
        }
    }
}
