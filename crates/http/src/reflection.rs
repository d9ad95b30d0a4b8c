//! Finding a secret that comes back in a form other than its own bytes.
//!
//! The exact scrub ([`scrub`]; `kiln_capabilities::SecretScope` for a run's
//! secrets) replaces a secret wherever its bytes appear. A server that reflects
//! what it was sent may answer it transformed — percent-encoded, as JSON `\u`
//! escapes, as HTML character references, upper-cased, as base64 or hex — and
//! the program could undo the transform. [`encoded_form`] recognises those
//! forms in what remains after the exact scrub; `http_request` then gives the
//! program none of the response, and an LLM provider's reply or error that
//! carries its own key that way is withheld. A transform nobody can list (a
//! server that encrypts what it reflects) cannot be recognised: a secret is for
//! an origin that does not reflect it.
//!
//! Here, beside `kiln-http`'s other pure module ([`crate::address`]), because
//! both the ladder (`http_request`) and the providers (their own key) check
//! what a server answered.

use base64::Engine as _;

/// `bytes` with every occurrence of `secret` replaced by `marker`; an empty
/// secret hides nothing and changes nothing.
#[must_use]
pub fn scrub(bytes: &[u8], secret: &[u8], marker: &[u8]) -> Vec<u8> {
    if secret.is_empty() || memchr::memmem::find(bytes, secret).is_none() {
        return bytes.to_vec();
    }
    let mut scrubbed = Vec::with_capacity(bytes.len());
    let mut rest = bytes;
    while let Some(at) = memchr::memmem::find(rest, secret) {
        scrubbed.extend_from_slice(&rest[..at]);
        scrubbed.extend_from_slice(marker);
        rest = &rest[at + secret.len()..];
    }
    scrubbed.extend_from_slice(rest);
    scrubbed
}
use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};

/// How a secret was found encoded, in words for the program's error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// The same letters in another case.
    Case,
    /// Behind percent-encoding, JSON or JavaScript escapes, or HTML character
    /// references (or several of them).
    Escaped,
    /// As base64 (standard or URL-safe), at any alignment.
    Base64,
    /// As hexadecimal digits.
    Hex,
}

impl Form {
    #[must_use]
    pub fn describe(self) -> &'static str {
        match self {
            Self::Case => "in another letter case",
            Self::Escaped => "behind percent-encoding, JSON escapes or HTML character references",
            Self::Base64 => "as base64",
            Self::Hex => "as hexadecimal",
        }
    }
}

/// Secrets shorter than this are not looked for as base64 or hex: a few
/// encoded characters appear by chance in any long text.
const MIN_ENCODED: usize = 6;

/// How many times escapes are undone: enough for an escape inside an escape
/// (`%255C` or `\u0025`), bounded so a hostile body costs a fixed number of
/// passes.
const DECODE_PASSES: usize = 3;

/// The form in which `haystack` carries `secret`, other than its own bytes
/// (which the exact scrub has already replaced); `None` when it does not.
#[must_use]
pub fn encoded_form(haystack: &[u8], secret: &[u8]) -> Option<Form> {
    if secret.is_empty() || haystack.is_empty() {
        return None;
    }
    let folded_secret = secret.to_ascii_lowercase();
    let folded = haystack.to_ascii_lowercase();
    if memchr::memmem::find(&folded, &folded_secret).is_some() {
        return Some(Form::Case);
    }
    let mut decoded = haystack.to_vec();
    for _ in 0..DECODE_PASSES {
        let next = unescape(&decoded);
        if next == decoded {
            break;
        }
        decoded = next;
    }
    let decoded_folded = decoded.to_ascii_lowercase();
    if memchr::memmem::find(&decoded_folded, &folded_secret).is_some() {
        return Some(Form::Escaped);
    }
    if secret.len() < MIN_ENCODED {
        return None;
    }
    let views = [haystack, decoded.as_slice()];
    if base64_cores(secret).iter().any(|core| {
        views
            .iter()
            .any(|view| memchr::memmem::find(view, core).is_some())
    }) {
        return Some(Form::Base64);
    }
    let hex: Vec<u8> = secret
        .iter()
        .flat_map(|byte| {
            let digits = b"0123456789abcdef";
            [
                digits[usize::from(byte >> 4)],
                digits[usize::from(byte & 15)],
            ]
        })
        .collect();
    [folded.as_slice(), decoded_folded.as_slice()]
        .iter()
        .any(|view| memchr::memmem::find(view, &hex).is_some())
        .then_some(Form::Hex)
}

/// The base64 characters that depend only on `secret`'s bytes, for each of the
/// three alignments it can have inside a longer encoded text, in both
/// alphabets.
fn base64_cores(secret: &[u8]) -> Vec<Vec<u8>> {
    let mut cores = Vec::new();
    for lead in 0..3 {
        let mut padded = vec![0; lead];
        padded.extend_from_slice(secret);
        // Character i holds bits 6i..6i+6; it depends only on the secret when
        // those bits lie inside it.
        let first = (8 * lead).div_ceil(6);
        let end = 8 * padded.len() / 6;
        for engine in [&STANDARD_NO_PAD, &URL_SAFE_NO_PAD] {
            let encoded = engine.encode(&padded).into_bytes();
            if first < end && end <= encoded.len() {
                cores.push(encoded[first..end].to_vec());
            }
        }
    }
    cores.dedup();
    cores
}

/// One pass undoing percent-encoding (`%HH`), JSON and JavaScript escapes
/// (`\uXXXX` with surrogate pairs, `\u{…}`, `\xHH`, `\/` and the one-letter
/// ones) and HTML character references (`&#NN;`, `&#xHH;`, the five named
/// ones). Anything that is not a complete escape is kept as it is.
fn unescape(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        let rest = &bytes[at..];
        let (decoded, used) = match rest[0] {
            b'%' => hex_byte(&rest[1..]).map_or((None, 1), |byte| (Some(vec![byte]), 3)),
            b'\\' => backslash(rest),
            b'&' => reference(rest),
            _ => (None, 1),
        };
        match decoded {
            Some(decoded) => out.extend_from_slice(&decoded),
            None => out.extend_from_slice(&rest[..used]),
        }
        at += used;
    }
    out
}

fn hex_digit(byte: u8) -> Option<u32> {
    char::from(byte).to_digit(16)
}

fn hex_byte(bytes: &[u8]) -> Option<u8> {
    let high = hex_digit(*bytes.first()?)?;
    let low = hex_digit(*bytes.get(1)?)?;
    u8::try_from(high * 16 + low).ok()
}

/// `count` hex digits at the start of `bytes`, as a number.
fn hex_number(bytes: &[u8], count: usize) -> Option<u32> {
    let digits = bytes.get(..count)?;
    digits
        .iter()
        .try_fold(0u32, |value, &byte| Some(value * 16 + hex_digit(byte)?))
}

fn utf8(code: u32) -> Option<Vec<u8>> {
    char::from_u32(code).map(|c| c.to_string().into_bytes())
}

/// An escape starting at a backslash: what it stands for and its length.
fn backslash(rest: &[u8]) -> (Option<Vec<u8>>, usize) {
    let Some(&kind) = rest.get(1) else {
        return (None, 1);
    };
    let simple = |byte: u8| (Some(vec![byte]), 2);
    match kind {
        b'u' if rest.get(2) == Some(&b'{') => {
            let digits = rest[3..]
                .iter()
                .take(7)
                .take_while(|b| b.is_ascii_hexdigit())
                .count();
            if digits > 0 && rest.get(3 + digits) == Some(&b'}') {
                let code = hex_number(&rest[3..], digits);
                return (code.and_then(utf8), 4 + digits);
            }
            (None, 1)
        }
        b'u' => {
            let Some(code) = hex_number(&rest[2..], 4) else {
                return (None, 1);
            };
            // A high surrogate followed by a low one is one character.
            if (0xD800..0xDC00).contains(&code)
                && rest.get(6..8) == Some(b"\\u")
                && let Some(low) = hex_number(&rest[8..], 4)
                && (0xDC00..0xE000).contains(&low)
            {
                let joined = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
                return (utf8(joined), 12);
            }
            (utf8(code), 6)
        }
        b'x' => hex_byte(&rest[2..]).map_or((None, 1), |byte| (utf8(u32::from(byte)), 4)),
        b'n' => simple(b'\n'),
        b't' => simple(b'\t'),
        b'r' => simple(b'\r'),
        b'b' => simple(8),
        b'f' => simple(12),
        b'/' | b'\\' | b'"' | b'\'' => simple(kind),
        _ => (None, 1),
    }
}

/// A character reference starting at `&`: what it stands for and its length.
fn reference(rest: &[u8]) -> (Option<Vec<u8>>, usize) {
    const NAMED: [(&[u8], u8); 5] = [
        (b"&amp;", b'&'),
        (b"&lt;", b'<'),
        (b"&gt;", b'>'),
        (b"&quot;", b'"'),
        (b"&apos;", b'\''),
    ];
    for (name, byte) in NAMED {
        if rest.len() >= name.len() && rest[..name.len()].eq_ignore_ascii_case(name) {
            return (Some(vec![byte]), name.len());
        }
    }
    if rest.get(1) != Some(&b'#') {
        return (None, 1);
    }
    let (hex, start) = match rest.get(2) {
        Some(b'x' | b'X') => (true, 3),
        _ => (false, 2),
    };
    let digits = rest[start..]
        .iter()
        .take(8)
        .take_while(|b| {
            if hex {
                b.is_ascii_hexdigit()
            } else {
                b.is_ascii_digit()
            }
        })
        .count();
    if digits == 0 || rest.get(start + digits) != Some(&b';') {
        return (None, 1);
    }
    let text = std::str::from_utf8(&rest[start..start + digits]).unwrap_or_default();
    let code = u32::from_str_radix(text, if hex { 16 } else { 10 }).ok();
    (code.and_then(utf8), start + digits + 1)
}

#[cfg(test)]
mod tests {
    //! The forms a reflecting server can give a secret, as a table.

    use super::{Form, encoded_form};

    const SECRET: &str = "sk-Live_0123/xyz";

    fn hex(text: &str) -> String {
        text.bytes().map(|b| format!("{b:02X}")).collect()
    }

    #[test]
    fn each_encoding_of_a_secret_is_recognised_and_plain_text_is_not() {
        use base64::Engine as _;
        use base64::engine::general_purpose::{STANDARD, URL_SAFE};
        let percent: String = SECRET.bytes().map(|b| format!("%{b:02x}")).collect();
        let json: String = SECRET
            .chars()
            .map(|c| format!("\\u{:04x}", c as u32))
            .collect();
        let html: String = SECRET.chars().map(|c| format!("&#{};", c as u32)).collect();
        let mixed = "sk-Live_0123%2Fxyz".replace('L', "\\u004c");
        let cases: Vec<(String, Option<Form>)> = vec![
            (format!("echo: {}", SECRET.to_uppercase()), Some(Form::Case)),
            (format!("q={percent}&x=1"), Some(Form::Escaped)),
            (format!("{{\"echo\": \"{json}\"}}"), Some(Form::Escaped)),
            (format!("<p>{html}</p>"), Some(Form::Escaped)),
            (mixed, Some(Form::Escaped)),
            // An escape of an escape.
            (percent.replace('%', "%25"), Some(Form::Escaped)),
            (STANDARD.encode(SECRET), Some(Form::Base64)),
            (STANDARD.encode(format!("a{SECRET}")), Some(Form::Base64)),
            (URL_SAFE.encode(format!("ab{SECRET}!")), Some(Form::Base64)),
            (format!("0x{}", hex(SECRET)), Some(Form::Hex)),
            (hex(SECRET).to_lowercase(), Some(Form::Hex)),
            // What is not the secret stays the program's.
            ("sk-Live_0123/xy".into(), None),
            ("a plain answer with % and \\ and &amp; in it".into(), None),
            (STANDARD.encode("sk-Live_0123/xyZ"), None),
            (String::new(), None),
        ];
        for (body, form) in cases {
            assert_eq!(
                encoded_form(body.as_bytes(), SECRET.as_bytes()),
                form,
                "{body}"
            );
        }
    }

    #[test]
    fn a_short_secret_is_not_looked_for_as_base64_or_hex() {
        assert_eq!(encoded_form(b"31323334", b"1234"), None);
        assert_eq!(encoded_form(b"%31%32%33%34", b"1234"), Some(Form::Escaped));
    }

    #[test]
    fn broken_escapes_are_kept_and_never_panic() {
        for body in [
            "%",
            "%4",
            "\\",
            "\\u12",
            "\\u{110000}",
            "&#",
            "&#x;",
            "&#99999999;",
            "\\ud800",
        ] {
            assert_eq!(
                encoded_form(body.as_bytes(), SECRET.as_bytes()),
                None,
                "{body}"
            );
        }
    }
}
