//! The host hooks of a guest context: the host grants powers, the default refuses.

use boa_engine::realm::Realm;
use boa_engine::{Context, JsNativeError, JsResult, JsString, context::HostHooks};

/// Refuses every compilation of a string into code: `eval`, indirect eval,
/// `Function`, `AsyncFunction`, `GeneratorFunction` and `AsyncGeneratorFunction`
/// however they are reached (`(function(){}).constructor("...")` included),
/// because all of them pass through this hook.
pub(crate) struct GuestHooks;

impl HostHooks for GuestHooks {
    fn ensure_can_compile_strings(
        &self,
        _realm: Realm,
        _parameters: &[JsString],
        _body: &JsString,
        direct: bool,
        _context: &mut Context,
    ) -> JsResult<()> {
        let what = if direct {
            "eval"
        } else {
            "compiling a string into code (eval, Function)"
        };
        Err(JsNativeError::eval()
            .with_message(format!("{what} is not allowed in the Kiln sandbox"))
            .into())
    }
}
