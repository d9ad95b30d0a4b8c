//! Where a byte offset sits in a text, as the line and column a person
//! reads: both from 1, a column counting characters (Unicode scalar values,
//! as Boa's positions do), a line ended by any ECMAScript line terminator
//! (`\n`, `\r`, `\r\n` once, U+2028, U+2029).

/// A line and a column, both from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Position {
    pub(crate) line: usize,
    pub(crate) column: usize,
}

impl Position {
    /// Where `offset` (a byte offset, clamped to `text` and moved back to a
    /// character boundary) sits in `text`.
    pub(crate) fn of(text: &str, offset: usize) -> Self {
        let mut end = offset.min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let mut position = Position { line: 1, column: 1 };
        let mut after_carriage_return = false;
        for character in text[..end].chars() {
            match character {
                '\n' if after_carriage_return => {}
                '\n' | '\r' | '\u{2028}' | '\u{2029}' => {
                    position.line += 1;
                    position.column = 1;
                }
                _ => position.column += 1,
            }
            after_carriage_return = character == '\r';
        }
        position
    }
}

#[cfg(test)]
mod tests {
    use super::Position;

    #[test]
    fn lines_end_at_every_terminator_and_columns_count_characters() {
        let text = "ab\ncé\r\nx\ry\u{2028}😀z";
        let at = |needle: &str| Position::of(text, text.find(needle).unwrap_or(usize::MAX));
        assert_eq!(at("a"), Position { line: 1, column: 1 });
        assert_eq!(at("é"), Position { line: 2, column: 2 });
        assert_eq!(at("x"), Position { line: 3, column: 1 });
        assert_eq!(at("y"), Position { line: 4, column: 1 });
        assert_eq!(at("z"), Position { line: 5, column: 2 });
        assert_eq!(
            Position::of(text, text.len() + 10),
            Position { line: 5, column: 3 }
        );
    }
}
