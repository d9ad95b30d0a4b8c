//! `kiln-ts` for the browser: one export, [`javascript_of`], which the
//! runtime worker's `kiln_run::Stripper` calls through `pkg/kiln_ts.js`
//! after importing it on first need. Its own wasm because swc is large
//! (about 0.8 MB gzipped): a site whose programs are JavaScript never loads
//! it.

use wasm_bindgen::prelude::wasm_bindgen;

/// `source` as JavaScript: its TypeScript types blanked (a string), or
/// `undefined` when it is not TypeScript; throws the sentence, with its
/// hint, for TypeScript that makes JavaScript of its own
/// ([`kiln_ts::javascript_of`]).
///
/// # Errors
///
/// That sentence.
#[wasm_bindgen]
pub fn javascript_of(source: &str) -> Result<Option<String>, String> {
    kiln_ts::javascript_of(source)
}
