//! `format.*` in the browser, over the sandbox worker's own `Intl` (the
//! browser's ICU): the same data the page would format with, and nothing in
//! the sandbox's wasm.

use js_sys::{Array, Function, Object, Reflect};
use wasm_bindgen::{JsCast as _, JsValue};

use super::options::{
    DateOptions, Grouping, ListOptions, NumberOptions, NumberStyle, RelativeTimeOptions, TimeUnit,
};

/// `Intl[constructor]`, checked to serve `locale` (not to fall back to the
/// browser's own language, which natively has no counterpart).
fn formatter(constructor: &str, locale: &str, options: &Object) -> Result<Object, String> {
    let intl = Reflect::get(&js_sys::global(), &"Intl".into())
        .ok()
        .filter(JsValue::is_object)
        .ok_or("this browser has no `Intl`")?;
    let class: Function = Reflect::get(&intl, &constructor.into())
        .ok()
        .and_then(|class| class.dyn_into().ok())
        .ok_or_else(|| format!("this browser has no `Intl.{constructor}`"))?;
    let locales = Array::of1(&locale.into());
    let supported = Reflect::get(&class, &"supportedLocalesOf".into())
        .ok()
        .and_then(|check| check.dyn_into::<Function>().ok())
        .and_then(|check| check.call1(&class, &locales).ok())
        .and_then(|found| found.dyn_into::<Array>().ok())
        .is_some_and(|found| found.length() > 0);
    if !supported {
        return Err(format!("`{locale}` is not a locale Kiln can format for"));
    }
    let made = Reflect::construct(&class, &Array::of2(&locales, options))
        .map_err(|error| described(&error))?;
    made.dyn_into()
        .map_err(|_| format!("`Intl.{constructor}` made no object"))
}

/// `formatter.format(...args)` as text.
fn format(formatter: &Object, args: &Array) -> Result<String, String> {
    let format: Function = Reflect::get(formatter, &"format".into())
        .ok()
        .and_then(|format| format.dyn_into().ok())
        .ok_or("the formatter has no `format`")?;
    format
        .apply(formatter, args)
        .map_err(|error| described(&error))?
        .as_string()
        .ok_or_else(|| "the formatter answered no text".to_owned())
}

/// What a thrown `RangeError` said.
fn described(error: &JsValue) -> String {
    Reflect::get(error, &"message".into())
        .ok()
        .and_then(|message| message.as_string())
        .unwrap_or_else(|| format!("{error:?}"))
}

/// An options object of `(name, value)` pairs, skipping the absent.
fn options(pairs: &[(&str, Option<JsValue>)]) -> Object {
    let object = Object::new();
    for (name, value) in pairs {
        if let Some(value) = value {
            // Setting a property on a fresh plain object cannot fail.
            let _ = Reflect::set(&object, &(*name).into(), value);
        }
    }
    object
}

pub(crate) fn number(value: f64, options: &NumberOptions) -> Result<String, String> {
    let (style, currency) = match &options.style {
        NumberStyle::Decimal => ("decimal", None),
        NumberStyle::Percent => ("percent", None),
        NumberStyle::Currency(code) => ("currency", Some(JsValue::from(code.as_str()))),
    };
    let digits = |digits: Option<u8>| digits.map(JsValue::from);
    let made = formatter(
        "NumberFormat",
        &options.locale,
        &self::options(&[
            ("style", Some(style.into())),
            ("currency", currency),
            (
                "minimumFractionDigits",
                digits(options.minimum_fraction_digits),
            ),
            (
                "maximumFractionDigits",
                digits(options.maximum_fraction_digits),
            ),
            (
                "useGrouping",
                match options.grouping {
                    Grouping::Auto => None,
                    Grouping::Always => Some("always".into()),
                    Grouping::Min2 => Some("min2".into()),
                    Grouping::Never => Some(false.into()),
                },
            ),
        ]),
    )?;
    format(&made, &Array::of1(&value.into()))
}

pub(crate) fn date(epoch_ms: f64, options: &DateOptions) -> Result<String, String> {
    let made = formatter(
        "DateTimeFormat",
        &options.locale,
        &self::options(&[
            ("timeZone", Some(options.time_zone.as_str().into())),
            (
                "dateStyle",
                options.date_style.map(|style| style.name().into()),
            ),
            (
                "timeStyle",
                options.time_style.map(|style| style.name().into()),
            ),
        ]),
    )?;
    format(&made, &Array::of1(&js_sys::Date::new(&epoch_ms.into())))
}

pub(crate) fn relative_time(
    value: f64,
    unit: TimeUnit,
    options: &RelativeTimeOptions,
) -> Result<String, String> {
    let made = formatter(
        "RelativeTimeFormat",
        &options.locale,
        &self::options(&[
            (
                "numeric",
                Some(if options.auto { "auto" } else { "always" }.into()),
            ),
            ("style", Some(options.width.name().into())),
        ]),
    )?;
    format(&made, &Array::of2(&value.into(), &unit.name().into()))
}

pub(crate) fn list(items: &[String], options: &ListOptions) -> Result<String, String> {
    let made = formatter(
        "ListFormat",
        &options.locale,
        &self::options(&[
            ("type", Some(options.kind.name().into())),
            ("style", Some(options.width.name().into())),
        ]),
    )?;
    let items: Array = items
        .iter()
        .map(|item| JsValue::from(item.as_str()))
        .collect();
    format(&made, &Array::of1(&items))
}
