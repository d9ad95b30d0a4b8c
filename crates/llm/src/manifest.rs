//! The manifest the build writes beside the model's files, and the checks
//! every host makes of it and of each file before the model loads (the
//! browser's model worker on a download or a cached copy, the native host on
//! a folder): the names are plain file names inside the model's folder, the
//! sizes are within what a model of Kiln's may be, and a file is the size and
//! has the SHA-256 its entry says. Each host reads and digests the bytes its
//! own way; the rules and their words are here, once.

use crate::LlmError;

/// The manifest's file name, beside the weights and the tokenizer.
pub const MANIFEST_FILE: &str = "manifest.json";

/// The most bytes a manifest may have (the build's is some 400): a host reads
/// no further.
pub const MAX_MANIFEST_BYTES: u64 = 64 * 1024;

/// The most bytes the weights may have (the site's are 145 MB): what one
/// browser array holds, and bounds what loading allocates.
pub const MAX_WEIGHTS_BYTES: u64 = 1 << 31;

/// The most bytes the tokenizer may have (the site's is 1.4 MB): it is parsed
/// as JSON whole.
pub const MAX_TOKENIZER_BYTES: u64 = 64 << 20;

/// The longest file name a manifest may give.
const MAX_NAME_BYTES: usize = 255;

/// What `kiln-model-prepare` writes beside the weights: the files' names, sizes
/// and SHA-256 digests, which every host checks the files against. Read one
/// with [`Manifest::parse`], which checks it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Manifest {
    /// [`crate::MODEL_ID`].
    pub id: String,
    /// The weights' quantization, e.g. `q8_0`.
    pub dtype: String,
    pub weights: ManifestFile,
    pub tokenizer: ManifestFile,
}

/// One file of the [`Manifest`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ManifestFile {
    /// The file's name beside `manifest.json`: a plain name, never a path.
    pub file: String,
    pub bytes: u64,
    /// Lower-case hex.
    pub sha256: String,
}

impl Manifest {
    /// The manifest in `json`, checked: each file's name is a plain file name
    /// in the model's folder (ASCII letters, digits, `.`, `-` and `_`, not
    /// starting with `.`, not the manifest's own), the two differ, each size
    /// is within its limit ([`MAX_WEIGHTS_BYTES`], [`MAX_TOKENIZER_BYTES`])
    /// and each digest is 64 lower-case hex digits. What is wrong is an
    /// [`LlmError::Manifest`] naming the value.
    pub fn parse(json: &[u8]) -> Result<Self, LlmError> {
        if json.len() as u64 > MAX_MANIFEST_BYTES {
            return Err(LlmError::Manifest(format!(
                "it is {} bytes, and a manifest is at most {MAX_MANIFEST_BYTES}",
                json.len()
            )));
        }
        let manifest: Self = serde_json::from_slice(json)
            .map_err(|error| LlmError::Manifest(format!("it is not the build's JSON: {error}")))?;
        manifest.weights.check_entry("weights", MAX_WEIGHTS_BYTES)?;
        manifest
            .tokenizer
            .check_entry("tokenizer", MAX_TOKENIZER_BYTES)?;
        if manifest.weights.file == manifest.tokenizer.file {
            return Err(LlmError::Manifest(format!(
                "the weights and the tokenizer are both {:?}",
                manifest.weights.file
            )));
        }
        Ok(manifest)
    }
}

impl ManifestFile {
    fn check_entry(&self, role: &str, max_bytes: u64) -> Result<(), LlmError> {
        if !is_plain_name(&self.file) {
            return Err(LlmError::Manifest(format!(
                "the {role} file name {:?} is not a plain file name in the model's folder (ASCII letters, digits, `.`, `-` and `_`, not starting with `.`, not `{MANIFEST_FILE}`)",
                self.file
            )));
        }
        if self.bytes > max_bytes {
            return Err(LlmError::Manifest(format!(
                "the {role} file is {} bytes by the manifest, and it is at most {max_bytes}",
                self.bytes
            )));
        }
        let hex = |byte: u8| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte);
        if self.sha256.len() != 64 || !self.sha256.bytes().all(hex) {
            return Err(LlmError::Manifest(format!(
                "the {role} file's SHA-256 {:?} is not 64 lower-case hex digits",
                self.sha256
            )));
        }
        Ok(())
    }

    /// Whether a file of `length` bytes may be this one: checked before the
    /// file is read or digested. `shown` is how the host names the file (a
    /// path, a URL).
    pub fn check_length(&self, shown: &str, length: u64) -> Result<(), LlmError> {
        if length == self.bytes {
            return Ok(());
        }
        Err(LlmError::File {
            file: shown.to_owned(),
            problem: format!("is {length} bytes, and its manifest says {}", self.bytes),
        })
    }

    /// Whether `sha256` (lower-case hex, as the host computed it over the
    /// file's bytes) is this file's digest.
    pub fn check_digest(&self, shown: &str, sha256: &str) -> Result<(), LlmError> {
        if sha256 == self.sha256 {
            return Ok(());
        }
        Err(LlmError::File {
            file: shown.to_owned(),
            problem: format!(
                "has SHA-256 {sha256}, and its manifest says {}",
                self.sha256
            ),
        })
    }
}

/// Whether `name` names a file directly in the model's folder on every
/// platform and in a URL: no separator, no drive, no `..`, nothing hidden,
/// nothing a URL reads specially.
fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_BYTES
        && !name.starts_with('.')
        && name != MANIFEST_FILE
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'-' | b'_'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_are_plain() {
        for name in [
            "smollm2-135m-instruct.q8_0.gguf",
            "tokenizer.json",
            "a",
            "A_b-1.2",
        ] {
            assert!(is_plain_name(name), "{name}");
        }
        let long = "a".repeat(MAX_NAME_BYTES + 1);
        for name in [
            "",
            ".",
            "..",
            "../x",
            "..\\x",
            "/etc/passwd",
            "C:model.gguf",
            "sub/x",
            "x\0y",
            ".hidden",
            "x y",
            "x?y",
            "x#y",
            "x%2fy",
            "modèle.gguf",
            MANIFEST_FILE,
            long.as_str(),
        ] {
            assert!(!is_plain_name(name), "{name:?}");
        }
    }
}
