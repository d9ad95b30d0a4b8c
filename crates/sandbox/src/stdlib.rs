//! The guest's standard library beside ECMAScript (reference/000, "Exposed
//! guest surface"): what a program expects to find and should never write by
//! hand.
//!
//! - Text and bytes: `TextEncoder` / `TextDecoder` (UTF-8), `atob` / `btoa`
//!   (Boa's runtime crate), and `toBase64`, `fromBase64`, `toHex`, `fromHex`
//!   over `Uint8Array`.
//! - `URL` (Boa's runtime crate, WHATWG parsing by the `url` crate) and
//!   `URLSearchParams` with `URL.prototype.searchParams` (`stdlib.js`, its
//!   pairs read and written by `form_urlencoded`).
//! - `structuredClone` (Boa's runtime crate), refused past
//!   [`kiln_types::MAX_VALUE_DEPTH`] before the engine recurses.
//! - `crypto`: `randomUUID`, `getRandomValues` (64 KiB a call), `digest` and
//!   `hmac` for SHA-1/256/384/512 (RustCrypto), and `subtle.digest`.
//! - `format`: numbers, dates, relative times and lists for a locale (the
//!   `format` module).
//! - `parallelMap(items, fn, concurrency)`.
//!
//! Each global is a placeholder until a program first touches one; then the
//! whole library loads ([`names`]), in the program's own time.
//!
//! The limits live inside the implementations (`stdlib.js` captures what it
//! guards): text at most [`MAX_TEXT_CHARS`] and bytes at most
//! [`MAX_BYTES`] a call, each refusal a catchable `RangeError` naming the
//! limit. The work is guest time: it runs on the run's thread between two
//! idle points, so the JavaScript budget counts it.

use base64::Engine as _;
use boa_engine::class::{Class, ClassBuilder};
use boa_engine::object::ObjectInitializer;
use boa_engine::object::builtins::{
    AlignedVec, JsArray, JsArrayBuffer, JsTypedArray, JsUint8Array,
};
use boa_engine::property::{Attribute, PropertyDescriptor};
use boa_engine::{
    Context, JsNativeError, JsObject, JsResult, JsString, JsValue, NativeFunction, Source,
    js_string,
};
use sha2::Digest as _;

/// The most characters of text one call takes.
pub const MAX_TEXT_CHARS: usize = 5_000_000;
/// The most bytes one call takes.
pub const MAX_BYTES: usize = 10 << 20;

/// The library's JavaScript half.
const STDLIB: &str = include_str!("stdlib.js");

/// The entries of `kiln_types::guest::GLOBALS` the library defines, each
/// with the names it lists beside it.
const ENTRIES: [&str; 6] = [
    "TextEncoder",
    "URL",
    "structuredClone",
    "crypto",
    "format",
    "parallelMap",
];

/// The globals the library defines, as the guest table lists them.
pub fn names() -> impl Iterator<Item = &'static str> {
    kiln_types::guest::GLOBALS
        .iter()
        .filter(|global| ENTRIES.contains(&global.name))
        .flat_map(|global| std::iter::once(global.name).chain(global.also.iter().copied()))
}

/// Where the library's globals live once loaded.
type Shelf = JsObject;

/// Defines the library's globals in `context`. Each is an accessor on the
/// global object that loads the whole library the first time a program reads
/// or writes one of them, and answers from it after: building it costs about
/// as much as the rest of a context, and most programs never touch it.
///
/// The accessors stay for the context's life and loading adds nothing to the
/// global object: its shape is settled before any program runs, because the
/// engine's inline caches of global names do not survive a global property
/// deleted under them.
pub(crate) fn install(context: &mut Context) -> JsResult<()> {
    let global = context.global_object();
    let lib: Shelf = JsObject::with_null_proto();
    for name in names() {
        let get = NativeFunction::from_copy_closure_with_captures(
            move |_, _, lib: &Shelf, context| {
                load(lib, context)?;
                lib.get(JsString::from(name), context)
            },
            lib.clone(),
        )
        .to_js_function(context.realm());
        let set = NativeFunction::from_copy_closure_with_captures(
            move |_, args, lib: &Shelf, context| {
                load(lib, context)?;
                let value = args.first().cloned().unwrap_or_default();
                lib.set(JsString::from(name), value, true, context)?;
                Ok(JsValue::undefined())
            },
            lib.clone(),
        )
        .to_js_function(context.realm());
        global.define_property_or_throw(
            JsString::from(name),
            PropertyDescriptor::builder()
                .get(get)
                .set(set)
                .enumerable(false)
                .configurable(false),
            context,
        )?;
    }
    Ok(())
}

/// `C`'s constructor, its class registered with the realm (so its instances
/// find their prototype) and defined on no object.
fn class<C: Class>(context: &mut Context) -> JsResult<JsValue> {
    let mut builder = ClassBuilder::new::<C>(context);
    C::init(&mut builder)?;
    let built = builder.build();
    let constructor = built.constructor();
    context.realm().register_class::<C>(built);
    Ok(constructor.into())
}

/// The engine's `atob`.
fn atob(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let text = string_argument(args, 0, context)?;
    Ok(JsString::from(boa_runtime::base64::js_module::atob(text)?).into())
}

/// The engine's `btoa`.
fn btoa(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let text = string_argument(args, 0, context)?;
    Ok(JsString::from(boa_runtime::base64::js_module::btoa(text)?).into())
}

/// The engine's `structuredClone` (its depth bounded in `stdlib.js`).
fn structured_clone(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    boa_runtime::clone::js_module::structured_clone(argument(args, 0), None, context)
}

/// Loads the library onto `lib`, once.
fn load(lib: &Shelf, context: &mut Context) -> JsResult<()> {
    if lib.has_own_property(js_string!("crypto"), context)? {
        return Ok(());
    }
    let raw = ObjectInitializer::new(context)
        .function(NativeFunction::from_fn_ptr(atob), js_string!("atob"), 1)
        .function(NativeFunction::from_fn_ptr(btoa), js_string!("btoa"), 1)
        .function(
            NativeFunction::from_fn_ptr(structured_clone),
            js_string!("structuredClone"),
            1,
        )
        .build();
    for (name, constructor) in [
        (
            "TextEncoder",
            class::<boa_runtime::text::TextEncoder>(context)?,
        ),
        (
            "TextDecoder",
            class::<boa_runtime::text::TextDecoder>(context)?,
        ),
        ("URL", class::<boa_runtime::url::Url>(context)?),
        ("format", crate::format::object(context).into()),
    ] {
        raw.create_data_property_or_throw(JsString::from(name), constructor, context)?;
    }
    let natives: [(&str, NativeFunction, usize); 10] = [
        ("toBase64", NativeFunction::from_fn_ptr(to_base64), 3),
        ("fromBase64", NativeFunction::from_fn_ptr(from_base64), 2),
        ("toHex", NativeFunction::from_fn_ptr(to_hex), 1),
        ("fromHex", NativeFunction::from_fn_ptr(from_hex), 1),
        ("randomUUID", NativeFunction::from_fn_ptr(random_uuid), 0),
        ("fill", NativeFunction::from_fn_ptr(fill), 1),
        ("digest", NativeFunction::from_fn_ptr(digest), 2),
        ("hmac", NativeFunction::from_fn_ptr(hmac), 3),
        ("parseQuery", NativeFunction::from_fn_ptr(parse_query), 1),
        ("writeQuery", NativeFunction::from_fn_ptr(write_query), 1),
    ];
    let mut native = ObjectInitializer::new(context);
    for (name, function, length) in natives {
        native.function(function, JsString::from(name), length);
    }
    native
        .property(js_string!("maxText"), MAX_TEXT_CHARS, Attribute::empty())
        .property(js_string!("maxBytes"), MAX_BYTES, Attribute::empty())
        .property(
            js_string!("maxDepth"),
            kiln_types::MAX_VALUE_DEPTH,
            Attribute::empty(),
        );
    let native = native.build();
    let factory = context.eval(Source::from_bytes(STDLIB))?;
    let Some(factory) = factory.as_callable() else {
        return Err(JsNativeError::typ()
            .with_message("the standard library's definition is not a function")
            .into());
    };
    let made = factory.call(
        &JsValue::undefined(),
        &[native.into(), raw.clone().into()],
        context,
    )?;
    let made = made.as_object().ok_or_else(|| {
        JsNativeError::typ().with_message("the standard library's definition made no object")
    })?;
    for name in names() {
        let key = JsString::from(name);
        let value = made.get(key.clone(), context)?;
        lib.create_data_property_or_throw(key, value, context)?;
    }
    Ok(())
}

/// The buffer, offset and length of `value`, a `Uint8Array` (`stdlib.js`
/// made it one).
fn view(value: &JsValue, context: &mut Context) -> JsResult<(JsArrayBuffer, usize, usize)> {
    let not_bytes = || JsNativeError::typ().with_message("expected a Uint8Array");
    let array = JsTypedArray::from_object(value.as_object().ok_or_else(not_bytes)?)?;
    let offset = array.byte_offset(context)?;
    let length = array.byte_length(context)?;
    let buffer = array.buffer(context)?;
    let buffer = JsArrayBuffer::from_object(buffer.as_object().ok_or_else(not_bytes)?)?;
    Ok((buffer, offset, length))
}

fn detached() -> JsNativeError {
    JsNativeError::typ().with_message("the bytes' buffer was detached")
}

fn outside() -> JsNativeError {
    JsNativeError::range().with_message("the bytes lie outside their buffer")
}

/// The bytes of `value`, a `Uint8Array`, handed to `read`.
fn with_bytes<R>(
    value: &JsValue,
    context: &mut Context,
    read: impl FnOnce(&[u8]) -> R,
) -> JsResult<R> {
    let (buffer, offset, length) = view(value, context)?;
    if length > MAX_BYTES {
        return Err(JsNativeError::range()
            .with_message(format!(
                "the bytes are {length} bytes, more than the {MAX_BYTES} bytes one call may take"
            ))
            .into());
    }
    let data = buffer.data().ok_or_else(detached)?;
    let bytes = data.get(offset..offset + length).ok_or_else(outside)?;
    Ok(read(bytes))
}

/// A new `Uint8Array` holding `bytes`.
pub(crate) fn uint8_array(bytes: &[u8], context: &mut Context) -> JsResult<JsValue> {
    let block = AlignedVec::from_iter(0, bytes.iter().copied());
    let buffer = JsArrayBuffer::from_byte_block(block, context)?;
    Ok(JsUint8Array::from_array_buffer(buffer, context)?.into())
}

pub(crate) fn argument(args: &[JsValue], index: usize) -> JsValue {
    args.get(index).cloned().unwrap_or_default()
}

/// Argument `index` as text, at most [`MAX_TEXT_CHARS`] UTF-16 units.
pub(crate) fn string_argument(
    args: &[JsValue],
    index: usize,
    context: &mut Context,
) -> JsResult<String> {
    let text = argument(args, index).to_string(context)?;
    if text.len() > MAX_TEXT_CHARS {
        return Err(JsNativeError::range()
            .with_message(format!(
                "the text is {} characters, more than the {MAX_TEXT_CHARS} characters one call may take",
                text.len()
            ))
            .into());
    }
    Ok(text.to_std_string_lossy())
}

fn base64_engine(url: bool, padded: bool) -> base64::engine::GeneralPurpose {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    match (url, padded) {
        (false, true) => STANDARD,
        (false, false) => STANDARD_NO_PAD,
        (true, true) => URL_SAFE,
        (true, false) => URL_SAFE_NO_PAD,
    }
}

/// `toBase64(bytes, url, omitPadding)`.
fn to_base64(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let url = argument(args, 1).to_boolean();
    let padded = !argument(args, 2).to_boolean();
    let text = with_bytes(&argument(args, 0), context, |bytes| {
        base64_engine(url, padded).encode(bytes)
    })?;
    Ok(JsString::from(text).into())
}

/// `fromBase64(text, url)`: ASCII whitespace is ignored and padding is
/// optional, as `atob` and `Uint8Array.fromBase64` allow.
fn from_base64(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let text = string_argument(args, 0, context)?;
    let url = argument(args, 1).to_boolean();
    let cleaned: String = text
        .chars()
        .filter(|c| !matches!(c, ' ' | '\t' | '\n' | '\x0C' | '\r'))
        .collect();
    let trimmed = cleaned.trim_end_matches('=');
    let bytes = base64_engine(url, false).decode(trimmed).map_err(|error| {
        let alphabet = if url { "base64url" } else { "base64" };
        JsNativeError::syntax()
            .with_message(format!("fromBase64: the text is not {alphabet}: {error}"))
    })?;
    uint8_array(&bytes, context)
}

/// `toHex(bytes)`: two lowercase digits a byte.
fn to_hex(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let text = with_bytes(&argument(args, 0), context, |bytes| {
        let mut text = String::with_capacity(bytes.len() * 2);
        for byte in bytes {
            text.push(char::from(DIGITS[usize::from(byte >> 4)]));
            text.push(char::from(DIGITS[usize::from(byte & 0xf)]));
        }
        text
    })?;
    Ok(JsString::from(text).into())
}

/// `fromHex(text)`: an even number of hex digits, either case.
fn from_hex(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let text = string_argument(args, 0, context)?;
    let digits: Vec<char> = text.chars().collect();
    if !digits.len().is_multiple_of(2) {
        return Err(JsNativeError::syntax()
            .with_message(format!(
                "fromHex: the text has {} characters; hex is two digits a byte",
                digits.len()
            ))
            .into());
    }
    let digit = |at: usize| {
        digits[at].to_digit(16).ok_or_else(|| {
            JsNativeError::syntax().with_message(format!(
                "fromHex: `{}` at position {at} is not a hex digit",
                digits[at]
            ))
        })
    };
    let mut bytes = Vec::with_capacity(digits.len() / 2);
    for at in (0..digits.len()).step_by(2) {
        let byte = digit(at)? * 16 + digit(at + 1)?;
        bytes.push(u8::try_from(byte).unwrap_or_default());
    }
    uint8_array(&bytes, context)
}

/// Fills `bytes` from the platform's secure source (the OS natively, the
/// worker's `crypto.getRandomValues` in the browser).
fn random_bytes(bytes: &mut [u8]) -> JsResult<()> {
    getrandom::fill(bytes).map_err(|error| {
        JsNativeError::error()
            .with_message(format!("no randomness is available: {error}"))
            .into()
    })
}

/// `randomUUID()`: a version 4 UUID.
fn random_uuid(_: &JsValue, _: &[JsValue], _: &mut Context) -> JsResult<JsValue> {
    let mut bytes = [0_u8; 16];
    random_bytes(&mut bytes)?;
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
    let uuid = format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    );
    Ok(JsString::from(uuid).into())
}

/// `fill(bytes)`: random bytes written in place (`stdlib.js` bounded the size).
fn fill(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let (buffer, offset, length) = view(&argument(args, 0), context)?;
    let mut data = buffer.data_mut().ok_or_else(detached)?;
    random_bytes(data.get_mut(offset..offset + length).ok_or_else(outside)?)?;
    Ok(JsValue::undefined())
}

/// The digest of `bytes` by `algorithm` (`SHA1`, `SHA256`, `SHA384`, `SHA512`).
fn hash(algorithm: &str, bytes: &[u8]) -> Option<Vec<u8>> {
    Some(match algorithm {
        "SHA1" => sha1::Sha1::digest(bytes).to_vec(),
        "SHA256" => sha2::Sha256::digest(bytes).to_vec(),
        "SHA384" => sha2::Sha384::digest(bytes).to_vec(),
        "SHA512" => sha2::Sha512::digest(bytes).to_vec(),
        _ => return None,
    })
}

/// The HMAC of `data` under `key` by `algorithm`.
fn sign(algorithm: &str, key: &[u8], data: &[u8]) -> Option<Vec<u8>> {
    fn mac<M: hmac::Mac + hmac::digest::KeyInit>(key: &[u8], data: &[u8]) -> Vec<u8> {
        let mut mac = <M as hmac::digest::KeyInit>::new_from_slice(key)
            .unwrap_or_else(|_| <M as hmac::digest::KeyInit>::new(&Default::default()));
        mac.update(data);
        mac.finalize().into_bytes().to_vec()
    }
    Some(match algorithm {
        "SHA1" => mac::<hmac::Hmac<sha1::Sha1>>(key, data),
        "SHA256" => mac::<hmac::Hmac<sha2::Sha256>>(key, data),
        "SHA384" => mac::<hmac::Hmac<sha2::Sha384>>(key, data),
        "SHA512" => mac::<hmac::Hmac<sha2::Sha512>>(key, data),
        _ => return None,
    })
}

fn unknown_algorithm(algorithm: &str) -> JsNativeError {
    JsNativeError::typ().with_message(format!("no digest algorithm `{algorithm}`"))
}

/// `digest(algorithm, bytes)`.
fn digest(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let algorithm = string_argument(args, 0, context)?;
    let digest = with_bytes(&argument(args, 1), context, |bytes| hash(&algorithm, bytes))?
        .ok_or_else(|| unknown_algorithm(&algorithm))?;
    uint8_array(&digest, context)
}

/// `hmac(algorithm, key, data)`.
fn hmac(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let algorithm = string_argument(args, 0, context)?;
    let key = with_bytes(&argument(args, 1), context, <[u8]>::to_vec)?;
    let signature = with_bytes(&argument(args, 2), context, |data| {
        sign(&algorithm, &key, data)
    })?
    .ok_or_else(|| unknown_algorithm(&algorithm))?;
    uint8_array(&signature, context)
}

/// `parseQuery(query)`: `application/x-www-form-urlencoded` pairs, as
/// `[[name, value], …]`.
fn parse_query(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let query = string_argument(args, 0, context)?;
    let pairs: Vec<JsValue> = url::form_urlencoded::parse(query.as_bytes())
        .map(|(name, value)| {
            JsArray::from_iter(
                [
                    JsString::from(name.as_ref()).into(),
                    JsString::from(value.as_ref()).into(),
                ],
                context,
            )
            .into()
        })
        .collect();
    Ok(JsArray::from_iter(pairs, context).into())
}

/// `writeQuery(pairs)`: the pairs serialized as a query string.
fn write_query(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let pairs = argument(args, 0);
    let pairs = pairs
        .as_object()
        .map(|object| JsArray::from_object(object.clone()))
        .transpose()?;
    let mut serializer = url::form_urlencoded::Serializer::new(String::new());
    if let Some(pairs) = pairs {
        for index in 0..pairs.length(context)? {
            let pair = pairs.get(index, context)?;
            let Some(pair) = pair.as_object() else {
                continue;
            };
            let name = pair.get(0, context)?.to_string(context)?;
            let value = pair.get(1, context)?.to_string(context)?;
            serializer.append_pair(&name.to_std_string_lossy(), &value.to_std_string_lossy());
        }
    }
    Ok(JsString::from(serializer.finish()).into())
}
