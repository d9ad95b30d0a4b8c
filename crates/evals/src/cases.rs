//! The suites' cases as data: `cases/*.json` in this crate, one file per
//! suite, each a JSON array of cases. The files are compiled in
//! (`include_str!`) and parsed when a suite asks for its cases, so a case
//! is edited in its file and the runners and scoring stay code. A file that
//! does not parse is an error naming the file and what serde found, never a
//! panic.

use serde::de::DeserializeOwned;

/// A case file that does not parse: the file, and serde's message (what is
/// wrong, at which line and column).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {message}")]
pub struct CasesError {
    /// The file, as `cases/codeact.json`.
    pub file: String,
    pub message: String,
}

/// The cases `text` holds (a JSON array of `T`), read as the file
/// `file_name`.
///
/// # Errors
///
/// `text` is not such an array: a field missing, unknown or of the wrong
/// type, or no JSON at all.
pub fn parse<T: DeserializeOwned>(file_name: &str, text: &str) -> Result<Vec<T>, CasesError> {
    serde_json::from_str(text).map_err(|error| CasesError {
        file: file_name.to_owned(),
        message: error.to_string(),
    })
}

/// A case `--cases` picks by its name.
pub trait Named {
    fn name(&self) -> &str;
}

/// The cases whose name matches `pattern` (`*` matches any run of characters).
#[must_use]
pub fn select<C: Named>(cases: Vec<C>, pattern: &str) -> Vec<C> {
    cases
        .into_iter()
        .filter(|case| wildcard(pattern, case.name()))
        .collect()
}

/// Whether `name` matches `pattern` (`*` matches any run of characters).
#[must_use]
pub fn wildcard(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    let [first, middle @ .., last] = parts.as_slice() else {
        return pattern == name;
    };
    if parts.len() == 1 {
        return pattern == name;
    }
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}
