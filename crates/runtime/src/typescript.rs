//! TypeScript programs in the browser: `pkg/kiln_ts.js` (`kiln-ts-wasm`),
//! imported the first time a program does not parse as JavaScript and kept
//! for the worker's life, as the [`kiln_run::Stripper`] of every run this
//! worker hands to its pool.

use futures::future::LocalBoxFuture;
use js_sys::Reflect;
use wasm_bindgen::JsCast as _;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

#[wasm_bindgen(inline_js = r#"
let loading;
// Answers {javascript} (a string, or null for a source that is not
// TypeScript), {refused} (TypeScript that cannot run as JavaScript, or the
// stripper's own failure) or {unloaded} (the wasm could not be had).
export function kiln_ts_strip(url, source) {
  loading ??= import(url).then(async (module) => {
    await module.default();
    return module;
  });
  return loading.then(
    (module) => {
      try {
        return { javascript: module.javascript_of(source) ?? null };
      } catch (error) {
        // A trap leaves the instance unusable: the next program loads it again.
        if (error instanceof WebAssembly.RuntimeError) loading = undefined;
        return { refused: typeof error === "string" ? error : `the TypeScript stripper failed: ${error}` };
      }
    },
    (error) => {
      loading = undefined;
      return { unloaded: String(error) };
    },
  );
}
"#)]
extern "C" {
    fn kiln_ts_strip(url: &str, source: &str) -> js_sys::Promise;
}

/// `kiln_ts.js` beside the app, for this worker (`workers/runtime.js`).
fn module_url() -> String {
    let location = js_sys::global()
        .dyn_into::<web_sys::WorkerGlobalScope>()
        .map(|scope| scope.location().href())
        .unwrap_or_default();
    web_sys::Url::new_with_base("../kiln_ts.js", &location)
        .map(|url| url.href())
        .unwrap_or_else(|_| "../kiln_ts.js".to_owned())
}

/// The stripper of this worker's runs.
pub(crate) struct LoadedOnNeed;

impl kiln_run::Stripper for LoadedOnNeed {
    fn strip(&self, source: String) -> LocalBoxFuture<'static, Result<Option<String>, String>> {
        let answer = JsFuture::from(kiln_ts_strip(&module_url(), &source));
        Box::pin(async move {
            let answer = answer
                .await
                .map_err(|error| format!("the TypeScript stripper did not answer: {error:?}"))?;
            let field = |name: &str| {
                Reflect::get(&answer, &JsValue::from_str(name))
                    .ok()
                    .and_then(|value| value.as_string())
            };
            if let Some(refused) = field("refused") {
                return Err(refused);
            }
            if let Some(unloaded) = field("unloaded") {
                return Err(format!(
                    "the program does not parse as JavaScript, and the TypeScript stripper (kiln_ts.js) could not be loaded to read it as TypeScript: {unloaded}"
                ));
            }
            Ok(field("javascript"))
        })
    }
}
