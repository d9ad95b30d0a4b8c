//! The secrets of `kiln mcp serve`: the server's key, drawn from the operating
//! system at start and never leaving the process, under which it names what
//! must not be guessed (a keyed run's key over HTTP, an HTTP session's id) by
//! HMAC-SHA256; and the HTTP transport's access token, compared in time that
//! does not depend on where a guess differs.

use hmac::{Hmac, Mac};
use sha2::{Digest as _, Sha256};

/// The shortest and longest access token `--token` takes, in characters.
const TOKEN_CHARS: std::ops::RangeInclusive<usize> = 16..=256;

/// Why a secret could not be had.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SecretError {
    #[error("could not draw a random secret from the operating system: {0}")]
    Random(getrandom::Error),
    #[error(
        "--token: an access token is 16 to 256 characters of letters, digits and `-._~+/=` (a bearer token's); {0}"
    )]
    Token(String),
}

/// 32 bytes from the operating system's generator.
fn random() -> Result<[u8; 32], SecretError> {
    let mut bytes = [0_u8; 32];
    getrandom::fill(&mut bytes).map_err(SecretError::Random)?;
    Ok(bytes)
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut text, byte| {
        let _ = write!(text, "{byte:02x}");
        text
    })
}

/// HMAC-SHA256 (RFC 2104) of `message` under `key`, by the `hmac` crate.
fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    // HMAC takes a key of any length (a longer one is hashed first): this never fails.
    let Ok(mut mac) = <Hmac<Sha256> as Mac>::new_from_slice(key) else {
        unreachable!("HMAC takes keys of every length")
    };
    mac.update(message);
    mac.finalize().into_bytes().into()
}

/// The server's key: 32 random bytes, drawn at start.
pub(crate) struct ServerKey([u8; 32]);

impl ServerKey {
    /// Draws a new key.
    ///
    /// # Errors
    ///
    /// When the operating system gives no randomness: the server does not start.
    pub(crate) fn draw() -> Result<Self, SecretError> {
        random().map(Self)
    }

    /// The key a keyed call of `agent` in `session` with the client's `key`
    /// runs under: a MAC of the three under this server's key, so that the
    /// run's id names one principal's run and nobody without the key can
    /// compute it (the id is a hash of the key a run runs under).
    pub(crate) fn bound_key(&self, session: &str, agent: &str, key: &str) -> String {
        let mut message = Vec::with_capacity(session.len() + agent.len() + key.len() + 16);
        // Each field's length first, so no two triples read the same.
        for field in [session, agent, key] {
            message.extend_from_slice(&(field.len() as u64).to_be_bytes());
            message.extend_from_slice(field.as_bytes());
        }
        format!("bound:{}", hex(&hmac_sha256(&self.0, &message)))
    }

    /// HTTP session number `n`'s id: 32 hex digits, different for every `n`
    /// and unguessable without the key.
    pub(crate) fn session_id(&self, n: u64) -> String {
        let mut message = b"session:".to_vec();
        message.extend_from_slice(&n.to_be_bytes());
        hex(&hmac_sha256(&self.0, &message)[..16])
    }
}

/// `kiln mcp serve --http`'s access token: every request carries it as
/// `Authorization: Bearer TOKEN`.
pub(crate) struct AccessToken(kiln_types::Redacted);

impl AccessToken {
    /// A new token: 64 hex digits (32 random bytes).
    ///
    /// # Errors
    ///
    /// When the operating system gives no randomness.
    pub(crate) fn draw() -> Result<Self, SecretError> {
        Ok(Self(kiln_types::Redacted::new(hex(&random()?))))
    }

    /// The token given by `--token` or `KILN_MCP_TOKEN`.
    ///
    /// # Errors
    ///
    /// A token too short or too long to be one, or with a character a
    /// bearer token does not have (named by its place, not shown).
    pub(crate) fn given(token: &str) -> Result<Self, SecretError> {
        let chars = token.chars().count();
        if !TOKEN_CHARS.contains(&chars) {
            return Err(SecretError::Token(format!(
                "this one is {chars} characters"
            )));
        }
        if let Some(at) = token
            .chars()
            .position(|c| !(c.is_ascii_alphanumeric() || "-._~+/=".contains(c)))
        {
            return Err(SecretError::Token(format!(
                "character {} is not one of them",
                at + 1
            )));
        }
        Ok(Self(kiln_types::Redacted::new(token)))
    }

    /// The token itself, for the one line that prints a drawn token.
    pub(crate) fn expose(&self) -> &str {
        self.0.expose()
    }

    /// Whether `offered` is this token. Both are hashed first, so the
    /// comparison's time says nothing about how much of a guess was right,
    /// nor about the token's length.
    pub(crate) fn admits(&self, offered: &str) -> bool {
        let ours = Sha256::digest(self.0.expose().as_bytes());
        let theirs = Sha256::digest(offered.as_bytes());
        let differ = ours
            .iter()
            .zip(theirs.iter())
            .fold(0_u8, |differ, (a, b)| differ | (a ^ b));
        std::hint::black_box(differ) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_sha256_gives_rfc_4231s_answers() {
        // RFC 4231, test cases 1, 2 and 6 (a key longer than a block).
        let cases: [(&[u8], &[u8], &str); 3] = [
            (
                &[0x0b; 20],
                b"Hi There",
                "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7",
            ),
            (
                b"Jefe",
                b"what do ya want for nothing?",
                "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
            ),
            (
                &[0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First",
                "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
            ),
        ];
        for (key, message, expected) in cases {
            assert_eq!(hex(&hmac_sha256(key, message)), expected);
        }
    }

    #[test]
    fn a_bound_key_names_one_principal_under_one_server() {
        let key = ServerKey([7; 32]);
        let bound = key.bound_key("s1", "agent", "k");
        assert!(
            bound.starts_with("bound:") && bound.len() == 6 + 64,
            "{bound}"
        );
        assert_eq!(bound, key.bound_key("s1", "agent", "k"), "a retry");
        for (session, agent, k) in [
            ("s2", "agent", "k"),
            ("s1", "other", "k"),
            ("s1", "agent", "k2"),
            // The fields' edges count: no two triples read the same.
            ("s1a", "gent", "k"),
        ] {
            assert_ne!(bound, key.bound_key(session, agent, k));
        }
        assert_ne!(bound, ServerKey([8; 32]).bound_key("s1", "agent", "k"));
        assert_ne!(key.session_id(1), key.session_id(2));
        assert_eq!(key.session_id(1).len(), 32);
    }

    #[test]
    fn a_token_admits_itself_only() {
        let token = AccessToken::draw().unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(token.expose().len(), 64);
        assert!(token.admits(token.expose()));
        for other in [
            "",
            "x",
            &token.expose()[..63],
            &format!("{}0", token.expose()),
        ] {
            assert!(!token.admits(other), "{other}");
        }
        assert_eq!(format!("{:?}", token.0), "<redacted>");
        let given =
            AccessToken::given("abcdefghijklmnop").unwrap_or_else(|error| panic!("{error}"));
        assert!(given.admits("abcdefghijklmnop"));
        for (bad, why) in [
            ("short", "this one is 5 characters"),
            ("abcdefghijklmnop qrs", "character 17 is not one of them"),
        ] {
            let error = AccessToken::given(bad).err().map(|error| error.to_string());
            assert!(
                error.as_deref().is_some_and(|error| error.ends_with(why)),
                "{error:?}"
            );
        }
    }
}
