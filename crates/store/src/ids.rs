//! The one source of random ids: eight bytes from the platform's generator
//! (the OS natively, `crypto.getRandomValues` in the browser, both through
//! `getrandom`), for run ids, record ids and owner names alike.

use crate::clock::epoch_ms;

/// Eight random bytes. Without a generator (never on a platform Kiln runs
/// on), the clock's and the process's bits: still unique enough for one
/// store's ids, which also carry the time they were made.
#[must_use]
pub fn random_bytes() -> [u8; 8] {
    let mut bytes = [0_u8; 8];
    if getrandom::fill(&mut bytes).is_err() {
        let now = epoch_ms().to_le_bytes();
        #[cfg(not(target_arch = "wasm32"))]
        let salt = std::process::id().to_le_bytes();
        #[cfg(target_arch = "wasm32")]
        let salt = [0_u8; 4];
        bytes[..4].copy_from_slice(&now[..4]);
        bytes[4..].copy_from_slice(&salt);
    }
    bytes
}

/// A short random suffix (eight hex digits) for ids made in the same
/// millisecond.
#[must_use]
pub fn random_suffix() -> String {
    let bytes = random_bytes();
    format!(
        "{:02x}{:02x}{:02x}{:02x}",
        bytes[0], bytes[1], bytes[2], bytes[3]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffixes_are_eight_hex_digits_and_differ() {
        let made: std::collections::BTreeSet<String> = (0..64).map(|_| random_suffix()).collect();
        assert_eq!(made.len(), 64, "{made:?}");
        assert!(
            made.iter()
                .all(|suffix| suffix.len() == 8 && suffix.chars().all(|c| c.is_ascii_hexdigit()))
        );
    }
}
