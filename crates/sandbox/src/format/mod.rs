//! The guest's `format` global: numbers, dates, relative times and lists
//! for a locale, as `Intl` formats them.
//!
//! Boa's own `Intl` is not built in: its data would more than double the
//! sandbox worker's download (see the closing note for the
//! figures), and a program needs the four formatters far more than the
//! rest. So `format.*` reads and checks its options here, once, and a
//! backend formats: the sandbox worker's own `Intl` in the browser
//! (`browser.rs`: the browser's ICU, nothing in the wasm) and ICU4X natively
//! (`native.rs`), each held to the same golden table in the tests. A program
//! names its locale (default `en`) and zone (default `UTC`): the host's own
//! never leak into a result.

use boa_engine::object::ObjectInitializer;
use boa_engine::object::builtins::JsArray;
use boa_engine::{Context, JsNativeError, JsObject, JsResult, JsString, JsValue, NativeFunction};
use serde_json::{Map, Value};

use crate::stdlib::{MAX_TEXT_CHARS, argument};

#[cfg(target_arch = "wasm32")]
mod browser;
#[cfg(not(target_arch = "wasm32"))]
pub(crate) mod native;
pub(crate) mod options;

#[cfg(target_arch = "wasm32")]
use browser as backend;
#[cfg(not(target_arch = "wasm32"))]
use native as backend;

use options::{
    DateOptions, Grouping, Length, ListKind, ListOptions, NumberOptions, NumberStyle,
    RelativeTimeOptions, TimeUnit, Width,
};

/// The most fraction digits a number may be formatted with.
pub const MAX_FRACTION_DIGITS: u8 = 20;

/// The `format` object: its four functions.
pub(crate) fn object(context: &mut Context) -> JsObject {
    ObjectInitializer::new(context)
        .function(
            NativeFunction::from_fn_ptr(number),
            JsString::from("number"),
            2,
        )
        .function(NativeFunction::from_fn_ptr(date), JsString::from("date"), 2)
        .function(
            NativeFunction::from_fn_ptr(relative_time),
            JsString::from("relativeTime"),
            3,
        )
        .function(NativeFunction::from_fn_ptr(list), JsString::from("list"), 2)
        .build()
}

fn type_error(what: &str, message: impl std::fmt::Display) -> JsNativeError {
    JsNativeError::typ().with_message(format!("format.{what}: {message}"))
}

fn range_error(what: &str, message: impl std::fmt::Display) -> JsNativeError {
    JsNativeError::range().with_message(format!("format.{what}: {message}"))
}

/// What a backend answered, as the guest's text or a `RangeError`.
fn answered(what: &str, formatted: Result<String, String>) -> JsResult<JsValue> {
    formatted
        .map(|text| JsString::from(text).into())
        .map_err(|problem| range_error(what, problem).into())
}

/// Argument `index`, an options object, as JSON (`{}` when absent).
fn options_argument(
    args: &[JsValue],
    index: usize,
    what: &str,
    context: &mut Context,
) -> JsResult<Map<String, Value>> {
    let value = argument(args, index);
    if value.is_undefined() || value.is_null() {
        return Ok(Map::new());
    }
    match crate::inspect::to_json(&value, context)? {
        Value::Object(map) => Ok(map),
        other => {
            Err(type_error(what, format!("the options must be an object; got {other}")).into())
        }
    }
}

/// Option `name`, one of `choices` (the first is the default).
fn choice<'a>(
    options: &Map<String, Value>,
    name: &str,
    choices: &[&'a str],
    what: &str,
) -> JsResult<&'a str> {
    let listed = || {
        choices
            .iter()
            .map(|choice| format!("\"{choice}\""))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match options.get(name) {
        None | Some(Value::Null) => Ok(choices[0]),
        Some(Value::String(given)) => choices
            .iter()
            .find(|choice| **choice == given)
            .copied()
            .ok_or_else(|| {
                range_error(
                    what,
                    format!("`{name}` must be one of {}; got \"{given}\"", listed()),
                )
                .into()
            }),
        Some(other) => Err(type_error(
            what,
            format!("`{name}` must be one of {}; got {other}", listed()),
        )
        .into()),
    }
}

/// Option `locale`: a well-formed language tag, `en` when absent.
fn locale(options: &Map<String, Value>, what: &str) -> JsResult<String> {
    let tag = match options.get("locale") {
        None | Some(Value::Null) => return Ok("en".to_owned()),
        Some(Value::String(tag)) => tag,
        Some(other) => {
            return Err(type_error(what, format!("`locale` must be a string; got {other}")).into());
        }
    };
    let mut parts = tag.split('-');
    let language = parts.next().unwrap_or_default();
    let well_formed = tag.len() <= 64
        && (2..=3).contains(&language.len())
        && language.bytes().all(|byte| byte.is_ascii_alphabetic())
        && parts.all(|part| {
            (1..=8).contains(&part.len()) && part.bytes().all(|byte| byte.is_ascii_alphanumeric())
        });
    if well_formed {
        Ok(tag.clone())
    } else {
        Err(range_error(
            what,
            format!("`locale` must be a language tag such as \"en\", \"de-CH\" or \"zh-Hans\"; got \"{tag}\""),
        )
        .into())
    }
}

/// Option `name`, a whole number of fraction digits from 0 to
/// [`MAX_FRACTION_DIGITS`].
fn digits(options: &Map<String, Value>, name: &str, what: &str) -> JsResult<Option<u8>> {
    match options.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value
            .as_u64()
            .and_then(|digits| u8::try_from(digits).ok())
            .filter(|digits| *digits <= MAX_FRACTION_DIGITS)
            .map(Some)
            .ok_or_else(|| {
                range_error(
                    what,
                    format!(
                        "`{name}` must be a whole number from 0 to {MAX_FRACTION_DIGITS}; got {value}"
                    ),
                )
                .into()
            }),
    }
}

/// Argument `index`, a number (`NaN` and the infinities included).
fn number_argument(
    args: &[JsValue],
    index: usize,
    what: &str,
    context: &mut Context,
) -> JsResult<f64> {
    let value = argument(args, index);
    match value.as_number() {
        Some(number) => Ok(number),
        None => Err(type_error(
            what,
            format!(
                "takes a number to format; got {}",
                crate::inspect::shown(&value, context)
            ),
        )
        .into()),
    }
}

/// `format.number(value, {locale, style, currency, minimumFractionDigits,
/// maximumFractionDigits, useGrouping})`.
fn number(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    const WHAT: &str = "number";
    let value = number_argument(args, 0, WHAT, context)?;
    let options = options_argument(args, 1, WHAT, context)?;
    let style = match choice(&options, "style", &["decimal", "percent", "currency"], WHAT)? {
        "percent" => NumberStyle::Percent,
        "currency" => match options.get("currency") {
            Some(Value::String(code))
                if code.len() == 3 && code.bytes().all(|byte| byte.is_ascii_alphabetic()) =>
            {
                NumberStyle::Currency(code.to_ascii_uppercase())
            }
            None | Some(Value::Null) => {
                return Err(type_error(
                    WHAT,
                    "`style: \"currency\"` needs `currency`, an ISO 4217 code such as \"EUR\"",
                )
                .into());
            }
            Some(other) => {
                return Err(range_error(
                    WHAT,
                    format!("`currency` must be an ISO 4217 code such as \"EUR\"; got {other}"),
                )
                .into());
            }
        },
        _ => NumberStyle::Decimal,
    };
    let minimum_fraction_digits = digits(&options, "minimumFractionDigits", WHAT)?;
    let maximum_fraction_digits = digits(&options, "maximumFractionDigits", WHAT)?;
    if let (Some(minimum), Some(maximum)) = (minimum_fraction_digits, maximum_fraction_digits)
        && minimum > maximum
    {
        return Err(range_error(
            WHAT,
            format!("`minimumFractionDigits` ({minimum}) is more than `maximumFractionDigits` ({maximum})"),
        )
        .into());
    }
    let grouping = match options.get("useGrouping") {
        None | Some(Value::Null) => Grouping::Auto,
        Some(Value::Bool(true)) => Grouping::Always,
        Some(Value::Bool(false)) => Grouping::Never,
        Some(Value::String(text)) if text == "auto" => Grouping::Auto,
        Some(Value::String(text)) if text == "always" => Grouping::Always,
        Some(Value::String(text)) if text == "min2" => Grouping::Min2,
        Some(other) => {
            return Err(range_error(
                WHAT,
                format!("`useGrouping` must be true, false, \"auto\", \"always\" or \"min2\"; got {other}"),
            )
            .into());
        }
    };
    let options = NumberOptions {
        locale: locale(&options, WHAT)?,
        style,
        minimum_fraction_digits,
        maximum_fraction_digits,
        grouping,
    };
    answered(WHAT, backend::number(value, &options))
}

/// A style option: one of `lengths`, absent when not given.
fn length(
    options: &Map<String, Value>,
    name: &str,
    lengths: &[Length],
    what: &str,
) -> JsResult<Option<Length>> {
    if matches!(options.get(name), None | Some(Value::Null)) {
        return Ok(None);
    }
    let names: Vec<&str> = lengths.iter().map(|length| length.name()).collect();
    let chosen = choice(options, name, &names, what)?;
    Ok(lengths
        .iter()
        .copied()
        .find(|length| length.name() == chosen))
}

/// `format.date(date, {locale, timeZone, dateStyle, timeStyle})`: the date
/// as a `Date`, epoch milliseconds or ISO 8601 text (text without an offset
/// is read in `timeZone`).
fn date(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    const WHAT: &str = "date";
    let options = options_argument(args, 1, WHAT, context)?;
    let time_zone = match options.get("timeZone") {
        None | Some(Value::Null) => "UTC".to_owned(),
        Some(Value::String(zone)) => zone.clone(),
        Some(other) => {
            return Err(type_error(
                WHAT,
                format!(
                    "`timeZone` must be an IANA zone name such as \"Europe/Berlin\"; got {other}"
                ),
            )
            .into());
        }
    };
    let zone = crate::modules::time_zone(&time_zone, "format.date")?;
    let zoned = crate::modules::date_argument(args, 0, Some(&zone), "format.date", context)?;
    // Whole milliseconds of a date within the years -9999 to 9999: exact in an f64.
    #[expect(
        clippy::cast_precision_loss,
        reason = "at most about 2.5e14, well inside an f64's exact integers"
    )]
    let epoch_ms = zoned.timestamp().as_millisecond() as f64;
    let all = [Length::Full, Length::Long, Length::Medium, Length::Short];
    let mut date_style = length(&options, "dateStyle", &all, WHAT)?;
    let time_style = length(
        &options,
        "timeStyle",
        &[Length::Medium, Length::Short],
        WHAT,
    )?;
    if date_style.is_none() && time_style.is_none() {
        date_style = Some(Length::Medium);
    }
    let options = DateOptions {
        locale: locale(&options, WHAT)?,
        time_zone,
        date_style,
        time_style,
    };
    answered(WHAT, backend::date(epoch_ms, &options))
}

/// `format.relativeTime(value, unit, {locale, numeric, style})`.
fn relative_time(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    const WHAT: &str = "relativeTime";
    let value = number_argument(args, 0, WHAT, context)?;
    if !value.is_finite() {
        return Err(range_error(WHAT, format!("the value must be finite; got {value}")).into());
    }
    let named = argument(args, 1);
    let units = || {
        TimeUnit::ALL
            .iter()
            .map(|unit| format!("\"{}\"", unit.name()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let Some(given) = named.as_string().map(|unit| unit.to_std_string_escaped()) else {
        return Err(type_error(
            WHAT,
            format!(
                "takes a unit, one of {}; got {}",
                units(),
                crate::inspect::shown(&named, context)
            ),
        )
        .into());
    };
    let singular = given.strip_suffix('s').unwrap_or(&given);
    let Some(unit) = TimeUnit::ALL
        .into_iter()
        .find(|unit| unit.name() == singular)
    else {
        return Err(range_error(
            WHAT,
            format!("the unit must be one of {}; got \"{given}\"", units()),
        )
        .into());
    };
    let options = options_argument(args, 2, WHAT, context)?;
    let options = RelativeTimeOptions {
        locale: locale(&options, WHAT)?,
        auto: choice(&options, "numeric", &["always", "auto"], WHAT)? == "auto",
        width: width(&options, WHAT)?,
    };
    answered(WHAT, backend::relative_time(value, unit, &options))
}

/// Option `style`: a [`Width`], long when absent.
fn width(options: &Map<String, Value>, what: &str) -> JsResult<Width> {
    let names = Width::ALL.map(Width::name);
    let chosen = choice(options, "style", &names, what)?;
    Ok(Width::ALL
        .into_iter()
        .find(|width| width.name() == chosen)
        .unwrap_or(Width::Long))
}

/// `format.list(items, {locale, type, style})`: strings, at most the
/// standard library's bound on text in all.
fn list(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    const WHAT: &str = "list";
    let given = argument(args, 0);
    let not_strings = || type_error(WHAT, "takes an array of strings");
    let array = given
        .as_object()
        .and_then(|object| JsArray::from_object(object.clone()).ok())
        .ok_or_else(not_strings)?;
    let count = array.length(context)?;
    let mut items = Vec::new();
    let mut chars = 0;
    for index in 0..count {
        let item = array.get(index, context)?;
        let Some(text) = item.as_string() else {
            return Err(type_error(
                WHAT,
                format!("item {index} is a {}, not a string", item.type_of()),
            )
            .into());
        };
        let text = text.to_std_string_escaped();
        chars += text.chars().count();
        if chars > MAX_TEXT_CHARS {
            return Err(range_error(
                WHAT,
                format!(
                    "the items are more than the {MAX_TEXT_CHARS} characters one call may take"
                ),
            )
            .into());
        }
        items.push(text);
    }
    let options = options_argument(args, 1, WHAT, context)?;
    let names = ListKind::ALL.map(ListKind::name);
    let chosen = choice(&options, "type", &names, WHAT)?;
    let kind = ListKind::ALL
        .into_iter()
        .find(|kind| kind.name() == chosen)
        .unwrap_or(ListKind::Conjunction);
    let options = ListOptions {
        locale: locale(&options, WHAT)?,
        kind,
        width: width(&options, WHAT)?,
    };
    answered(WHAT, backend::list(&items, &options))
}
