//! `kiln:dates`: dates and times in IANA time zones over `jiff`, with the
//! zone database compiled in (never the host's), so a run answers the same
//! natively and in the browser.
//!
//! Every export takes a date as a JavaScript `Date`, epoch milliseconds, or
//! text in ISO 8601 / RFC 9557, and answers RFC 9557 text with offset and
//! zone (`2026-03-08T09:30:00-04:00[America/New_York]`), so a zone survives
//! from one call to the next. How a value meets the `zone` option:
//!
//! - text naming its zone in brackets keeps it, unless `zone` is given, which
//!   shows the same instant there; an offset the zone does not have at that
//!   wall time is corrected, the wall time kept;
//! - an instant without a zone (a `Date`, a number, text ending in `Z` or an
//!   offset) is shown in `zone`, UTC by default;
//! - a civil date or date-time (`2026-03-08`, `2026-03-08T09:30`) is that
//!   wall time in `zone`; a wall time a DST change skips moves forward, one
//!   it repeats is the earlier.

use boa_engine::object::builtins::JsDate;
use boa_engine::{Context, JsNativeError, JsResult, JsString, JsValue};
use jiff::civil::DateTime;
use jiff::fmt::strtime;
use jiff::fmt::temporal::DateTimeParser;
use jiff::tz::{OffsetConflict, TimeZone, TimeZoneDatabase};
use jiff::{
    RoundMode, SignedDuration, Span, Timestamp, Unit, ZonedDateTime, ZonedDateTimeDifference,
};
use serde_json::{Map, Value};

use super::options;
use crate::stdlib::{argument, string_argument};

/// The most characters of a `format` or `parse` pattern: a pattern has no
/// need of more, and each directive can print dozens of characters.
const MAX_PATTERN_CHARS: usize = 1_000;

/// Reads RFC 9557 and ISO 8601 text; a stale offset yields to the zone.
static PARSER: DateTimeParser = DateTimeParser::new().offset_conflict(OffsetConflict::PreferOffset);

/// The zone database compiled in. Never the global one: with other features
/// of `jiff` turned on elsewhere in a build, that could be the host's
/// `/usr/share/zoneinfo`, and a run would answer differently natively.
fn database() -> TimeZoneDatabase {
    TimeZoneDatabase::bundled()
}

/// The units of `add` and `difference`, largest first.
const SPAN_UNITS: [&str; 8] = [
    "years",
    "months",
    "weeks",
    "days",
    "hours",
    "minutes",
    "seconds",
    "milliseconds",
];

/// The units of `startOf` and `endOf`.
const BOUNDARY_UNITS: [&str; 7] = ["year", "month", "week", "day", "hour", "minute", "second"];

/// `parse(text, {zone, format})`.
pub(super) fn parse(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let text = string_argument(args, 0, context)?;
    let options = options(args, 1, context)?;
    let zone = zone_option(&options, "kiln:dates parse")?;
    let zoned = match options.get("format") {
        None | Some(Value::Null) => from_text(&text, zone.as_ref(), "kiln:dates parse")?,
        Some(Value::String(format)) => {
            check_pattern(format, "kiln:dates parse")?;
            from_pattern(&text, format, zone.as_ref())?
        }
        Some(other) => {
            return Err(JsNativeError::typ()
                .with_message(format!(
                    "kiln:dates parse: `format` is a strftime pattern such as \"%d/%m/%Y %H:%M\"; got {other}"
                ))
                .into());
        }
    };
    Ok(answer(&zoned))
}

/// `format(date, pattern, {zone})`: strftime text, or RFC 9557 without a
/// pattern.
pub(super) fn format(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let options = options(args, 2, context)?;
    let zone = zone_option(&options, "kiln:dates format")?;
    let zoned = date_argument(args, 0, zone.as_ref(), "kiln:dates format", context)?;
    let pattern = argument(args, 1);
    if pattern.is_undefined() || pattern.is_null() {
        return Ok(answer(&zoned));
    }
    let pattern = string_argument(args, 1, context)?;
    check_pattern(&pattern, "kiln:dates format")?;
    let text = strtime::format(pattern.as_bytes(), &zoned).map_err(|error| {
        JsNativeError::syntax().with_message(format!(
            "kiln:dates format: cannot format with `{pattern}`: {error}"
        ))
    })?;
    Ok(JsString::from(text).into())
}

/// `add(date, {years, months, weeks, days, hours, minutes, seconds,
/// milliseconds}, {zone})`: years and months first, then weeks and days
/// (each on the calendar, so a day across a DST change is 23 or 25 hours
/// and Jan 31 + 1 month is Feb 28 or 29), then the exact time.
pub(super) fn add(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let amounts = options(args, 1, context)?;
    let options = options(args, 2, context)?;
    let zone = zone_option(&options, "kiln:dates add")?;
    let zoned = date_argument(args, 0, zone.as_ref(), "kiln:dates add", context)?;
    let mut amount = [0_i64; 8];
    for (key, value) in &amounts {
        let Some(index) = SPAN_UNITS.iter().position(|unit| unit == key) else {
            return Err(JsNativeError::range()
                .with_message(format!(
                    "kiln:dates add: no unit `{key}`; the units are {}",
                    SPAN_UNITS.join(", ")
                ))
                .into());
        };
        amount[index] = whole_number(value, key)?;
    }
    let [
        years,
        months,
        weeks,
        days,
        hours,
        minutes,
        seconds,
        milliseconds,
    ] = amount;
    let out_of_range = || {
        JsNativeError::range().with_message(
            "kiln:dates add: the result is outside the years -9999 to 9999 a date may have",
        )
    };
    let months = years
        .checked_mul(12)
        .and_then(|from_years| from_years.checked_add(months))
        .ok_or_else(out_of_range)?;
    let days = weeks
        .checked_mul(7)
        .and_then(|from_weeks| from_weeks.checked_add(days))
        .ok_or_else(out_of_range)?;
    let time = [
        SignedDuration::try_from_hours(hours),
        SignedDuration::try_from_mins(minutes),
        Some(SignedDuration::from_secs(seconds)),
        Some(SignedDuration::from_millis(milliseconds)),
    ]
    .into_iter()
    .try_fold(SignedDuration::ZERO, |total, part| total.checked_add(part?))
    .ok_or_else(out_of_range)?;
    let mut result = zoned;
    if months != 0 {
        let span = Span::new().try_months(months).map_err(|_| out_of_range())?;
        result = result.checked_add(span).map_err(|_| out_of_range())?;
    }
    if days != 0 {
        let span = Span::new().try_days(days).map_err(|_| out_of_range())?;
        result = result.checked_add(span).map_err(|_| out_of_range())?;
    }
    if !time.is_zero() {
        result = result.checked_add(time).map_err(|_| out_of_range())?;
    }
    Ok(answer(&result))
}

/// `difference(a, b, {unit = "days", zone})`: `a - b` in whole units,
/// truncated toward zero; years to days on the calendar of `zone` (or `a`'s
/// zone), hours and smaller exact.
pub(super) fn difference(
    _: &JsValue,
    args: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    let options = options(args, 2, context)?;
    let zone = zone_option(&options, "kiln:dates difference")?;
    let a = date_argument(args, 0, zone.as_ref(), "kiln:dates difference", context)?;
    // `b` in `a`'s zone, whose calendar counts the days.
    let b = date_argument(
        args,
        1,
        Some(a.time_zone()),
        "kiln:dates difference",
        context,
    )?;
    let unit = match options.get("unit") {
        None | Some(Value::Null) => "days".to_owned(),
        Some(Value::String(unit)) => unit.clone(),
        Some(other) => {
            return Err(
                unknown_unit(&other.to_string(), "kiln:dates difference", &SPAN_UNITS).into(),
            );
        }
    };
    let exact = a.duration_since(&b);
    let count: i64 = match plural(&unit) {
        "hours" => exact.as_hours(),
        "minutes" => exact.as_mins(),
        "seconds" => exact.as_secs(),
        "milliseconds" => i64::try_from(exact.as_millis()).unwrap_or(i64::MAX),
        calendar => {
            let unit = match calendar {
                "years" => Unit::Year,
                "months" => Unit::Month,
                "weeks" => Unit::Week,
                "days" => Unit::Day,
                _ => return Err(unknown_unit(&unit, "kiln:dates difference", &SPAN_UNITS).into()),
            };
            let span = a
                .since(
                    ZonedDateTimeDifference::new(&b)
                        .largest(unit)
                        .smallest(unit)
                        .mode(RoundMode::Trunc),
                )
                .map_err(|error| {
                    JsNativeError::range().with_message(format!("kiln:dates difference: {error}"))
                })?;
            match unit {
                Unit::Year => i64::from(span.get_years()),
                Unit::Month => i64::from(span.get_months()),
                Unit::Week => i64::from(span.get_weeks()),
                _ => i64::from(span.get_days()),
            }
        }
    };
    #[expect(
        clippy::cast_precision_loss,
        reason = "the most milliseconds between two dates, about 6e17, is printed as JavaScript's number would hold it"
    )]
    Ok(JsValue::from(count as f64))
}

/// `startOf(date, unit, {zone})`: the first instant of the year, month, week
/// (from Monday), day, hour, minute or second `date` falls in.
pub(super) fn start_of(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let (zoned, unit) = boundary_arguments(args, "kiln:dates startOf", context)?;
    Ok(answer(
        &start(&zoned, unit).map_err(|error| boundary_error("startOf", &error))?,
    ))
}

/// `endOf(date, unit, {zone})`: the last millisecond of that unit.
pub(super) fn end_of(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let (zoned, unit) = boundary_arguments(args, "kiln:dates endOf", context)?;
    let end = (|| {
        let first = start(&zoned, unit)?;
        let next = match unit {
            Unit::Year => first.checked_add(Span::new().years(1))?.start_of_day()?,
            Unit::Month => first.checked_add(Span::new().months(1))?.start_of_day()?,
            Unit::Week => first.checked_add(Span::new().weeks(1))?.start_of_day()?,
            Unit::Day => first.checked_add(Span::new().days(1))?.start_of_day()?,
            Unit::Hour => first.checked_add(SignedDuration::from_hours(1))?,
            Unit::Minute => first.checked_add(SignedDuration::from_mins(1))?,
            _ => first.checked_add(SignedDuration::from_secs(1))?,
        };
        next.checked_sub(SignedDuration::from_millis(1))
    })()
    .map_err(|error| boundary_error("endOf", &error))?;
    Ok(answer(&end))
}

/// `toZone(date, zone)`: the same instant in `zone`.
pub(super) fn to_zone(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let name = string_argument(args, 1, context)?;
    let zone = time_zone(&name, "kiln:dates toZone")?;
    let zoned = date_argument(args, 0, Some(&zone), "kiln:dates toZone", context)?;
    Ok(answer(&zoned))
}

/// `toDate(date)`: a JavaScript `Date` of the same instant (to the
/// millisecond).
pub(super) fn to_date(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let zoned = date_argument(args, 0, None, "kiln:dates toDate", context)?;
    #[expect(
        clippy::cast_precision_loss,
        reason = "epoch milliseconds of years -9999 to 9999 are below 2^53, exact in a number"
    )]
    let milliseconds = zoned.timestamp().as_millisecond() as f64;
    let constructor = context.intrinsics().constructors().date().constructor();
    Ok(constructor
        .construct(&[JsValue::from(milliseconds)], None, context)?
        .into())
}

/// The answer for `zoned`: RFC 9557 text.
fn answer(zoned: &ZonedDateTime) -> JsValue {
    JsString::from(zoned.to_string()).into()
}

/// Argument `index` as a date (see the module's doc for `zone`).
pub(crate) fn date_argument(
    args: &[JsValue],
    index: usize,
    zone: Option<&TimeZone>,
    what: &str,
    context: &mut Context,
) -> JsResult<ZonedDateTime> {
    let value = argument(args, index);
    if let Some(date) = value
        .as_object()
        .and_then(|object| JsDate::from_object(object.clone()).ok())
    {
        let time = date.get_time(context)?.to_number(context)?;
        if time.is_nan() {
            return Err(JsNativeError::range()
                .with_message(format!("{what}: the Date is an Invalid Date"))
                .into());
        }
        return from_milliseconds(time, zone, what);
    }
    if let Some(number) = value.as_number() {
        return from_milliseconds(number, zone, what);
    }
    if value.is_string() {
        let text = string_argument(args, index, context)?;
        return from_text(&text, zone, what);
    }
    Err(JsNativeError::typ()
        .with_message(format!(
            "{what} takes a date as a Date, epoch milliseconds or ISO 8601 text such as \"2026-03-08T09:30:00Z\"; got {}",
            value.type_of()
        ))
        .into())
}

/// Epoch milliseconds, shown in `zone` (UTC by default).
fn from_milliseconds(
    milliseconds: f64,
    zone: Option<&TimeZone>,
    what: &str,
) -> JsResult<ZonedDateTime> {
    let outside = || {
        JsNativeError::range().with_message(format!(
            "{what}: {milliseconds} milliseconds is outside the years -9999 to 9999 a date may have"
        ))
    };
    // About 2.5e14 milliseconds reach the year 9999: anything past 1e16 is
    // far outside, and inside it the conversion to nanoseconds is exact
    // enough.
    if !milliseconds.is_finite() || milliseconds.abs() > 1e16 {
        return Err(outside().into());
    }
    #[expect(
        clippy::cast_possible_truncation,
        reason = "bounded above to 1e22 nanoseconds, well inside i128"
    )]
    let nanoseconds = (milliseconds * 1e6).round() as i128;
    let timestamp = Timestamp::from_nanosecond(nanoseconds).map_err(|_| outside())?;
    Ok(timestamp.to_zoned_datetime(zone.cloned().unwrap_or(TimeZone::UTC)))
}

/// ISO 8601 / RFC 9557 text (see the module's doc for `zone`).
fn from_text(text: &str, zone: Option<&TimeZone>, what: &str) -> JsResult<ZonedDateTime> {
    let text = text.trim();
    let unreadable = |error: jiff::Error| {
        JsNativeError::syntax().with_message(format!(
            "{what}: `{text}` is not an ISO 8601 date such as \"2026-03-08\", \"2026-03-08T09:30:00Z\" or \"2026-03-08T09:30:00-04:00[America/New_York]\": {error}"
        ))
    };
    if text.contains('[') {
        let zoned = PARSER
            .parse_zoned_datetime_with(&database(), text)
            .map_err(unreadable)?;
        return Ok(match zone {
            Some(zone) => zoned.with_time_zone(zone.clone()),
            None => zoned,
        });
    }
    let zone = zone.cloned().unwrap_or(TimeZone::UTC);
    if let Ok(timestamp) = PARSER.parse_timestamp(text) {
        return Ok(timestamp.to_zoned_datetime(zone));
    }
    let civil: DateTime = PARSER.parse_datetime(text).map_err(unreadable)?;
    civil.to_zoned_datetime(zone).map_err(|error| {
        JsNativeError::range()
            .with_message(format!("{what}: `{text}`: {error}"))
            .into()
    })
}

/// `text` read by the strftime `format` (see the module's doc for `zone`).
fn from_pattern(text: &str, format: &str, zone: Option<&TimeZone>) -> JsResult<ZonedDateTime> {
    let failed = |error: jiff::Error| {
        JsNativeError::syntax().with_message(format!(
            "kiln:dates parse: `{text}` does not match the format `{format}`: {error}"
        ))
    };
    let parsed = strtime::parse(format.as_bytes(), text.as_bytes()).map_err(failed)?;
    if parsed.iana_time_zone().is_some() {
        let zoned = parsed.to_zoned_datetime_with(&database()).map_err(failed)?;
        return Ok(match zone {
            Some(zone) => zoned.with_time_zone(zone.clone()),
            None => zoned,
        });
    }
    let zone = zone.cloned().unwrap_or(TimeZone::UTC);
    if parsed.offset().is_some() || parsed.timestamp().is_some() {
        let instant = parsed.to_zoned_datetime_with(&database()).map_err(failed)?;
        return Ok(instant.timestamp().to_zoned_datetime(zone));
    }
    parsed
        .to_datetime()
        .and_then(|civil| civil.to_zoned_datetime(zone))
        .map_err(|error| failed(error).into())
}

/// The `zone` option, when given.
fn zone_option(options: &Map<String, Value>, what: &str) -> JsResult<Option<TimeZone>> {
    match options.get("zone") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(name)) => time_zone(name, what).map(Some),
        Some(other) => Err(JsNativeError::typ()
            .with_message(format!(
                "{what}: `zone` is a time zone's name such as \"America/New_York\"; got {other}"
            ))
            .into()),
    }
}

/// The zone `name`: an IANA name (`Europe/Berlin`, `UTC`) or a fixed offset
/// (`+05:30`).
pub(crate) fn time_zone(name: &str, what: &str) -> JsResult<TimeZone> {
    zone_named(name).ok_or_else(|| {
        JsNativeError::range()
            .with_message(format!("{what}: {}", no_zone(name)))
            .into()
    })
}

/// The zone `name`, from the database compiled in: what `kiln:dates` and
/// `format.date` read on every host.
pub(crate) fn zone_named(name: &str) -> Option<TimeZone> {
    PARSER.parse_time_zone_with(&database(), name.trim()).ok()
}

/// Why there is no zone `name`.
pub(crate) fn no_zone(name: &str) -> String {
    format!(
        "no time zone `{name}`; a zone is an IANA name such as \"America/New_York\", \"Europe/Berlin\" or \"UTC\", or an offset such as \"+05:30\""
    )
}

fn check_pattern(pattern: &str, what: &str) -> JsResult<()> {
    let length = pattern.chars().count();
    if length > MAX_PATTERN_CHARS {
        return Err(JsNativeError::range()
            .with_message(format!(
                "{what}: the pattern is {length} characters, more than the {MAX_PATTERN_CHARS} a pattern may have"
            ))
            .into());
    }
    Ok(())
}

/// An amount of `add`: a whole number.
fn whole_number(value: &Value, unit: &str) -> JsResult<i64> {
    let not_whole = || {
        JsNativeError::range().with_message(format!(
            "kiln:dates add: `{unit}` must be a whole number; got {value}"
        ))
    };
    match value {
        Value::Null => Ok(0),
        Value::Number(number) => match number.as_i64() {
            Some(whole) => Ok(whole),
            None => number
                .as_f64()
                .filter(|float| float.fract() == 0.0 && float.abs() < 9e15)
                .map(|float| {
                    #[expect(
                        clippy::cast_possible_truncation,
                        reason = "a whole number below 9e15 converts exactly"
                    )]
                    let whole = float as i64;
                    whole
                })
                .ok_or_else(|| not_whole().into()),
        },
        _ => Err(not_whole().into()),
    }
}

/// The unit's plural name (`day` and `days` alike are `days`).
fn plural(unit: &str) -> &str {
    match unit {
        "year" => "years",
        "month" => "months",
        "week" => "weeks",
        "day" => "days",
        "hour" => "hours",
        "minute" => "minutes",
        "second" => "seconds",
        "millisecond" => "milliseconds",
        other => other,
    }
}

fn unknown_unit(unit: &str, what: &str, units: &[&str]) -> JsNativeError {
    JsNativeError::range().with_message(format!(
        "{what}: no unit `{unit}`; the units are {}",
        units.join(", ")
    ))
}

/// The date and the unit of `startOf` and `endOf`.
fn boundary_arguments(
    args: &[JsValue],
    what: &str,
    context: &mut Context,
) -> JsResult<(ZonedDateTime, Unit)> {
    let unit = string_argument(args, 1, context)?;
    let options = options(args, 2, context)?;
    let zone = zone_option(&options, what)?;
    let zoned = date_argument(args, 0, zone.as_ref(), what, context)?;
    let unit = match plural(&unit) {
        "years" => Unit::Year,
        "months" => Unit::Month,
        "weeks" => Unit::Week,
        "days" => Unit::Day,
        "hours" => Unit::Hour,
        "minutes" => Unit::Minute,
        "seconds" => Unit::Second,
        _ => return Err(unknown_unit(&unit, what, &BOUNDARY_UNITS).into()),
    };
    Ok((zoned, unit))
}

/// The first instant of the `unit` that `zoned` falls in.
fn start(zoned: &ZonedDateTime, unit: Unit) -> Result<ZonedDateTime, jiff::Error> {
    match unit {
        Unit::Year => zoned.first_of_year()?.start_of_day(),
        Unit::Month => zoned.first_of_month()?.start_of_day(),
        Unit::Week => {
            let back = zoned.weekday().to_monday_zero_offset();
            zoned.checked_sub(Span::new().days(back))?.start_of_day()
        }
        Unit::Day => zoned.start_of_day(),
        Unit::Hour => zoned
            .with()
            .minute(0)
            .second(0)
            .subsec_nanosecond(0)
            .build(),
        Unit::Minute => zoned.with().second(0).subsec_nanosecond(0).build(),
        _ => zoned.with().subsec_nanosecond(0).build(),
    }
}

fn boundary_error(what: &str, error: &jiff::Error) -> JsNativeError {
    JsNativeError::range().with_message(format!("{what}: {error}"))
}
