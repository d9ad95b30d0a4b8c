//! Words for values in messages.

pub use kiln_types::words::json_type_exact as json_type;

/// `` `a`, `b` `` or `nothing`.
#[must_use]
pub fn key_list(keys: &[&str]) -> String {
    if keys.is_empty() {
        return "nothing".into();
    }
    keys.iter()
        .map(|key| format!("`{key}`"))
        .collect::<Vec<_>>()
        .join(", ")
}
