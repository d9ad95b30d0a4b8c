//! How deep a program's source nests, measured before the parser sees it.
//!
//! Boa's parser recurses once per level of nesting with no bound of its own:
//! a program of 50,000 `[` or `(` or `!` overflows the host stack. This scan
//! is linear and recursion-free; it reads just enough of the lexical grammar
//! (strings, template literals, comments, regular expression literals) to
//! count brackets, `${`, and runs of prefix operators, and [`check`] refuses a
//! program deeper than [`MAX_SOURCE_DEPTH`] as a syntax error naming where.
//! Each level costs the parser tens of kilobytes of stack (about 17 KiB in the
//! page's wasm, 150 KiB in a debug build), so the bound and the stacks the
//! hosts give the parser (`kiln_sandbox::NATIVE_STACK_BYTES`, the workers'
//! `-zstack-size`) are chosen together.

/// How deep brackets, template substitutions and prefix operators may nest
/// in a program's source. Hand-written programs stay far below it.
pub const MAX_SOURCE_DEPTH: usize = 128;

/// Refuses `code` when it nests deeper than [`MAX_SOURCE_DEPTH`], naming the
/// line and column where it went past.
pub fn check(code: &str) -> Result<(), String> {
    match deepest(code, MAX_SOURCE_DEPTH) {
        None => Ok(()),
        Some(at) => {
            let before = &code[..at];
            let line = before.matches('\n').count() + 1;
            let column = before
                .rsplit('\n')
                .next()
                .unwrap_or_default()
                .chars()
                .count()
                + 1;
            Err(format!(
                "SyntaxError: the program nests deeper than {MAX_SOURCE_DEPTH} levels (brackets, \
                 template substitutions or prefix operators) at line {line}, column {column}; \
                 the parser stops there rather than overflow its stack"
            ))
        }
    }
}

/// What the scanner is inside, innermost last.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Open {
    /// `(`, `[` or `{` (and the `${` of a template, which `}` closes).
    Bracket,
    Template,
}

/// The byte offset at which `code` first nests deeper than `limit`, if it
/// does.
fn deepest(code: &str, limit: usize) -> Option<usize> {
    let bytes = code.as_bytes();
    let mut stack: Vec<Open> = Vec::new();
    // Consecutive prefix operators (`!!!x`, `- - -x`) count as nesting too.
    let mut prefix_run = 0;
    // Whether a `/` here would start a regular expression (no value before it).
    let mut regex_allowed = true;
    let mut at = 0;
    while at < bytes.len() {
        let byte = bytes[at];
        // Inside a template literal's text, only `${`, `\` and `` ` `` matter.
        if stack.last() == Some(&Open::Template) {
            match byte {
                b'\\' => at += 2,
                b'`' => {
                    stack.pop();
                    regex_allowed = false;
                    at += 1;
                }
                b'$' if bytes.get(at + 1) == Some(&b'{') => {
                    stack.push(Open::Bracket);
                    if stack.len() + prefix_run > limit {
                        return Some(at);
                    }
                    regex_allowed = true;
                    at += 2;
                }
                _ => at += 1,
            }
            continue;
        }
        match byte {
            b'(' | b'[' | b'{' => {
                stack.push(Open::Bracket);
                prefix_run = 0;
                regex_allowed = true;
            }
            b')' | b']' | b'}' => {
                // A stray closer is the parser's to report.
                if stack.last() == Some(&Open::Bracket) {
                    stack.pop();
                }
                prefix_run = 0;
                regex_allowed = byte == b'}';
            }
            b'`' => {
                stack.push(Open::Template);
                prefix_run = 0;
            }
            b'"' | b'\'' => {
                at = skip_string(bytes, at);
                prefix_run = 0;
                regex_allowed = false;
                continue;
            }
            b'/' if bytes.get(at + 1) == Some(&b'/') => {
                at = memchr::memchr(b'\n', &bytes[at..]).map_or(bytes.len(), |end| at + end);
                continue;
            }
            b'/' if bytes.get(at + 1) == Some(&b'*') => {
                at = memchr::memmem::find(&bytes[at + 2..], b"*/")
                    .map_or(bytes.len(), |end| at + end + 4);
                continue;
            }
            b'/' if regex_allowed => {
                at = skip_regex(bytes, at);
                prefix_run = 0;
                regex_allowed = false;
                continue;
            }
            b'!' | b'~' | b'+' | b'-' if regex_allowed => {
                prefix_run += 1;
            }
            b' ' | b'\t' | b'\n' | b'\r' => {}
            _ => {
                let word =
                    byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'$' || byte >= 0x80;
                if word {
                    let end = bytes[at..]
                        .iter()
                        .position(|b| {
                            !(b.is_ascii_alphanumeric() || *b == b'_' || *b == b'$' || *b >= 0x80)
                        })
                        .map_or(bytes.len(), |len| at + len);
                    // After a keyword that takes an operand, `/` starts a regular expression.
                    regex_allowed = matches!(
                        &code[at..end],
                        "return"
                            | "typeof"
                            | "instanceof"
                            | "in"
                            | "of"
                            | "new"
                            | "delete"
                            | "void"
                            | "throw"
                            | "case"
                            | "do"
                            | "else"
                            | "yield"
                            | "await"
                    );
                    if !matches!(&code[at..end], "typeof" | "void" | "delete" | "await") {
                        prefix_run = 0;
                    } else {
                        prefix_run += 1;
                    }
                    at = end;
                    if stack.len() + prefix_run > limit {
                        return Some(at);
                    }
                    continue;
                }
                prefix_run = 0;
                // An operator or punctuation: a value may not come before `/`.
                regex_allowed = true;
            }
        }
        if stack.len() + prefix_run > limit {
            return Some(at);
        }
        at += 1;
    }
    None
}

/// The offset just past the string literal opening at `start`.
fn skip_string(bytes: &[u8], start: usize) -> usize {
    let quote = bytes[start];
    let mut at = start + 1;
    while at < bytes.len() {
        match bytes[at] {
            b'\\' => at += 2,
            b'\n' => return at,
            byte if byte == quote => return at + 1,
            _ => at += 1,
        }
    }
    bytes.len()
}

/// The offset just past the regular expression literal opening at `start`
/// (its flags included).
fn skip_regex(bytes: &[u8], start: usize) -> usize {
    let mut at = start + 1;
    let mut in_class = false;
    while at < bytes.len() {
        match bytes[at] {
            b'\\' => at += 1,
            b'[' => in_class = true,
            b']' => in_class = false,
            b'\n' => return at,
            b'/' if !in_class => {
                at += 1;
                while at < bytes.len() && bytes[at].is_ascii_alphabetic() {
                    at += 1;
                }
                return at;
            }
            _ => {}
        }
        at += 1;
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    //! Deep sources refused by where they went past; ordinary ones, with the
    //! lexical corners that hide brackets, let through.

    use super::{MAX_SOURCE_DEPTH, check, deepest};

    #[test]
    fn each_kind_of_nesting_is_counted() {
        let deep = MAX_SOURCE_DEPTH + 1;
        let cases = [
            format!("return {}{}", "[".repeat(deep), "]".repeat(deep)),
            format!("return {}1{}", "(".repeat(deep), ")".repeat(deep)),
            format!("return {}1", "!".repeat(deep)),
            format!("return {}1", "- ".repeat(deep)),
            format!("return {}1", "typeof ".repeat(deep)),
            format!("return {}", "`${".repeat(deep)),
            "{".repeat(deep),
        ];
        for code in cases {
            let refused = check(&code).unwrap_err();
            assert!(
                refused.contains(&format!("nests deeper than {MAX_SOURCE_DEPTH} levels")),
                "{refused}"
            );
            assert!(refused.contains("line 1, column"), "{refused}");
        }
        assert!(
            check(&format!(
                "return {}{}",
                "[".repeat(MAX_SOURCE_DEPTH),
                "]".repeat(MAX_SOURCE_DEPTH)
            ))
            .is_ok()
        );
    }

    #[test]
    fn brackets_in_strings_comments_regexes_and_templates_do_not_count() {
        let opened = "(".repeat(10);
        let cases = [
            format!("const s = '{opened}'; const t = \"{opened}\";"),
            format!("// {opened}\n/* {opened} */ return 1"),
            format!("return /[(]{{2}}\\(/g.test('{opened}')"),
            format!("return `{opened} ${{ [1, 2].map((x) => x / 2) }} {opened}`"),
            "const a = 4 / 2 / (1); return a - -1 + +2 - !0".to_owned(),
        ];
        for code in cases {
            assert_eq!(deepest(&code, 5), None, "{code}");
        }
        assert_eq!(deepest("return [[[[1]]]]", 3), Some(10));
    }

    #[test]
    fn a_position_is_reported_on_its_own_line() {
        let code = format!(
            "const x = 1;\n  return {}",
            "[".repeat(MAX_SOURCE_DEPTH + 1)
        );
        let column = 9 + MAX_SOURCE_DEPTH + 1;
        assert!(
            check(&code)
                .unwrap_err()
                .contains(&format!("line 2, column {column}"))
        );
    }
}
