//! Bounds on the engine's native recursion.
//!
//! Boa recurses on the host stack, with no bound of its own, through a chain
//! of proxies, a chain of bound functions, and `join` / `toString` /
//! `toLocaleString` / `flat` / `JSON.stringify` over nested arrays and
//! objects; 100,000 levels overflow the stack and end the whole worker. When
//! a context is built, each of those built-ins is replaced by a native
//! function that counts how deep it is (one count for all of them, since they
//! nest inside each other) and throws a catchable `RangeError` past
//! [`MAX_NATIVE_DEPTH`]. Every original it calls is captured here, before any
//! program runs, so a program that replaces a built-in changes nothing of
//! the bound. Chains of proxies and bound functions are bounded as they are
//! made: each link is fixed when it is made (a bound function's target, a
//! proxy's target and handler), so the chain's length is known then, one
//! count for both kinds since they chain through each other. (A proxy's traps
//! are the program's own functions, which the engine's limit on JavaScript
//! frames bounds.)
//!
//! Native rather than a JavaScript prelude: the prelude cost every context
//! about 1.2 ms natively to parse, on the path of a run whose context was not
//! built ahead; these functions cost microseconds to define.

use std::cell::Cell;
use std::rc::Rc;

use boa_engine::object::FunctionObjectBuilder;
use boa_engine::object::builtins::JsWeakMap;
use boa_engine::property::PropertyDescriptor;
use boa_engine::{
    Context, JsError, JsNativeError, JsObject, JsResult, JsString, JsValue, NativeFunction,
    js_string,
};
use boa_gc::{Finalize, Gc, GcRefCell, Trace};

use crate::inspect::function_of;

/// How deep proxies, bound functions and the array and JSON built-ins may
/// nest inside each other.
pub const MAX_NATIVE_DEPTH: usize = 128;

/// What every guard shares: how deep the guarded built-ins are now, and the
/// length of each chain of proxies and bound functions made so far.
#[derive(Clone, Trace, Finalize)]
struct Guards {
    #[unsafe_ignore_trace]
    depth: Rc<Cell<usize>>,
    chained: JsWeakMap,
    /// The realm's own `Array.isArray`.
    is_array: JsObject,
}

/// A guard's captures: the shared state and the original it calls.
type Captured = (Guards, JsObject);

fn too_deep(what: &str) -> JsError {
    JsNativeError::range()
        .with_message(format!(
            "{what} nests deeper than {MAX_NATIVE_DEPTH} levels; the sandbox stops there rather than overflow its stack"
        ))
        .into()
}

impl Guards {
    /// Runs `work` one level deeper, or refuses past the bound.
    fn deeper(&self, what: &str, work: impl FnOnce() -> JsResult<JsValue>) -> JsResult<JsValue> {
        let depth = self.depth.get();
        if depth >= MAX_NATIVE_DEPTH {
            return Err(too_deep(what));
        }
        self.depth.set(depth + 1);
        let result = work();
        self.depth.set(depth);
        result
    }

    /// How long the chain below `value` is (0 for anything not in one).
    fn chain_of(&self, value: &JsValue, context: &mut Context) -> JsResult<usize> {
        let Some(object) = value.as_object() else {
            return Ok(0);
        };
        let level = self.chained.get(&object, context)?;
        // Only this module writes the map, always a small whole number.
        Ok(level.as_number().map_or(0, |level| level as usize))
    }

    /// The level of a new link over `below`, or a refusal past the bound.
    fn link(&self, what: &str, below: &[&JsValue], context: &mut Context) -> JsResult<usize> {
        let mut level = 0;
        for value in below {
            level = level.max(self.chain_of(value, context)?);
        }
        level += 1;
        if level > MAX_NATIVE_DEPTH {
            return Err(too_deep(what));
        }
        Ok(level)
    }

    /// `Array.isArray(value)`: proxies of arrays included.
    fn is_array(&self, value: &JsValue, context: &mut Context) -> JsResult<bool> {
        Ok(self
            .is_array
            .call(&JsValue::undefined(), std::slice::from_ref(value), context)?
            .to_boolean())
    }

    fn record(&self, made: &JsValue, level: usize, context: &mut Context) -> JsResult<()> {
        if let Some(object) = made.as_object() {
            self.chained.set(&object, JsValue::from(level), context)?;
        }
        Ok(())
    }
}

fn argument(args: &[JsValue], index: usize) -> JsValue {
    args.get(index).cloned().unwrap_or_default()
}

/// Replaces the method `object[name]` by `guard` (called with the guards and
/// the original), keeping the original's name and length, with a built-in
/// method's attributes. Not a constructor: `new [].join()` stays a
/// `TypeError`.
fn replace(
    object: &JsObject,
    name: &str,
    guards: &Guards,
    guard: fn(&JsValue, &[JsValue], &Captured, &mut Context) -> JsResult<JsValue>,
    context: &mut Context,
) -> JsResult<()> {
    let original = function_of(object, name, name, context)?;
    let length = original
        .get(js_string!("length"), context)?
        .to_length(context)?;
    let function =
        NativeFunction::from_copy_closure_with_captures(guard, (guards.clone(), original));
    let replacement = FunctionObjectBuilder::new(context.realm(), function)
        .name(JsString::from(name))
        .length(usize::try_from(length).unwrap_or(0))
        .constructor(false)
        .build();
    object.define_property_or_throw(JsString::from(name), method(replacement.into()), context)?;
    Ok(())
}

/// A built-in method's attributes: writable, configurable, not enumerable.
fn method(value: JsValue) -> PropertyDescriptor {
    PropertyDescriptor::builder()
        .value(value)
        .writable(true)
        .enumerable(false)
        .configurable(true)
        .build()
}

/// Replaces the built-ins in `context` by their bounded forms.
pub(crate) fn install(context: &mut Context) -> JsResult<()> {
    let array_constructor = context.intrinsics().constructors().array().constructor();
    let is_array = function_of(&array_constructor, "isArray", "Array.isArray", context)?;
    let guards = Guards {
        depth: Rc::default(),
        chained: JsWeakMap::new(context),
        is_array,
    };
    let array = context.intrinsics().constructors().array().prototype();
    replace(&array, "join", &guards, join, context)?;
    replace(&array, "toLocaleString", &guards, to_locale_string, context)?;
    replace(&array, "flat", &guards, flat, context)?;
    let json = context.intrinsics().objects().json();
    replace(&json, "stringify", &guards, stringify, context)?;
    let function = context.intrinsics().constructors().function().prototype();
    replace(&function, "bind", &guards, bind, context)?;
    install_proxy(&guards, context)
}

fn join(
    this: &JsValue,
    args: &[JsValue],
    (guards, original): &Captured,
    context: &mut Context,
) -> JsResult<JsValue> {
    guards.deeper("an array joined into a string", || {
        original.call(this, &[argument(args, 0)], context)
    })
}

fn to_locale_string(
    this: &JsValue,
    args: &[JsValue],
    (guards, original): &Captured,
    context: &mut Context,
) -> JsResult<JsValue> {
    guards.deeper("an array turned into a string", || {
        original.call(this, &[argument(args, 0), argument(args, 1)], context)
    })
}

fn flat(
    this: &JsValue,
    args: &[JsValue],
    (guards, original): &Captured,
    context: &mut Context,
) -> JsResult<JsValue> {
    // Read once, as the engine's own flat reads it.
    let wanted = match args.first() {
        None => 1.0,
        Some(value) if value.is_undefined() => 1.0,
        Some(value) => value.to_number(context)?,
    };
    #[expect(clippy::cast_precision_loss, reason = "128 is exact")]
    let bound = MAX_NATIVE_DEPTH as f64;
    // NaN and anything up to the bound go to the engine as they are.
    if wanted.is_nan() || wanted <= bound {
        return original.call(this, &[wanted.into()], context);
    }
    // Flattened as deep as the bound allows; what still holds an array was
    // deeper than that.
    let flattened = original.call(this, &[bound.into()], context)?;
    if let Some(items) = flattened.as_object() {
        let length = items
            .get(js_string!("length"), context)?
            .to_length(context)?;
        for index in 0..length {
            if guards.is_array(&items.get(index, context)?, context)? {
                return Err(too_deep("an array flattened with flat()"));
            }
        }
    }
    Ok(flattened)
}

fn stringify(
    _: &JsValue,
    args: &[JsValue],
    (guards, original): &Captured,
    context: &mut Context,
) -> JsResult<JsValue> {
    let json: JsValue = context.intrinsics().objects().json().into();
    let value = argument(args, 0);
    let replacer = argument(args, 1);
    let space = argument(args, 2);
    // Nothing to nest (and nothing a replacer is asked about beyond it).
    if replacer.is_undefined() && !value.is_object() {
        return original.call(&json, &[value, replacer, space], context);
    }
    if replacer.as_callable().is_some() {
        let counting = counting(replacer, context);
        return original.call(&json, &[value, counting, space], context);
    }
    if guards.is_array(&replacer, context)? {
        // A list of keys keeps its own order and filter: the depth is
        // checked first, by a pass of its own.
        let counting = counting(JsValue::undefined(), context);
        original.call(&json, &[value.clone(), counting], context)?;
        return original.call(&json, &[value, replacer, space], context);
    }
    let counting = counting(JsValue::undefined(), context);
    original.call(&json, &[value, counting, space], context)
}

/// The holders `JSON.stringify` still has open, innermost last.
type Open = Gc<GcRefCell<Vec<JsObject>>>;

/// A replacer that counts how deep the serializer is before calling `given`
/// (when it is a function). The serializer calls the replacer depth first
/// with the holder as `this`: the holders still open are a stack, and its
/// height is how deep the value at hand is. (The first call's holder is the
/// wrapper around the value, when the stack is empty.)
fn counting(given: JsValue, context: &mut Context) -> JsValue {
    let open: Open = Gc::new(GcRefCell::new(Vec::new()));
    let function = NativeFunction::from_copy_closure_with_captures(
        |this, args, (open, given): &(Open, JsValue), context| {
            {
                let mut open = open.borrow_mut();
                while let Some(top) = open.last() {
                    if this
                        .as_object()
                        .is_some_and(|holder| JsObject::equals(&holder, top))
                    {
                        break;
                    }
                    open.pop();
                }
                if open.len() >= MAX_NATIVE_DEPTH {
                    return Err(too_deep("a value given to JSON.stringify"));
                }
            }
            let found = argument(args, 1);
            let result = match given.as_callable() {
                Some(given) => given.call(this, &[argument(args, 0), found], context)?,
                None => found,
            };
            if let Some(object) = result.as_object() {
                open.borrow_mut().push(object.clone());
            }
            Ok(result)
        },
        (open, given),
    );
    FunctionObjectBuilder::new(context.realm(), function)
        .length(2)
        .build()
        .into()
}

fn bind(
    this: &JsValue,
    args: &[JsValue],
    (guards, original): &Captured,
    context: &mut Context,
) -> JsResult<JsValue> {
    let level = guards.link("a chain of bound functions", &[this], context)?;
    let bound = original.call(this, args, context)?;
    guards.record(&bound, level, context)?;
    Ok(bound)
}

/// Defines the bounded `Proxy` (and its `revocable`) in place of the
/// engine's, which it calls.
fn install_proxy(guards: &Guards, context: &mut Context) -> JsResult<()> {
    let native = context.intrinsics().constructors().proxy().constructor();
    let revocable = function_of(&native, "revocable", "Proxy.revocable", context)?;
    let construct = NativeFunction::from_copy_closure_with_captures(
        |this, args, (guards, native): &Captured, context| {
            // A native constructor is given `new.target` as `this`, and
            // `undefined` when called without `new`.
            if this.is_undefined() {
                return Err(JsNativeError::typ()
                    .with_message("Constructor Proxy requires 'new'")
                    .into());
            }
            let (target, handler) = (argument(args, 0), argument(args, 1));
            let level = guards.link("a chain of proxies", &[&target, &handler], context)?;
            let proxy: JsValue = native.construct(&[target, handler], None, context)?.into();
            guards.record(&proxy, level, context)?;
            Ok(proxy)
        },
        (guards.clone(), native.clone()),
    );
    let proxy = FunctionObjectBuilder::new(context.realm(), construct)
        .name(js_string!("Proxy"))
        .length(2)
        .constructor(true)
        .build();
    let revocable = NativeFunction::from_copy_closure_with_captures(
        |_, args, (guards, (native, revocable)): &(Guards, (JsObject, JsObject)), context| {
            let (target, handler) = (argument(args, 0), argument(args, 1));
            let level = guards.link("a chain of proxies", &[&target, &handler], context)?;
            let made = revocable.call(&native.clone().into(), &[target, handler], context)?;
            if let Some(made) = made.as_object() {
                let proxy = made.get(js_string!("proxy"), context)?;
                guards.record(&proxy, level, context)?;
            }
            Ok(made)
        },
        (guards.clone(), (native.clone(), revocable)),
    );
    let revocable = FunctionObjectBuilder::new(context.realm(), revocable)
        .name(js_string!("revocable"))
        .length(2)
        .build();
    proxy.define_property_or_throw(js_string!("revocable"), method(revocable.into()), context)?;
    context.global_object().define_property_or_throw(
        js_string!("Proxy"),
        method(proxy.into()),
        context,
    )?;
    Ok(())
}
