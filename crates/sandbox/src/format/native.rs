//! `format.*` natively, over ICU4X's compiled CLDR data: the answers the
//! browser's `Intl` gives for the same call, so a program formats the same in
//! the CLI as in the page.
//!
//! Each function does what one `Intl` constructor and its `format` do (named
//! on the function). ICU4X's formatters do most of it. Where a formatter
//! cannot take an `Intl` option (a currency's fraction digits and grouping,
//! NaN and infinity), the text is put together here from the same CLDR data
//! that formatter reads, the way UTS #35 says, and the way ICU4X's own
//! formatter does.

use fixed_decimal::{Decimal, Sign, SignedRoundingMode, UnsignedRoundingMode};
use icu_calendar::AnyCalendarKind;
use icu_datetime::DateTimeFormatter;
use icu_datetime::fieldsets::builder::{BuilderError, DateFields, FieldSetBuilder};
use icu_datetime::input::{Date, DateTime, Time};
use icu_datetime::options::{Length as FieldLength, TimePrecision, YearStyle};
use icu_datetime::provider::names::DatetimeNamesMonthGregorianV1;
use icu_datetime::provider::semantic_skeletons::marker_attrs;
use icu_decimal::DecimalFormatter;
use icu_decimal::options::{DecimalFormatterOptions, GroupingStrategy};
use icu_decimal::provider::{DecimalDigitsV1, DecimalSymbolsV1};
use icu_experimental::dimension::currency::CurrencyType;
use icu_experimental::dimension::provider::currency::essentials::CurrencyEssentialsV1;
use icu_experimental::dimension::provider::currency::fractions::CurrencyFractionsV1;
use icu_experimental::dimension::provider::currency::symbols::CurrencySymbolsV1;
use icu_experimental::dimension::provider::percent::PercentEssentialsV1;
use icu_experimental::relativetime::RelativeTimeFormatter;
use icu_experimental::relativetime::options::{Numeric, RelativeTimeFormatterOptions};
use icu_list::ListFormatter;
use icu_list::options::{ListFormatterOptions, ListLength};
use icu_locale_core::Locale;
use icu_provider::prelude::*;
use writeable::Writeable;

use super::options::{
    DateOptions, Grouping, Length, ListKind, ListOptions, NumberOptions, NumberStyle,
    RelativeTimeOptions, TimeUnit, Width,
};

/// `value` as `new Intl.NumberFormat(locale, {style, currency,
/// minimumFractionDigits, maximumFractionDigits, useGrouping}).format(value)`
/// gives it.
pub(crate) fn number(value: f64, options: &NumberOptions) -> Result<String, String> {
    let locale = supported_locale(&options.locale)?;
    let currency = match &options.style {
        NumberStyle::Currency(code) => Some(Currency::load(code, &locale)?),
        NumberStyle::Decimal | NumberStyle::Percent => None,
    };
    let digits = FractionDigits::resolve(options, currency.as_ref());
    let symbols = Symbols {
        always_group: options.grouping == Grouping::Always,
    };
    let mut decimal_options = DecimalFormatterOptions::default();
    decimal_options.grouping_strategy = Some(match options.grouping {
        Grouping::Auto | Grouping::Always => GroupingStrategy::Auto,
        Grouping::Min2 => GroupingStrategy::Min2,
        Grouping::Never => GroupingStrategy::Never,
    });
    let formatter = DecimalFormatter::try_new_unstable(&symbols, (&locale).into(), decimal_options)
        .map_err(|error| no_data("numbers", &options.locale, &error))?;

    let negative = value.is_sign_negative() && !value.is_nan();
    let magnitude = if value.is_nan() {
        // CLDR's `nan` and `infinity` symbols; ICU4X's decimals cannot hold
        // either, and has no data for them.
        "NaN".to_owned()
    } else if value.is_infinite() {
        "∞".to_owned()
    } else {
        let mut decimal = finite_decimal(value)?;
        if options.style == NumberStyle::Percent {
            decimal.multiply_pow10(2);
            // 0.256 was "0.256": its leading zero now stands for hundreds.
            decimal.absolute.trim_start();
        }
        digits.apply(&mut decimal);
        formatter
            .format(&Decimal::new(Sign::None, decimal.absolute))
            .write_to_string()
            .into_owned()
    };

    let symbols = load::<DecimalSymbolsV1, _>(&icu_decimal::provider::Baked, &locale, None)
        .map_err(|error| no_data("numbers", &options.locale, &error))?;
    let strings = &symbols.get().strings;
    let (minus_prefix, minus_suffix) = if negative {
        (strings.minus_sign_prefix(), strings.minus_sign_suffix())
    } else {
        ("", "")
    };
    match (currency, &options.style) {
        (Some(currency), _) => currency
            .write(&magnitude, negative, (minus_prefix, minus_suffix))
            .map_err(|error| no_data("currencies", &options.locale, &error)),
        (None, NumberStyle::Percent) => {
            let percent =
                load::<PercentEssentialsV1, _>(&icu_experimental::provider::Baked, &locale, None)
                    .map_err(|error| no_data("percentages", &options.locale, &error))?;
            let percent = percent.get();
            let written = if negative {
                percent
                    .signed_pattern
                    .interpolate((magnitude.as_str(), &*percent.minus_sign))
                    .write_to_string()
                    .into_owned()
            } else {
                percent
                    .unsigned_pattern
                    .interpolate([magnitude.as_str()])
                    .write_to_string()
                    .into_owned()
            };
            Ok(written)
        }
        (None, _) => Ok(format!("{minus_prefix}{magnitude}{minus_suffix}")),
    }
}

/// The instant `epoch_ms` (finite, within ±8.64e15) as `new
/// Intl.DateTimeFormat(locale, {dateStyle, timeStyle, timeZone}).format(new
/// Date(epoch_ms))` gives it.
pub(crate) fn date(epoch_ms: f64, options: &DateOptions) -> Result<String, String> {
    let locale = supported_locale(&options.locale)?;
    if !epoch_ms.is_finite() || epoch_ms.abs() > MAX_EPOCH_MS {
        return Err(format!(
            "{epoch_ms} is not a time a date can hold (milliseconds since 1970 within ±8.64e15)"
        ));
    }
    let zone = time_zone(&options.time_zone)?;
    // A Date's time value is whole milliseconds (ECMA-262 TimeClip).
    let civil = civil_date_time(epoch_ms.trunc() as i64, &zone)?;

    let mut builder = FieldSetBuilder::new();
    builder.date_fields = options.date_style.map(|style| match style {
        Length::Full => DateFields::YMDE,
        Length::Long | Length::Medium | Length::Short => DateFields::YMD,
    });
    builder.time_precision = options.time_style.map(|style| match style {
        Length::Full | Length::Long | Length::Medium => TimePrecision::Second,
        Length::Short => TimePrecision::Minute,
    });
    // ICU4X has one length for date and time together; the date's length
    // picks the pattern that joins them, as it does in `Intl`.
    builder.length = options
        .date_style
        .or(options.time_style)
        .map(|style| match style {
            Length::Full | Length::Long => FieldLength::Long,
            Length::Medium => FieldLength::Medium,
            Length::Short => FieldLength::Short,
        });
    // CLDR's Gregorian date patterns, which `Intl` formats with, name no
    // era ("Mar 4, 5", "January 1, 2" for 2 BC); ICU4X adds one to years
    // before 1000 unless told not to. Other calendars keep theirs (令和8年).
    let calendar = AnyCalendarKind::try_new((&locale).into()).map_err(|error| {
        format!(
            "ICU4X has no calendar data for `{}`: {error}",
            options.locale
        )
    })?;
    if calendar == AnyCalendarKind::Gregorian && options.date_style.is_some() {
        builder.year_style = Some(YearStyle::NoEra);
    }
    let field_set = builder
        .build_composite_datetime()
        .map_err(|error| match error {
            BuilderError::MissingDateFields => {
                "a date needs a dateStyle, a timeStyle or both".to_owned()
            }
            other => format!("ICU4X cannot format these date options: {other}"),
        })?;
    let formatter = DateTimeFormatter::try_new((&locale).into(), field_set)
        .map_err(|error| format!("ICU4X has no date data for `{}`: {error}", options.locale))?;
    // V8 (and SpiderMonkey, and JavaScriptCore) turn the narrow no-break
    // and thin spaces CLDR 42 put into times ("3:04\u{202f}PM") back into
    // plain spaces, for the pages that parse what they print.
    Ok(formatter
        .format(&civil)
        .write_to_string()
        .replace(['\u{202f}', '\u{2009}'], " "))
}

/// As `new Intl.RelativeTimeFormat(locale, {numeric: auto ? "auto" :
/// "always", style: width}).format(value, unit)`.
pub(crate) fn relative_time(
    value: f64,
    unit: TimeUnit,
    options: &RelativeTimeOptions,
) -> Result<String, String> {
    if !value.is_finite() {
        let value = if value.is_nan() {
            "NaN"
        } else if value > 0.0 {
            "Infinity"
        } else {
            "-Infinity"
        };
        return Err(format!(
            "a relative time needs a finite number of {}s, not {value}",
            unit.name()
        ));
    }
    let locale = supported_locale(&options.locale)?;
    let numeric = relative_time_formatter(&locale, unit, options.width, Numeric::Always)
        .map_err(|error| no_data("relative times", &options.locale, &error))?;
    // `Intl`'s NumberFormat inside: at most three fraction digits.
    let mut decimal = finite_decimal(value)?;
    FractionDigits { min: 0, max: 3 }.apply(&mut decimal);
    if options.auto {
        // ICU4C (and so Chromium) says the word ("yesterday", "next year")
        // for any value within 0.005 of -2, -1, 0, 1 or 2, -0 included, and
        // the number when the locale has no word for that offset.
        let hundredths = (value * 100.0).round();
        if value.abs() < 2.1 && hundredths % 100.0 == 0.0 {
            let offset = Decimal::from((hundredths / 100.0) as i8);
            let auto = relative_time_formatter(&locale, unit, options.width, Numeric::Auto)
                .map_err(|error| no_data("relative times", &options.locale, &error))?;
            let word = auto.format(offset.clone()).write_to_string().into_owned();
            if word != numeric.format(offset).write_to_string() {
                return Ok(word);
            }
        }
    }
    Ok(numeric.format(decimal).write_to_string().into_owned())
}

/// As `new Intl.ListFormat(locale, {type: kind, style: width}).format(items)`.
pub(crate) fn list(items: &[String], options: &ListOptions) -> Result<String, String> {
    let locale = supported_locale(&options.locale)?;
    let list_options = ListFormatterOptions::default().with_length(match options.width {
        Width::Long => ListLength::Wide,
        Width::Short => ListLength::Short,
        Width::Narrow => ListLength::Narrow,
    });
    let prefs = (&locale).into();
    let formatter = match options.kind {
        ListKind::Conjunction => ListFormatter::try_new_and(prefs, list_options),
        ListKind::Disjunction => ListFormatter::try_new_or(prefs, list_options),
        ListKind::Unit => ListFormatter::try_new_unit(prefs, list_options),
    }
    .map_err(|error| no_data("lists", &options.locale, &error))?;
    Ok(formatter
        .format(items.iter().map(String::as_str))
        .write_to_string()
        .into_owned())
}

/// The largest distance from 1970 a JavaScript `Date` holds, in milliseconds.
const MAX_EPOCH_MS: f64 = 8.64e15;

/// `tag` as a locale, when it is a well-formed BCP 47 tag whose language
/// ICU4X has data for.
///
/// A tag falls back the way ICU's data does (`de-CH` has its own, `en-XX`
/// is `en`). A language with no data at all would fall back to CLDR's root
/// locale, whose answers no browser gives (Chromium uses its own default
/// locale instead), so it is refused.
fn supported_locale(tag: &str) -> Result<Locale, String> {
    // ICU4X also reads `en_US`; BCP 47, and so `Intl`, does not.
    let parsed = if tag.contains('_') {
        None
    } else {
        Locale::try_from_str(tag).ok()
    };
    let Some(locale) = parsed else {
        return Err(format!(
            "`{tag}` is not a BCP 47 locale tag such as \"en\", \"de-CH\" or \"zh-Hant\""
        ));
    };
    let unsupported = || format!("`{tag}` is not a locale Kiln can format for");
    if locale.id.language.is_unknown() {
        return Err(unsupported());
    }
    // A language CLDR has data for names the months itself; the root
    // locale calls them "M01" to "M12". (Number data cannot tell: ICU4X
    // stores no copy of `en`'s, which is root's.)
    let response = DataProvider::<DatetimeNamesMonthGregorianV1>::load(
        &icu_datetime::provider::Baked,
        DataRequest {
            id: DataIdentifierBorrowed::for_marker_attributes_and_locale(
                marker_attrs::WIDE,
                &DataLocale::from(&locale),
            ),
            ..Default::default()
        },
    )
    .map_err(|_| unsupported())?;
    if response
        .metadata
        .locale
        .is_some_and(|found| found.language.is_unknown())
    {
        return Err(unsupported());
    }
    Ok(locale)
}

/// The sentence for a locale whose data ICU4X failed to load.
fn no_data(what: &str, tag: &str, error: &impl std::fmt::Display) -> String {
    format!("ICU4X has no data to format {what} for `{tag}`: {error}")
}

/// Loads `M`'s data for `locale` (falling back as ICU does), with `attributes`
/// when the marker is keyed by them.
fn load<M, P>(
    provider: &P,
    locale: &Locale,
    attributes: Option<&DataMarkerAttributes>,
) -> Result<DataPayload<M>, DataError>
where
    M: DataMarker,
    P: DataProvider<M> + ?Sized,
{
    let locale = DataLocale::from(locale);
    let id = match attributes {
        Some(attributes) => {
            DataIdentifierBorrowed::for_marker_attributes_and_locale(attributes, &locale)
        }
        None => DataIdentifierBorrowed::for_locale(&locale),
    };
    Ok(provider
        .load(DataRequest {
            id,
            ..Default::default()
        })?
        .payload)
}

/// A finite `value` as the shortest decimal that reads back as it, as
/// ECMA-262's Number::toString and ICU read a double (1.005 is "1.005", not
/// 1.00499999999999989…), keeping the sign of -0.
fn finite_decimal(value: f64) -> Result<Decimal, String> {
    // Rust's `Display` for f64 is that shortest round-trip form, without an
    // exponent.
    Decimal::try_from_str(&value.to_string())
        .map_err(|error| format!("the number {value} cannot be formatted: {error}"))
}

/// How many fraction digits a number shows, resolved from the options and
/// the style's defaults as `Intl.NumberFormat` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FractionDigits {
    min: u8,
    max: u8,
}

impl FractionDigits {
    /// ECMA-402 SetNumberFormatDigitOptions: a style's default on the side
    /// not given, moved so that min ≤ max.
    fn resolve(options: &NumberOptions, currency: Option<&Currency>) -> Self {
        let (default_min, default_max) = match (currency, &options.style) {
            (Some(currency), _) => (currency.digits, currency.digits),
            (None, NumberStyle::Percent) => (0, 0),
            (None, _) => (0, 3),
        };
        match (
            options.minimum_fraction_digits,
            options.maximum_fraction_digits,
        ) {
            (None, None) => Self {
                min: default_min,
                max: default_max,
            },
            (Some(min), None) => Self {
                min,
                max: default_max.max(min),
            },
            (None, Some(max)) => Self {
                min: default_min.min(max),
                max,
            },
            (Some(min), Some(max)) => Self {
                min: min.min(max),
                max,
            },
        }
    }

    /// Rounds `decimal` half away from zero (`Intl`'s "halfExpand") to `max`
    /// digits, drops trailing zeros, and pads to `min`.
    fn apply(self, decimal: &mut Decimal) {
        let max = -i16::from(self.max);
        decimal.round_with_mode(
            max,
            SignedRoundingMode::Unsigned(UnsignedRoundingMode::HalfExpand),
        );
        decimal.absolute.trim_end();
        decimal.absolute.pad_end(-i16::from(self.min));
    }
}

/// A currency in a locale: the CLDR data `Intl` formats it with.
struct Currency {
    code: CurrencyType,
    /// Its fraction digits (JPY 0, EUR 2, KWD 3).
    digits: u8,
    locale: Locale,
}

impl Currency {
    /// The currency `code`, three ASCII letters. A code CLDR does not know
    /// is no error, as in `Intl`: it is written as its code, with two
    /// digits.
    fn load(code: &str, locale: &Locale) -> Result<Self, String> {
        let invalid = || {
            format!(
                "the currency `{code}` is not an ISO 4217 code of three letters such as \"EUR\""
            )
        };
        if code.len() != 3 {
            return Err(invalid());
        }
        let code = CurrencyType::try_from_str(code).map_err(|_| invalid())?;
        let fractions = DataProvider::<CurrencyFractionsV1>::load(
            &icu_experimental::provider::Baked,
            DataRequest::default(),
        )
        .map_err(|error| format!("ICU4X has no currency digits: {error}"))?;
        Ok(Self {
            code,
            digits: fractions.payload.get().resolve(code).digits,
            locale: locale.clone(),
        })
    }

    /// The amount `magnitude` (already a localized number without its sign)
    /// in this currency: the locale's symbol or, without one, its ISO code,
    /// placed by the locale's currency pattern, which also says whether a
    /// space stands between them (UTS #35 "currency spacing").
    fn write(
        &self,
        magnitude: &str,
        negative: bool,
        minus: (&str, &str),
    ) -> Result<String, DataError> {
        let baked = &icu_experimental::provider::Baked;
        let mut attributes = Default::default();
        let attributes = CurrencySymbolsV1::make_attributes(
            self.code,
            CurrencySymbolsV1::SHORT,
            &mut attributes,
        );
        let symbol = load::<CurrencySymbolsV1, _>(baked, &self.locale, Some(attributes))
            .allow_identifier_not_found()?;
        let iso = self.code.iso_code();
        // A code is letters at both ends; the pattern for that puts a space
        // between it and the number ("CHF\u{a0}1,234.50").
        let (symbol, starts_with_letter, ends_with_letter) = match &symbol {
            Some(symbol) => {
                let symbol = symbol.get();
                (
                    symbol.as_str(),
                    symbol.starts_with_letter(),
                    symbol.ends_with_letter(),
                )
            }
            None => (iso.as_str(), true, true),
        };
        let essentials = load::<CurrencyEssentialsV1, _>(baked, &self.locale, None)?;
        let essentials = essentials.get();
        let (pattern, sign_outside) = pick(
            essentials.get_negative(starts_with_letter, ends_with_letter),
            essentials.get_positive(starts_with_letter, ends_with_letter),
            negative,
        );
        let text = pattern
            .interpolate((magnitude, symbol))
            .write_to_string()
            .into_owned();
        Ok(if sign_outside {
            format!("{}{text}{}", minus.0, minus.1)
        } else {
            text
        })
    }
}

/// The pattern for a `negative` amount or not, and whether the minus sign
/// still goes around it: a pattern of its own for negatives carries the
/// sign; otherwise UTS #35 puts the locale's minus sign before the positive
/// pattern.
fn pick<'a, P: ?Sized>(
    negative_pattern: Option<&'a P>,
    positive_pattern: &'a P,
    negative: bool,
) -> (&'a P, bool) {
    match negative_pattern {
        Some(pattern) if negative => (pattern, false),
        _ => (positive_pattern, negative),
    }
}

/// The locale's decimal symbols, with `Intl`'s meaning of grouping.
struct Symbols {
    /// `useGrouping: true`, which `Intl` reads as "always": a separator from
    /// 1,000 up, even where CLDR asks for two digits before the first one
    /// (es writes 1234 under the default "auto", "1.234" under "always").
    /// ICU4X's own `GroupingStrategy::Always` is its "auto", so the
    /// locale's minimum is set to one here, as ICU4C does for "always".
    always_group: bool,
}

impl DataProvider<DecimalSymbolsV1> for Symbols {
    fn load(&self, request: DataRequest) -> Result<DataResponse<DecimalSymbolsV1>, DataError> {
        let mut response = icu_decimal::provider::Baked.load(request)?;
        if self.always_group {
            response
                .payload
                .with_mut(|symbols: &mut icu_decimal::provider::DecimalSymbols<'_>| {
                    symbols.grouping_sizes.min_grouping = 1;
                });
        }
        Ok(response)
    }
}

impl DataProvider<DecimalDigitsV1> for Symbols {
    fn load(&self, request: DataRequest) -> Result<DataResponse<DecimalDigitsV1>, DataError> {
        icu_decimal::provider::Baked.load(request)
    }
}

/// The zone `name`: an IANA name (`Europe/Berlin`, `UTC`) or an offset
/// (`+05:30`), from the zone database compiled into the binary, the one
/// `kiln:dates` reads, so that every host agrees.
fn time_zone(name: &str) -> Result<jiff::tz::TimeZone, String> {
    crate::modules::zone_named(name).ok_or_else(|| crate::modules::no_zone(name))
}

/// The wall-clock date and time in `zone` at `epoch_ms`.
///
/// `jiff` knows years -9999 to 9999, a `Date` ±275,760: outside jiff's
/// range the zone's offset is read 400 years (one full cycle of the
/// Gregorian calendar's weekdays and leap years, so of any zone rule) at a
/// time closer.
fn civil_date_time(
    epoch_ms: i64,
    zone: &jiff::tz::TimeZone,
) -> Result<DateTime<icu_calendar::Iso>, String> {
    const MS_PER_DAY: i64 = 86_400_000;
    const CYCLE_MS: i64 = 146_097 * MS_PER_DAY;
    let (min, max) = (
        jiff::Timestamp::MIN.as_millisecond(),
        jiff::Timestamp::MAX.as_millisecond(),
    );
    let mut shifted = epoch_ms;
    while shifted < min {
        shifted += CYCLE_MS;
    }
    while shifted > max {
        shifted -= CYCLE_MS;
    }
    let instant = jiff::Timestamp::from_millisecond(shifted)
        .map_err(|error| format!("{epoch_ms} ms is out of range: {error}"))?;
    let offset_ms = i64::from(zone.to_offset(instant).seconds()) * 1000;
    let local_ms = epoch_ms + offset_ms;
    let days = local_ms.div_euclid(MS_PER_DAY);
    let ms_of_day = local_ms.rem_euclid(MS_PER_DAY);
    let epoch = Date::try_new_iso(1970, 1, 1).map_err(|error| error.to_string())?;
    let date = Date::from_rata_die(epoch.to_rata_die() + days, icu_calendar::Iso);
    let seconds = ms_of_day / 1000;
    let time = Time::try_new(
        (seconds / 3600) as u8,
        (seconds / 60 % 60) as u8,
        (seconds % 60) as u8,
        (ms_of_day % 1000) as u32 * 1_000_000,
    )
    .map_err(|error| error.to_string())?;
    Ok(DateTime { date, time })
}

/// The formatter for `unit` at `width`.
fn relative_time_formatter(
    locale: &Locale,
    unit: TimeUnit,
    width: Width,
    numeric: Numeric,
) -> Result<RelativeTimeFormatter, DataError> {
    let prefs = locale.into();
    let mut options = RelativeTimeFormatterOptions::default();
    options.numeric = numeric;
    type Constructor = fn(
        icu_experimental::relativetime::RelativeTimeFormatterPreferences,
        RelativeTimeFormatterOptions,
    ) -> Result<RelativeTimeFormatter, DataError>;
    let constructor: Constructor = match (width, unit) {
        (Width::Long, TimeUnit::Year) => RelativeTimeFormatter::try_new_long_year,
        (Width::Long, TimeUnit::Quarter) => RelativeTimeFormatter::try_new_long_quarter,
        (Width::Long, TimeUnit::Month) => RelativeTimeFormatter::try_new_long_month,
        (Width::Long, TimeUnit::Week) => RelativeTimeFormatter::try_new_long_week,
        (Width::Long, TimeUnit::Day) => RelativeTimeFormatter::try_new_long_day,
        (Width::Long, TimeUnit::Hour) => RelativeTimeFormatter::try_new_long_hour,
        (Width::Long, TimeUnit::Minute) => RelativeTimeFormatter::try_new_long_minute,
        (Width::Long, TimeUnit::Second) => RelativeTimeFormatter::try_new_long_second,
        (Width::Short, TimeUnit::Year) => RelativeTimeFormatter::try_new_short_year,
        (Width::Short, TimeUnit::Quarter) => RelativeTimeFormatter::try_new_short_quarter,
        (Width::Short, TimeUnit::Month) => RelativeTimeFormatter::try_new_short_month,
        (Width::Short, TimeUnit::Week) => RelativeTimeFormatter::try_new_short_week,
        (Width::Short, TimeUnit::Day) => RelativeTimeFormatter::try_new_short_day,
        (Width::Short, TimeUnit::Hour) => RelativeTimeFormatter::try_new_short_hour,
        (Width::Short, TimeUnit::Minute) => RelativeTimeFormatter::try_new_short_minute,
        (Width::Short, TimeUnit::Second) => RelativeTimeFormatter::try_new_short_second,
        (Width::Narrow, TimeUnit::Year) => RelativeTimeFormatter::try_new_narrow_year,
        (Width::Narrow, TimeUnit::Quarter) => RelativeTimeFormatter::try_new_narrow_quarter,
        (Width::Narrow, TimeUnit::Month) => RelativeTimeFormatter::try_new_narrow_month,
        (Width::Narrow, TimeUnit::Week) => RelativeTimeFormatter::try_new_narrow_week,
        (Width::Narrow, TimeUnit::Day) => RelativeTimeFormatter::try_new_narrow_day,
        (Width::Narrow, TimeUnit::Hour) => RelativeTimeFormatter::try_new_narrow_hour,
        (Width::Narrow, TimeUnit::Minute) => RelativeTimeFormatter::try_new_narrow_minute,
        (Width::Narrow, TimeUnit::Second) => RelativeTimeFormatter::try_new_narrow_second,
    };
    constructor(prefs, options)
}

#[cfg(test)]
mod tests {
    //! Golden cases: what headless Chromium 148's `Intl` answered for each
    //! call.
    //!
    //! A call is JavaScript, the expression that follows `new Intl.` (a
    //! browser runs it as `eval("new Intl." + call)`); the test reads the
    //! same text into the four functions' options. NumberFormat calls always
    //! pass `useGrouping`, as `format.number` does: `Intl`'s default when it
    //! is left out ("auto") is not one of `format.number`'s choices.

    use serde_json::Value;

    use super::*;

    /// `(call, Chromium's answer)`, which the native functions give too.
    #[rustfmt::skip]
    const CASES: &[(&str, &str)] = &[
        // Numbers: decimal (at most three fraction digits by default, halfExpand, -0, NaN, ∞, grouping).
        (r#"NumberFormat("en", {"style": "decimal", "useGrouping": true}).format(1234.5)"#, "1,234.5"),
        (r#"NumberFormat("en", {"style": "decimal", "useGrouping": true}).format(1234.5678)"#, "1,234.568"),
        (r#"NumberFormat("en", {"style": "decimal", "useGrouping": true}).format(0)"#, "0"),
        (r#"NumberFormat("en", {"style": "decimal", "useGrouping": true}).format(-0)"#, "-0"),
        (r#"NumberFormat("en", {"style": "decimal", "useGrouping": true}).format(-1234.5)"#, "-1,234.5"),
        (r#"NumberFormat("en", {"style": "decimal", "useGrouping": true}).format(NaN)"#, "NaN"),
        (r#"NumberFormat("en", {"style": "decimal", "useGrouping": true}).format(Infinity)"#, "∞"),
        (r#"NumberFormat("en", {"style": "decimal", "useGrouping": true}).format(-Infinity)"#, "-∞"),
        (r#"NumberFormat("en", {"style": "decimal", "useGrouping": true}).format(1e21)"#, "1,000,000,000,000,000,000,000"),
        (r#"NumberFormat("en", {"style": "decimal", "useGrouping": true}).format(1e-7)"#, "0"),
        (r#"NumberFormat("en", {"style": "decimal", "useGrouping": true}).format(-1e-7)"#, "-0"),
        (r#"NumberFormat("en", {"style": "decimal", "useGrouping": true}).format(0.30000000000000004)"#, "0.3"),
        (r#"NumberFormat("en", {"style": "decimal", "useGrouping": true}).format(123456789.12345)"#, "123,456,789.123"),
        (r#"NumberFormat("en", {"style": "decimal", "maximumFractionDigits": 2, "useGrouping": true}).format(1.005)"#, "1.01"),
        (r#"NumberFormat("en", {"style": "decimal", "maximumFractionDigits": 0, "useGrouping": true}).format(2.5)"#, "3"),
        (r#"NumberFormat("en", {"style": "decimal", "maximumFractionDigits": 0, "useGrouping": true}).format(-2.5)"#, "-3"),
        (r#"NumberFormat("en", {"style": "decimal", "minimumFractionDigits": 2, "useGrouping": true}).format(1.5)"#, "1.50"),
        (r#"NumberFormat("en", {"style": "decimal", "minimumFractionDigits": 2, "maximumFractionDigits": 4, "useGrouping": true}).format(1.5)"#, "1.50"),
        (r#"NumberFormat("en", {"style": "decimal", "useGrouping": false}).format(1234567.891)"#, "1234567.891"),
        (r#"NumberFormat("de", {"style": "decimal", "useGrouping": true}).format(1234567.891)"#, "1.234.567,891"),
        (r#"NumberFormat("fr", {"style": "decimal", "useGrouping": true}).format(1234567.891)"#, "1\u{202f}234\u{202f}567,891"),
        (r#"NumberFormat("es", {"style": "decimal", "useGrouping": true}).format(1234567.891)"#, "1.234.567,891"),
        (r#"NumberFormat("ja", {"style": "decimal", "useGrouping": true}).format(1234567.891)"#, "1,234,567.891"),
        (r#"NumberFormat("zh", {"style": "decimal", "useGrouping": true}).format(1234567.891)"#, "1,234,567.891"),
        (r#"NumberFormat("de-CH", {"style": "decimal", "useGrouping": true}).format(1234567.891)"#, "1'234'567.891"),
        (r#"NumberFormat("en-IN", {"style": "decimal", "useGrouping": true}).format(1234567.891)"#, "12,34,567.891"),
        (r#"NumberFormat("en-XX", {"style": "decimal", "useGrouping": true}).format(1234567.891)"#, "1,234,567.891"),
        (r#"NumberFormat("zh-TW", {"style": "decimal", "useGrouping": true}).format(1234567.891)"#, "1,234,567.891"),
        (r#"NumberFormat("fr-CA", {"style": "decimal", "useGrouping": true}).format(1234567.891)"#, "1\u{a0}234\u{a0}567,891"),
        (r#"NumberFormat("es-MX", {"style": "decimal", "useGrouping": true}).format(1234567.891)"#, "1,234,567.891"),
        (r#"NumberFormat("de-AT", {"style": "decimal", "useGrouping": true}).format(1234567.891)"#, "1\u{a0}234\u{a0}567,891"),
        (r#"NumberFormat("es", {"style": "decimal", "useGrouping": true}).format(1234)"#, "1.234"),
        (r#"NumberFormat("es", {"style": "decimal", "useGrouping": true}).format(-1234.5)"#, "-1.234,5"),
        (r#"NumberFormat("fr", {"style": "decimal", "useGrouping": true}).format(-1234.5)"#, "-1\u{202f}234,5"),
        (r#"NumberFormat("en", {"style": "decimal", "useGrouping": true}).format(1.7976931348623157e308)"#, "179,769,313,486,231,570,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000,000"),
        (r#"NumberFormat("en", {"style": "decimal", "maximumFractionDigits": 20, "useGrouping": true}).format(5e-324)"#, "0"),
        (r#"NumberFormat("sv", {"style": "decimal", "useGrouping": true}).format(-1234567.5)"#, "−1\u{a0}234\u{a0}567,5"),

        // Numbers: percent (the value times 100).
        (r#"NumberFormat("en", {"style": "percent", "useGrouping": true}).format(0.256)"#, "26%"),
        (r#"NumberFormat("de", {"style": "percent", "useGrouping": true}).format(0.256)"#, "26\u{a0}%"),
        (r#"NumberFormat("fr", {"style": "percent", "useGrouping": true}).format(0.256)"#, "26\u{a0}%"),
        (r#"NumberFormat("es", {"style": "percent", "useGrouping": true}).format(0.256)"#, "26\u{a0}%"),
        (r#"NumberFormat("ja", {"style": "percent", "useGrouping": true}).format(0.256)"#, "26%"),
        (r#"NumberFormat("zh", {"style": "percent", "useGrouping": true}).format(0.256)"#, "26%"),
        (r#"NumberFormat("en", {"style": "percent", "useGrouping": true}).format(-0.5)"#, "-50%"),
        (r#"NumberFormat("en", {"style": "percent", "useGrouping": true}).format(-0)"#, "-0%"),
        (r#"NumberFormat("en", {"style": "percent", "useGrouping": true}).format(12.345)"#, "1,235%"),
        (r#"NumberFormat("en", {"style": "percent", "maximumFractionDigits": 2, "useGrouping": true}).format(0.12345)"#, "12.35%"),
        (r#"NumberFormat("en", {"style": "percent", "minimumFractionDigits": 1, "useGrouping": true}).format(0.5)"#, "50.0%"),
        (r#"NumberFormat("de", {"style": "percent", "useGrouping": true}).format(NaN)"#, "NaN\u{a0}%"),
        (r#"NumberFormat("fr", {"style": "percent", "useGrouping": true}).format(-Infinity)"#, "-∞\u{a0}%"),
        (r#"NumberFormat("es", {"style": "percent", "useGrouping": true}).format(12.345)"#, "1.235\u{a0}%"),
        (r#"NumberFormat("en", {"style": "percent", "useGrouping": true}).format(1234.5)"#, "123,450%"),
        (r#"NumberFormat("fr", {"style": "percent", "maximumFractionDigits": 3, "minimumFractionDigits": 3, "useGrouping": true}).format(0.001234)"#, "0,123\u{a0}%"),
        (r#"NumberFormat("sv", {"style": "percent", "useGrouping": true}).format(-0.5)"#, "−50\u{a0}%"),

        // Numbers: currency (symbol or code, the currency's own digits, the locale's spacing and sign).
        (r#"NumberFormat("en", {"style": "currency", "currency": "USD", "useGrouping": true}).format(1234.5)"#, "$1,234.50"),
        (r#"NumberFormat("en", {"style": "currency", "currency": "EUR", "useGrouping": true}).format(1234.5)"#, "€1,234.50"),
        (r#"NumberFormat("de", {"style": "currency", "currency": "EUR", "useGrouping": true}).format(1234.5)"#, "1.234,50\u{a0}€"),
        (r#"NumberFormat("fr", {"style": "currency", "currency": "EUR", "useGrouping": true}).format(1234.5)"#, "1\u{202f}234,50\u{a0}€"),
        (r#"NumberFormat("es", {"style": "currency", "currency": "EUR", "useGrouping": true}).format(1234.5)"#, "1.234,50\u{a0}€"),
        (r#"NumberFormat("ja", {"style": "currency", "currency": "JPY", "useGrouping": true}).format(1234.5)"#, "￥1,235"),
        (r#"NumberFormat("zh", {"style": "currency", "currency": "CNY", "useGrouping": true}).format(1234.5)"#, "¥1,234.50"),
        (r#"NumberFormat("en", {"style": "currency", "currency": "JPY", "useGrouping": true}).format(1234.5)"#, "¥1,235"),
        (r#"NumberFormat("de", {"style": "currency", "currency": "USD", "useGrouping": true}).format(1234.5)"#, "1.234,50\u{a0}$"),
        (r#"NumberFormat("fr", {"style": "currency", "currency": "USD", "useGrouping": true}).format(1234.5)"#, "1\u{202f}234,50\u{a0}$US"),
        (r#"NumberFormat("ja", {"style": "currency", "currency": "USD", "useGrouping": true}).format(1234.5)"#, "$1,234.50"),
        (r#"NumberFormat("zh", {"style": "currency", "currency": "USD", "useGrouping": true}).format(1234.5)"#, "US$1,234.50"),
        (r#"NumberFormat("en", {"style": "currency", "currency": "KWD", "useGrouping": true}).format(1234.5)"#, "KWD\u{a0}1,234.500"),
        (r#"NumberFormat("en", {"style": "currency", "currency": "CHF", "useGrouping": true}).format(1234.5)"#, "CHF\u{a0}1,234.50"),
        (r#"NumberFormat("de-CH", {"style": "currency", "currency": "CHF", "useGrouping": true}).format(1234.5)"#, "CHF\u{a0}1'234.50"),
        (r#"NumberFormat("en", {"style": "currency", "currency": "ZZZ", "useGrouping": true}).format(1234.5)"#, "ZZZ\u{a0}1,234.50"),
        (r#"NumberFormat("es", {"style": "currency", "currency": "USD", "useGrouping": true}).format(1234.5)"#, "1.234,50\u{a0}US$"),
        (r#"NumberFormat("en-GB", {"style": "currency", "currency": "GBP", "useGrouping": true}).format(1234.5)"#, "£1,234.50"),
        (r#"NumberFormat("zh", {"style": "currency", "currency": "JPY", "useGrouping": true}).format(1234.5)"#, "JP¥1,235"),
        (r#"NumberFormat("ja", {"style": "currency", "currency": "CNY", "useGrouping": true}).format(1234.5)"#, "元\u{a0}1,234.50"),
        (r#"NumberFormat("fr-CA", {"style": "currency", "currency": "CAD", "useGrouping": true}).format(1234.5)"#, "1\u{a0}234,50\u{a0}$"),
        (r#"NumberFormat("en", {"style": "currency", "currency": "CAD", "useGrouping": true}).format(1234.5)"#, "CA$1,234.50"),
        (r#"NumberFormat("en", {"style": "currency", "currency": "USD", "useGrouping": true}).format(-1234.5)"#, "-$1,234.50"),
        (r#"NumberFormat("de", {"style": "currency", "currency": "EUR", "useGrouping": true}).format(-1234.5)"#, "-1.234,50\u{a0}€"),
        (r#"NumberFormat("fr", {"style": "currency", "currency": "EUR", "useGrouping": true}).format(-1234.5)"#, "-1\u{202f}234,50\u{a0}€"),
        (r#"NumberFormat("ja", {"style": "currency", "currency": "JPY", "useGrouping": true}).format(-1234.5)"#, "-￥1,235"),
        (r#"NumberFormat("en", {"style": "currency", "currency": "USD", "useGrouping": true}).format(0)"#, "$0.00"),
        (r#"NumberFormat("en", {"style": "currency", "currency": "USD", "useGrouping": true}).format(-0)"#, "-$0.00"),
        (r#"NumberFormat("en", {"style": "currency", "currency": "USD", "useGrouping": true}).format(NaN)"#, "$NaN"),
        (r#"NumberFormat("de", {"style": "currency", "currency": "EUR", "useGrouping": true}).format(-Infinity)"#, "-∞\u{a0}€"),
        (r#"NumberFormat("en", {"style": "currency", "currency": "USD", "maximumFractionDigits": 0, "useGrouping": true}).format(1234.5)"#, "$1,235"),
        (r#"NumberFormat("en", {"style": "currency", "currency": "USD", "maximumFractionDigits": 3, "useGrouping": true}).format(1.2345)"#, "$1.235"),
        (r#"NumberFormat("en", {"style": "currency", "currency": "JPY", "minimumFractionDigits": 2, "useGrouping": true}).format(1.2)"#, "¥1.20"),
        (r#"NumberFormat("en", {"style": "currency", "currency": "USD", "useGrouping": false}).format(1234.5)"#, "$1234.50"),
        (r#"NumberFormat("es", {"style": "currency", "currency": "EUR", "useGrouping": false}).format(1234.5)"#, "1234,50\u{a0}€"),
        (r#"NumberFormat("en", {"style": "currency", "currency": "EUR", "useGrouping": true}).format(0.125)"#, "€0.13"),
        (r#"NumberFormat("en", {"style": "currency", "currency": "EUR", "useGrouping": true}).format(1.005)"#, "€1.01"),
        (r#"NumberFormat("de", {"style": "currency", "currency": "JPY", "useGrouping": true}).format(1234.5)"#, "1.235\u{a0}¥"),
        (r#"NumberFormat("es", {"style": "currency", "currency": "EUR", "maximumFractionDigits": 0, "useGrouping": true}).format(1234)"#, "1.234\u{a0}€"),
        (r#"NumberFormat("pt-PT", {"style": "currency", "currency": "EUR", "useGrouping": true}).format(-1234567.5)"#, "-1\u{a0}234\u{a0}567,50\u{a0}€"),
        (r#"NumberFormat("pt", {"style": "currency", "currency": "BRL", "useGrouping": true}).format(-1234567.5)"#, "-R$\u{a0}1.234.567,50"),
        (r#"NumberFormat("it-CH", {"style": "currency", "currency": "CHF", "useGrouping": true}).format(-1234567.5)"#, "CHF-1'234'567.50"),
        (r#"NumberFormat("en-IN", {"style": "currency", "currency": "INR", "useGrouping": true}).format(-1234567.5)"#, "-₹12,34,567.50"),
        (r#"NumberFormat("nl", {"style": "currency", "currency": "EUR", "useGrouping": true}).format(-1234567.5)"#, "€\u{a0}-1.234.567,50"),
        (r#"NumberFormat("sv", {"style": "currency", "currency": "SEK", "useGrouping": true}).format(-1234567.5)"#, "−1\u{a0}234\u{a0}567,50\u{a0}kr"),
        (r#"NumberFormat("ru", {"style": "currency", "currency": "RUB", "useGrouping": true}).format(-1234567.5)"#, "-1\u{a0}234\u{a0}567,50\u{a0}₽"),

        // Dates: dateStyle and timeStyle, alone and together, in UTC and other zones.
        (r#"DateTimeFormat("en", {"dateStyle": "full", "timeZone": "UTC"}).format(new Date("2026-12-07T15:04:05Z"))"#, "Monday, December 7, 2026"),
        (r#"DateTimeFormat("en", {"dateStyle": "long", "timeZone": "UTC"}).format(new Date("2026-12-07T15:04:05Z"))"#, "December 7, 2026"),
        (r#"DateTimeFormat("en", {"dateStyle": "medium", "timeZone": "UTC"}).format(new Date("2026-12-07T15:04:05Z"))"#, "Dec 7, 2026"),
        (r#"DateTimeFormat("en", {"dateStyle": "short", "timeZone": "UTC"}).format(new Date("2026-12-07T15:04:05Z"))"#, "12/7/26"),
        (r#"DateTimeFormat("en", {"timeStyle": "medium", "timeZone": "UTC"}).format(new Date("2026-12-07T15:04:05Z"))"#, "3:04:05 PM"),
        (r#"DateTimeFormat("en", {"timeStyle": "short", "timeZone": "UTC"}).format(new Date("2026-12-07T15:04:05Z"))"#, "3:04 PM"),
        (r#"DateTimeFormat("en", {"dateStyle": "full", "timeStyle": "medium", "timeZone": "UTC"}).format(new Date("2026-12-07T15:04:05Z"))"#, "Monday, December 7, 2026 at 3:04:05 PM"),
        (r#"DateTimeFormat("en", {"dateStyle": "full", "timeStyle": "short", "timeZone": "UTC"}).format(new Date("2026-12-07T15:04:05Z"))"#, "Monday, December 7, 2026 at 3:04 PM"),
        (r#"DateTimeFormat("en", {"dateStyle": "long", "timeStyle": "medium", "timeZone": "UTC"}).format(new Date("2026-12-07T15:04:05Z"))"#, "December 7, 2026 at 3:04:05 PM"),
        (r#"DateTimeFormat("en", {"dateStyle": "long", "timeStyle": "short", "timeZone": "UTC"}).format(new Date("2026-12-07T15:04:05Z"))"#, "December 7, 2026 at 3:04 PM"),
        (r#"DateTimeFormat("en", {"dateStyle": "medium", "timeStyle": "medium", "timeZone": "UTC"}).format(new Date("2026-12-07T15:04:05Z"))"#, "Dec 7, 2026, 3:04:05 PM"),
        (r#"DateTimeFormat("en", {"dateStyle": "medium", "timeStyle": "short", "timeZone": "UTC"}).format(new Date("2026-12-07T15:04:05Z"))"#, "Dec 7, 2026, 3:04 PM"),
        (r#"DateTimeFormat("en", {"dateStyle": "short", "timeStyle": "medium", "timeZone": "UTC"}).format(new Date("2026-12-07T15:04:05Z"))"#, "12/7/26, 3:04:05 PM"),
        (r#"DateTimeFormat("en", {"dateStyle": "short", "timeStyle": "short", "timeZone": "UTC"}).format(new Date("2026-12-07T15:04:05Z"))"#, "12/7/26, 3:04 PM"),
        (r#"DateTimeFormat("en", {"dateStyle": "medium", "timeStyle": "short", "timeZone": "America/New_York"}).format(new Date("2026-12-07T15:04:05Z"))"#, "Dec 7, 2026, 10:04 AM"),
        (r#"DateTimeFormat("en", {"dateStyle": "full", "timeZone": "America/New_York"}).format(new Date("2026-12-07T15:04:05Z"))"#, "Monday, December 7, 2026"),
        (r#"DateTimeFormat("en", {"dateStyle": "medium", "timeStyle": "short", "timeZone": "Asia/Tokyo"}).format(new Date("2026-12-07T15:04:05Z"))"#, "Dec 8, 2026, 12:04 AM"),
        (r#"DateTimeFormat("en", {"dateStyle": "full", "timeZone": "Asia/Tokyo"}).format(new Date("2026-12-07T15:04:05Z"))"#, "Tuesday, December 8, 2026"),
        (r#"DateTimeFormat("de", {"timeZone": "UTC", "dateStyle": "full"}).format(new Date("2026-12-07T15:04:05Z"))"#, "Montag, 7. Dezember 2026"),
        (r#"DateTimeFormat("de", {"timeZone": "UTC", "dateStyle": "long"}).format(new Date("2026-12-07T15:04:05Z"))"#, "7. Dezember 2026"),
        (r#"DateTimeFormat("de", {"timeZone": "UTC", "dateStyle": "medium"}).format(new Date("2026-12-07T15:04:05Z"))"#, "07.12.2026"),
        (r#"DateTimeFormat("de", {"timeZone": "UTC", "dateStyle": "short"}).format(new Date("2026-12-07T15:04:05Z"))"#, "07.12.26"),
        (r#"DateTimeFormat("de", {"timeZone": "UTC", "timeStyle": "medium"}).format(new Date("2026-12-07T15:04:05Z"))"#, "15:04:05"),
        (r#"DateTimeFormat("de", {"timeZone": "UTC", "timeStyle": "short"}).format(new Date("2026-12-07T15:04:05Z"))"#, "15:04"),
        (r#"DateTimeFormat("de", {"timeZone": "UTC", "dateStyle": "full", "timeStyle": "short"}).format(new Date("2026-12-07T15:04:05Z"))"#, "Montag, 7. Dezember 2026 um 15:04"),
        (r#"DateTimeFormat("de", {"timeZone": "UTC", "dateStyle": "long", "timeStyle": "medium"}).format(new Date("2026-12-07T15:04:05Z"))"#, "7. Dezember 2026 um 15:04:05"),
        (r#"DateTimeFormat("de", {"timeZone": "UTC", "dateStyle": "medium", "timeStyle": "short"}).format(new Date("2026-12-07T15:04:05Z"))"#, "07.12.2026, 15:04"),
        (r#"DateTimeFormat("de", {"timeZone": "UTC", "dateStyle": "short", "timeStyle": "short"}).format(new Date("2026-12-07T15:04:05Z"))"#, "07.12.26, 15:04"),
        (r#"DateTimeFormat("fr", {"timeZone": "UTC", "dateStyle": "full"}).format(new Date("2026-12-07T15:04:05Z"))"#, "lundi 7 décembre 2026"),
        (r#"DateTimeFormat("fr", {"timeZone": "UTC", "dateStyle": "long"}).format(new Date("2026-12-07T15:04:05Z"))"#, "7 décembre 2026"),
        (r#"DateTimeFormat("fr", {"timeZone": "UTC", "dateStyle": "medium"}).format(new Date("2026-12-07T15:04:05Z"))"#, "7 déc. 2026"),
        (r#"DateTimeFormat("fr", {"timeZone": "UTC", "dateStyle": "short"}).format(new Date("2026-12-07T15:04:05Z"))"#, "07/12/2026"),
        (r#"DateTimeFormat("fr", {"timeZone": "UTC", "timeStyle": "medium"}).format(new Date("2026-12-07T15:04:05Z"))"#, "15:04:05"),
        (r#"DateTimeFormat("fr", {"timeZone": "UTC", "timeStyle": "short"}).format(new Date("2026-12-07T15:04:05Z"))"#, "15:04"),
        (r#"DateTimeFormat("fr", {"timeZone": "UTC", "dateStyle": "full", "timeStyle": "short"}).format(new Date("2026-12-07T15:04:05Z"))"#, "lundi 7 décembre 2026 à 15:04"),
        (r#"DateTimeFormat("fr", {"timeZone": "UTC", "dateStyle": "long", "timeStyle": "medium"}).format(new Date("2026-12-07T15:04:05Z"))"#, "7 décembre 2026 à 15:04:05"),
        (r#"DateTimeFormat("fr", {"timeZone": "UTC", "dateStyle": "medium", "timeStyle": "short"}).format(new Date("2026-12-07T15:04:05Z"))"#, "7 déc. 2026, 15:04"),
        (r#"DateTimeFormat("fr", {"timeZone": "UTC", "dateStyle": "short", "timeStyle": "short"}).format(new Date("2026-12-07T15:04:05Z"))"#, "07/12/2026 15:04"),
        (r#"DateTimeFormat("es", {"timeZone": "UTC", "dateStyle": "full"}).format(new Date("2026-12-07T15:04:05Z"))"#, "lunes, 7 de diciembre de 2026"),
        (r#"DateTimeFormat("es", {"timeZone": "UTC", "dateStyle": "long"}).format(new Date("2026-12-07T15:04:05Z"))"#, "7 de diciembre de 2026"),
        (r#"DateTimeFormat("es", {"timeZone": "UTC", "dateStyle": "medium"}).format(new Date("2026-12-07T15:04:05Z"))"#, "7 dic 2026"),
        (r#"DateTimeFormat("es", {"timeZone": "UTC", "dateStyle": "short"}).format(new Date("2026-12-07T15:04:05Z"))"#, "7/12/26"),
        (r#"DateTimeFormat("es", {"timeZone": "UTC", "timeStyle": "medium"}).format(new Date("2026-12-07T15:04:05Z"))"#, "15:04:05"),
        (r#"DateTimeFormat("es", {"timeZone": "UTC", "timeStyle": "short"}).format(new Date("2026-12-07T15:04:05Z"))"#, "15:04"),
        (r#"DateTimeFormat("es", {"timeZone": "UTC", "dateStyle": "long", "timeStyle": "medium"}).format(new Date("2026-12-07T15:04:05Z"))"#, "7 de diciembre de 2026 a las 15:04:05"),
        (r#"DateTimeFormat("es", {"timeZone": "UTC", "dateStyle": "medium", "timeStyle": "short"}).format(new Date("2026-12-07T15:04:05Z"))"#, "7 dic 2026, 15:04"),
        (r#"DateTimeFormat("es", {"timeZone": "UTC", "dateStyle": "short", "timeStyle": "short"}).format(new Date("2026-12-07T15:04:05Z"))"#, "7/12/26, 15:04"),
        (r#"DateTimeFormat("ja", {"timeZone": "UTC", "dateStyle": "full"}).format(new Date("2026-12-07T15:04:05Z"))"#, "2026年12月7日月曜日"),
        (r#"DateTimeFormat("ja", {"timeZone": "UTC", "dateStyle": "long"}).format(new Date("2026-12-07T15:04:05Z"))"#, "2026年12月7日"),
        (r#"DateTimeFormat("ja", {"timeZone": "UTC", "dateStyle": "medium"}).format(new Date("2026-12-07T15:04:05Z"))"#, "2026/12/07"),
        (r#"DateTimeFormat("ja", {"timeZone": "UTC", "dateStyle": "short"}).format(new Date("2026-12-07T15:04:05Z"))"#, "2026/12/07"),
        (r#"DateTimeFormat("ja", {"timeZone": "UTC", "timeStyle": "medium"}).format(new Date("2026-12-07T15:04:05Z"))"#, "15:04:05"),
        (r#"DateTimeFormat("ja", {"timeZone": "UTC", "timeStyle": "short"}).format(new Date("2026-12-07T15:04:05Z"))"#, "15:04"),
        (r#"DateTimeFormat("ja", {"timeZone": "UTC", "dateStyle": "full", "timeStyle": "short"}).format(new Date("2026-12-07T15:04:05Z"))"#, "2026年12月7日月曜日 15:04"),
        (r#"DateTimeFormat("ja", {"timeZone": "UTC", "dateStyle": "long", "timeStyle": "medium"}).format(new Date("2026-12-07T15:04:05Z"))"#, "2026年12月7日 15:04:05"),
        (r#"DateTimeFormat("ja", {"timeZone": "UTC", "dateStyle": "medium", "timeStyle": "short"}).format(new Date("2026-12-07T15:04:05Z"))"#, "2026/12/07 15:04"),
        (r#"DateTimeFormat("ja", {"timeZone": "UTC", "dateStyle": "short", "timeStyle": "short"}).format(new Date("2026-12-07T15:04:05Z"))"#, "2026/12/07 15:04"),
        (r#"DateTimeFormat("zh", {"timeZone": "UTC", "dateStyle": "full"}).format(new Date("2026-12-07T15:04:05Z"))"#, "2026年12月7日星期一"),
        (r#"DateTimeFormat("zh", {"timeZone": "UTC", "dateStyle": "long"}).format(new Date("2026-12-07T15:04:05Z"))"#, "2026年12月7日"),
        (r#"DateTimeFormat("zh", {"timeZone": "UTC", "dateStyle": "medium"}).format(new Date("2026-12-07T15:04:05Z"))"#, "2026年12月7日"),
        (r#"DateTimeFormat("zh", {"timeZone": "UTC", "dateStyle": "short"}).format(new Date("2026-12-07T15:04:05Z"))"#, "2026/12/7"),
        (r#"DateTimeFormat("zh", {"timeZone": "UTC", "timeStyle": "medium"}).format(new Date("2026-12-07T15:04:05Z"))"#, "15:04:05"),
        (r#"DateTimeFormat("zh", {"timeZone": "UTC", "timeStyle": "short"}).format(new Date("2026-12-07T15:04:05Z"))"#, "15:04"),
        (r#"DateTimeFormat("zh", {"timeZone": "UTC", "dateStyle": "full", "timeStyle": "short"}).format(new Date("2026-12-07T15:04:05Z"))"#, "2026年12月7日星期一 15:04"),
        (r#"DateTimeFormat("zh", {"timeZone": "UTC", "dateStyle": "long", "timeStyle": "medium"}).format(new Date("2026-12-07T15:04:05Z"))"#, "2026年12月7日 15:04:05"),
        (r#"DateTimeFormat("zh", {"timeZone": "UTC", "dateStyle": "medium", "timeStyle": "short"}).format(new Date("2026-12-07T15:04:05Z"))"#, "2026年12月7日 15:04"),
        (r#"DateTimeFormat("zh", {"timeZone": "UTC", "dateStyle": "short", "timeStyle": "short"}).format(new Date("2026-12-07T15:04:05Z"))"#, "2026/12/7 15:04"),
        (r#"DateTimeFormat("de", {"dateStyle": "medium", "timeStyle": "short", "timeZone": "America/New_York"}).format(new Date("2026-12-07T15:04:05Z"))"#, "07.12.2026, 10:04"),
        (r#"DateTimeFormat("de", {"dateStyle": "short", "timeStyle": "medium", "timeZone": "Asia/Tokyo"}).format(new Date("2026-12-07T15:04:05Z"))"#, "08.12.26, 00:04:05"),
        (r#"DateTimeFormat("fr", {"dateStyle": "medium", "timeStyle": "short", "timeZone": "America/New_York"}).format(new Date("2026-12-07T15:04:05Z"))"#, "7 déc. 2026, 10:04"),
        (r#"DateTimeFormat("fr", {"dateStyle": "short", "timeStyle": "medium", "timeZone": "Asia/Tokyo"}).format(new Date("2026-12-07T15:04:05Z"))"#, "08/12/2026 00:04:05"),
        (r#"DateTimeFormat("es", {"dateStyle": "medium", "timeStyle": "short", "timeZone": "America/New_York"}).format(new Date("2026-12-07T15:04:05Z"))"#, "7 dic 2026, 10:04"),
        (r#"DateTimeFormat("ja", {"dateStyle": "medium", "timeStyle": "short", "timeZone": "America/New_York"}).format(new Date("2026-12-07T15:04:05Z"))"#, "2026/12/07 10:04"),
        (r#"DateTimeFormat("ja", {"dateStyle": "short", "timeStyle": "medium", "timeZone": "Asia/Tokyo"}).format(new Date("2026-12-07T15:04:05Z"))"#, "2026/12/08 0:04:05"),
        (r#"DateTimeFormat("zh", {"dateStyle": "medium", "timeStyle": "short", "timeZone": "America/New_York"}).format(new Date("2026-12-07T15:04:05Z"))"#, "2026年12月7日 10:04"),
        (r#"DateTimeFormat("zh", {"dateStyle": "short", "timeStyle": "medium", "timeZone": "Asia/Tokyo"}).format(new Date("2026-12-07T15:04:05Z"))"#, "2026/12/8 00:04:05"),
        (r#"DateTimeFormat("de-CH", {"dateStyle": "medium", "timeStyle": "short", "timeZone": "Europe/Zurich"}).format(new Date("2026-12-07T15:04:05Z"))"#, "07.12.2026, 16:04"),
        (r#"DateTimeFormat("en-GB", {"dateStyle": "medium", "timeStyle": "short", "timeZone": "Europe/London"}).format(new Date("2026-12-07T15:04:05Z"))"#, "7 Dec 2026, 15:04"),
        (r#"DateTimeFormat("en-XX", {"dateStyle": "medium", "timeStyle": "short", "timeZone": "UTC"}).format(new Date("2026-12-07T15:04:05Z"))"#, "Dec 7, 2026, 3:04 PM"),
        (r#"DateTimeFormat("en", {"dateStyle": "short", "timeStyle": "short", "timeZone": "UTC"}).format(new Date("2026-01-05T00:09:00Z"))"#, "1/5/26, 12:09 AM"),
        (r#"DateTimeFormat("en", {"timeStyle": "short", "timeZone": "UTC"}).format(new Date("2026-01-05T12:00:00Z"))"#, "12:00 PM"),
        (r#"DateTimeFormat("ja", {"timeStyle": "medium", "timeZone": "UTC"}).format(new Date("2026-01-05T00:09:00Z"))"#, "0:09:00"),
        (r#"DateTimeFormat("en", {"dateStyle": "short", "timeZone": "UTC"}).format(new Date("1970-01-01T00:00:00Z"))"#, "1/1/70"),
        (r#"DateTimeFormat("en", {"dateStyle": "medium", "timeZone": "UTC"}).format(new Date("0005-03-04T00:00:00Z"))"#, "Mar 4, 5"),
        (r#"DateTimeFormat("en", {"dateStyle": "medium", "timeStyle": "medium", "timeZone": "America/New_York"}).format(new Date("2026-03-08T07:30:00Z"))"#, "Mar 8, 2026, 3:30:00 AM"),
        (r#"DateTimeFormat("en", {"dateStyle": "medium", "timeStyle": "short", "timeZone": "Asia/Kolkata"}).format(new Date("2026-12-07T15:04:05Z"))"#, "Dec 7, 2026, 8:34 PM"),
        (r#"DateTimeFormat("de", {"timeStyle": "medium", "timeZone": "UTC"}).format(new Date("2026-12-07T00:04:05Z"))"#, "00:04:05"),
        (r#"DateTimeFormat("de", {"dateStyle": "full", "timeStyle": "medium", "timeZone": "UTC"}).format(new Date("2026-12-07T00:04:05Z"))"#, "Montag, 7. Dezember 2026 um 00:04:05"),
        (r#"DateTimeFormat("fr", {"timeStyle": "medium", "timeZone": "UTC"}).format(new Date("2026-12-07T00:04:05Z"))"#, "00:04:05"),
        (r#"DateTimeFormat("fr", {"dateStyle": "full", "timeStyle": "medium", "timeZone": "UTC"}).format(new Date("2026-12-07T00:04:05Z"))"#, "lundi 7 décembre 2026 à 00:04:05"),
        (r#"DateTimeFormat("ja", {"timeStyle": "medium", "timeZone": "UTC"}).format(new Date("2026-12-07T00:04:05Z"))"#, "0:04:05"),
        (r#"DateTimeFormat("ja", {"dateStyle": "full", "timeStyle": "medium", "timeZone": "UTC"}).format(new Date("2026-12-07T00:04:05Z"))"#, "2026年12月7日月曜日 0:04:05"),
        (r#"DateTimeFormat("zh", {"timeStyle": "medium", "timeZone": "UTC"}).format(new Date("2026-12-07T00:04:05Z"))"#, "00:04:05"),
        (r#"DateTimeFormat("zh", {"dateStyle": "full", "timeStyle": "medium", "timeZone": "UTC"}).format(new Date("2026-12-07T00:04:05Z"))"#, "2026年12月7日星期一 00:04:05"),
        (r#"DateTimeFormat("en", {"dateStyle": "medium", "timeStyle": "medium", "timeZone": "UTC"}).format(new Date(8.64e15))"#, "Sep 13, 275760, 12:00:00 AM"),
        (r#"DateTimeFormat("en", {"dateStyle": "medium", "timeStyle": "medium", "timeZone": "UTC"}).format(new Date(-8.64e15))"#, "Apr 20, 271822, 12:00:00 AM"),
        (r#"DateTimeFormat("en", {"dateStyle": "long", "timeStyle": "short", "timeZone": "America/New_York"}).format(new Date(575136000000000))"#, "May 2, 20195 at 12:00 PM"),
        (r#"DateTimeFormat("en", {"dateStyle": "long", "timeZone": "UTC"}).format(new Date(-62198755200000))"#, "January 1, 2"),
        (r#"DateTimeFormat("en", {"dateStyle": "medium", "timeStyle": "medium", "timeZone": "America/New_York"}).format(new Date(-5000000000000))"#, "Jul 23, 1811, 10:10:38 AM"),
        (r#"DateTimeFormat("en", {"dateStyle": "medium", "timeStyle": "short", "timeZone": "+05:30"}).format(new Date(1796655845000))"#, "Dec 7, 2026, 8:34 PM"),
        (r#"DateTimeFormat("en", {"dateStyle": "medium", "timeStyle": "short", "timeZone": "america/new_york"}).format(new Date(1796655845000))"#, "Dec 7, 2026, 10:04 AM"),
        (r#"DateTimeFormat("en", {"dateStyle": "medium", "timeStyle": "short", "timeZone": "Etc/GMT+5"}).format(new Date(1796655845000))"#, "Dec 7, 2026, 10:04 AM"),
        (r#"DateTimeFormat("th", {"dateStyle": "medium", "timeZone": "UTC"}).format(new Date(1796655845000))"#, "7 ธ.ค. 2569"),
        (r#"DateTimeFormat("en-u-hc-h23", {"timeStyle": "short", "timeZone": "UTC"}).format(new Date(1796655845000))"#, "15:04"),
        (r#"DateTimeFormat("ja-JP-u-ca-japanese", {"dateStyle": "long", "timeZone": "UTC"}).format(new Date(1796655845000))"#, "令和8年12月7日"),

        // Relative times: numeric "always" and "auto", the three widths, every unit.
        (r#"RelativeTimeFormat("en", {"numeric": "auto", "style": "long"}).format(-1, "day")"#, "yesterday"),
        (r#"RelativeTimeFormat("en", {"numeric": "auto", "style": "long"}).format(2, "day")"#, "in 2 days"),
        (r#"RelativeTimeFormat("en", {"numeric": "auto", "style": "long"}).format(-1, "year")"#, "last year"),
        (r#"RelativeTimeFormat("en", {"numeric": "auto", "style": "long"}).format(0, "day")"#, "today"),
        (r#"RelativeTimeFormat("en", {"numeric": "auto", "style": "long"}).format(1, "week")"#, "next week"),
        (r#"RelativeTimeFormat("en", {"numeric": "auto", "style": "long"}).format(0, "second")"#, "now"),
        (r#"RelativeTimeFormat("en", {"numeric": "auto", "style": "long"}).format(-1, "quarter")"#, "last quarter"),
        (r#"RelativeTimeFormat("en", {"numeric": "auto", "style": "long"}).format(1, "month")"#, "next month"),
        (r#"RelativeTimeFormat("en", {"numeric": "auto", "style": "long"}).format(-2, "day")"#, "2 days ago"),
        (r#"RelativeTimeFormat("en", {"numeric": "auto", "style": "long"}).format(0, "hour")"#, "this hour"),
        (r#"RelativeTimeFormat("en", {"numeric": "auto", "style": "long"}).format(0, "minute")"#, "this minute"),
        (r#"RelativeTimeFormat("en", {"numeric": "auto", "style": "long"}).format(-0, "day")"#, "today"),
        (r#"RelativeTimeFormat("en", {"numeric": "auto", "style": "long"}).format(1.5, "day")"#, "in 1.5 days"),
        (r#"RelativeTimeFormat("en", {"numeric": "auto", "style": "long"}).format(1.004, "day")"#, "tomorrow"),
        (r#"RelativeTimeFormat("en", {"numeric": "auto", "style": "long"}).format(-3, "hour")"#, "3 hours ago"),
        (r#"RelativeTimeFormat("en", {"numeric": "always", "style": "long"}).format(-1, "day")"#, "1 day ago"),
        (r#"RelativeTimeFormat("en", {"numeric": "always", "style": "long"}).format(1, "day")"#, "in 1 day"),
        (r#"RelativeTimeFormat("en", {"numeric": "always", "style": "long"}).format(0, "second")"#, "in 0 seconds"),
        (r#"RelativeTimeFormat("en", {"numeric": "always", "style": "long"}).format(-0, "day")"#, "0 days ago"),
        (r#"RelativeTimeFormat("en", {"numeric": "always", "style": "long"}).format(1.5, "day")"#, "in 1.5 days"),
        (r#"RelativeTimeFormat("en", {"numeric": "always", "style": "long"}).format(1.23456, "day")"#, "in 1.235 days"),
        (r#"RelativeTimeFormat("en", {"numeric": "always", "style": "long"}).format(1000, "year")"#, "in 1,000 years"),
        (r#"RelativeTimeFormat("en", {"numeric": "always", "style": "long"}).format(-1000.5, "second")"#, "1,000.5 seconds ago"),
        (r#"RelativeTimeFormat("en", {"numeric": "always", "style": "long"}).format(-3, "year")"#, "3 years ago"),
        (r#"RelativeTimeFormat("en", {"numeric": "always", "style": "short"}).format(-3, "year")"#, "3 yr. ago"),
        (r#"RelativeTimeFormat("en", {"numeric": "always", "style": "narrow"}).format(-3, "year")"#, "3y ago"),
        (r#"RelativeTimeFormat("en", {"numeric": "always", "style": "long"}).format(-3, "quarter")"#, "3 quarters ago"),
        (r#"RelativeTimeFormat("en", {"numeric": "always", "style": "short"}).format(-3, "quarter")"#, "3 qtrs. ago"),
        (r#"RelativeTimeFormat("en", {"numeric": "always", "style": "narrow"}).format(-3, "quarter")"#, "3q ago"),
        (r#"RelativeTimeFormat("en", {"numeric": "always", "style": "long"}).format(-3, "month")"#, "3 months ago"),
        (r#"RelativeTimeFormat("en", {"numeric": "always", "style": "short"}).format(-3, "month")"#, "3 mo. ago"),
        (r#"RelativeTimeFormat("en", {"numeric": "always", "style": "narrow"}).format(-3, "month")"#, "3mo ago"),
        (r#"RelativeTimeFormat("en", {"numeric": "always", "style": "long"}).format(-3, "week")"#, "3 weeks ago"),
        (r#"RelativeTimeFormat("en", {"numeric": "always", "style": "short"}).format(-3, "week")"#, "3 wk. ago"),
        (r#"RelativeTimeFormat("en", {"numeric": "always", "style": "narrow"}).format(-3, "week")"#, "3w ago"),
        (r#"RelativeTimeFormat("en", {"numeric": "always", "style": "long"}).format(-3, "day")"#, "3 days ago"),
        (r#"RelativeTimeFormat("en", {"numeric": "always", "style": "short"}).format(-3, "day")"#, "3 days ago"),
        (r#"RelativeTimeFormat("en", {"numeric": "always", "style": "narrow"}).format(-3, "day")"#, "3d ago"),
        (r#"RelativeTimeFormat("en", {"numeric": "always", "style": "long"}).format(-3, "hour")"#, "3 hours ago"),
        (r#"RelativeTimeFormat("en", {"numeric": "always", "style": "short"}).format(-3, "hour")"#, "3 hr. ago"),
        (r#"RelativeTimeFormat("en", {"numeric": "always", "style": "narrow"}).format(-3, "hour")"#, "3h ago"),
        (r#"RelativeTimeFormat("en", {"numeric": "always", "style": "long"}).format(-3, "minute")"#, "3 minutes ago"),
        (r#"RelativeTimeFormat("en", {"numeric": "always", "style": "short"}).format(-3, "minute")"#, "3 min. ago"),
        (r#"RelativeTimeFormat("en", {"numeric": "always", "style": "narrow"}).format(-3, "minute")"#, "3m ago"),
        (r#"RelativeTimeFormat("en", {"numeric": "always", "style": "long"}).format(-3, "second")"#, "3 seconds ago"),
        (r#"RelativeTimeFormat("en", {"numeric": "always", "style": "short"}).format(-3, "second")"#, "3 sec. ago"),
        (r#"RelativeTimeFormat("en", {"numeric": "always", "style": "narrow"}).format(-3, "second")"#, "3s ago"),
        (r#"RelativeTimeFormat("en", {"numeric": "always", "style": "short"}).format(1, "quarter")"#, "in 1 qtr."),
        (r#"RelativeTimeFormat("en", {"numeric": "auto", "style": "narrow"}).format(1, "month")"#, "next mo."),
        (r#"RelativeTimeFormat("de", {"numeric": "auto", "style": "long"}).format(-1, "day")"#, "gestern"),
        (r#"RelativeTimeFormat("de", {"numeric": "auto", "style": "long"}).format(-2, "day")"#, "vorgestern"),
        (r#"RelativeTimeFormat("de", {"numeric": "auto", "style": "long"}).format(2, "day")"#, "übermorgen"),
        (r#"RelativeTimeFormat("de", {"numeric": "auto", "style": "long"}).format(1, "year")"#, "nächstes Jahr"),
        (r#"RelativeTimeFormat("de", {"numeric": "always", "style": "short"}).format(-3, "hour")"#, "vor 3 Std."),
        (r#"RelativeTimeFormat("de", {"numeric": "always", "style": "narrow"}).format(5, "minute")"#, "in 5 m"),
        (r#"RelativeTimeFormat("de", {"numeric": "always", "style": "long"}).format(1.5, "week")"#, "in 1,5 Wochen"),
        (r#"RelativeTimeFormat("de", {"numeric": "always", "style": "long"}).format(-1, "quarter")"#, "vor 1 Quartal"),
        (r#"RelativeTimeFormat("de", {"numeric": "always", "style": "long"}).format(1234, "second")"#, "in 1.234 Sekunden"),
        (r#"RelativeTimeFormat("fr", {"numeric": "auto", "style": "long"}).format(-1, "day")"#, "hier"),
        (r#"RelativeTimeFormat("fr", {"numeric": "auto", "style": "long"}).format(-2, "day")"#, "avant-hier"),
        (r#"RelativeTimeFormat("fr", {"numeric": "auto", "style": "long"}).format(2, "day")"#, "après-demain"),
        (r#"RelativeTimeFormat("fr", {"numeric": "auto", "style": "long"}).format(1, "year")"#, "l’année prochaine"),
        (r#"RelativeTimeFormat("fr", {"numeric": "always", "style": "short"}).format(-3, "hour")"#, "il y a 3\u{a0}h"),
        (r#"RelativeTimeFormat("fr", {"numeric": "always", "style": "narrow"}).format(5, "minute")"#, "+5 min"),
        (r#"RelativeTimeFormat("fr", {"numeric": "always", "style": "long"}).format(1.5, "week")"#, "dans 1,5 semaine"),
        (r#"RelativeTimeFormat("fr", {"numeric": "always", "style": "long"}).format(-1, "quarter")"#, "il y a 1 trimestre"),
        (r#"RelativeTimeFormat("fr", {"numeric": "always", "style": "long"}).format(1234, "second")"#, "dans 1\u{202f}234 secondes"),
        (r#"RelativeTimeFormat("es", {"numeric": "auto", "style": "long"}).format(-1, "day")"#, "ayer"),
        (r#"RelativeTimeFormat("es", {"numeric": "auto", "style": "long"}).format(-2, "day")"#, "anteayer"),
        (r#"RelativeTimeFormat("es", {"numeric": "auto", "style": "long"}).format(2, "day")"#, "pasado mañana"),
        (r#"RelativeTimeFormat("es", {"numeric": "auto", "style": "long"}).format(1, "year")"#, "el próximo año"),
        (r#"RelativeTimeFormat("es", {"numeric": "always", "style": "short"}).format(-3, "hour")"#, "hace 3 h"),
        (r#"RelativeTimeFormat("es", {"numeric": "always", "style": "narrow"}).format(5, "minute")"#, "dentro de 5 min"),
        (r#"RelativeTimeFormat("es", {"numeric": "always", "style": "long"}).format(1.5, "week")"#, "dentro de 1,5 semanas"),
        (r#"RelativeTimeFormat("es", {"numeric": "always", "style": "long"}).format(-1, "quarter")"#, "hace 1 trimestre"),
        (r#"RelativeTimeFormat("es", {"numeric": "always", "style": "long"}).format(1234, "second")"#, "dentro de 1234 segundos"),
        (r#"RelativeTimeFormat("ja", {"numeric": "auto", "style": "long"}).format(-1, "day")"#, "昨日"),
        (r#"RelativeTimeFormat("ja", {"numeric": "auto", "style": "long"}).format(-2, "day")"#, "一昨日"),
        (r#"RelativeTimeFormat("ja", {"numeric": "auto", "style": "long"}).format(2, "day")"#, "明後日"),
        (r#"RelativeTimeFormat("ja", {"numeric": "auto", "style": "long"}).format(1, "year")"#, "来年"),
        (r#"RelativeTimeFormat("ja", {"numeric": "always", "style": "short"}).format(-3, "hour")"#, "3 時間前"),
        (r#"RelativeTimeFormat("ja", {"numeric": "always", "style": "narrow"}).format(5, "minute")"#, "5分後"),
        (r#"RelativeTimeFormat("ja", {"numeric": "always", "style": "long"}).format(1.5, "week")"#, "1.5 週間後"),
        (r#"RelativeTimeFormat("ja", {"numeric": "always", "style": "long"}).format(-1, "quarter")"#, "1 四半期前"),
        (r#"RelativeTimeFormat("ja", {"numeric": "always", "style": "long"}).format(1234, "second")"#, "1,234 秒後"),
        (r#"RelativeTimeFormat("zh", {"numeric": "auto", "style": "long"}).format(-1, "day")"#, "昨天"),
        (r#"RelativeTimeFormat("zh", {"numeric": "auto", "style": "long"}).format(-2, "day")"#, "前天"),
        (r#"RelativeTimeFormat("zh", {"numeric": "auto", "style": "long"}).format(2, "day")"#, "后天"),
        (r#"RelativeTimeFormat("zh", {"numeric": "auto", "style": "long"}).format(1, "year")"#, "明年"),
        (r#"RelativeTimeFormat("zh", {"numeric": "always", "style": "short"}).format(-3, "hour")"#, "3小时前"),
        (r#"RelativeTimeFormat("zh", {"numeric": "always", "style": "narrow"}).format(5, "minute")"#, "5分钟后"),
        (r#"RelativeTimeFormat("zh", {"numeric": "always", "style": "long"}).format(1.5, "week")"#, "1.5周后"),
        (r#"RelativeTimeFormat("zh", {"numeric": "always", "style": "long"}).format(-1, "quarter")"#, "1个季度前"),
        (r#"RelativeTimeFormat("zh", {"numeric": "always", "style": "long"}).format(1234, "second")"#, "1,234秒钟后"),
        (r#"RelativeTimeFormat("en", {"numeric": "auto", "style": "long"}).format(2.004, "day")"#, "in 2.004 days"),
        (r#"RelativeTimeFormat("en", {"numeric": "auto", "style": "long"}).format(-1.004, "day")"#, "yesterday"),
        (r#"RelativeTimeFormat("en", {"numeric": "auto", "style": "long"}).format(1.0051, "day")"#, "in 1.005 days"),
        (r#"RelativeTimeFormat("en", {"numeric": "auto", "style": "long"}).format(-0.001, "day")"#, "today"),
        (r#"RelativeTimeFormat("en", {"numeric": "always", "style": "long"}).format(-0.001, "day")"#, "0.001 days ago"),
        (r#"RelativeTimeFormat("de", {"numeric": "auto", "style": "long"}).format(2.004, "day")"#, "übermorgen"),
        (r#"RelativeTimeFormat("en", {"numeric": "auto", "style": "short"}).format(0, "year")"#, "this yr."),
        (r#"RelativeTimeFormat("fr", {"numeric": "auto", "style": "narrow"}).format(0, "second")"#, "maintenant"),

        // Lists: conjunction, disjunction and unit at each width; 0 to 5 items.
        (r#"ListFormat("en", {"type": "conjunction", "style": "long"}).format(["a", "b", "c"])"#, "a, b, and c"),
        (r#"ListFormat("en", {"type": "conjunction", "style": "short"}).format(["a", "b", "c"])"#, "a, b, & c"),
        (r#"ListFormat("en", {"type": "conjunction", "style": "narrow"}).format(["a", "b", "c"])"#, "a, b, c"),
        (r#"ListFormat("en", {"type": "disjunction", "style": "long"}).format(["a", "b", "c"])"#, "a, b, or c"),
        (r#"ListFormat("en", {"type": "disjunction", "style": "short"}).format(["a", "b", "c"])"#, "a, b, or c"),
        (r#"ListFormat("en", {"type": "disjunction", "style": "narrow"}).format(["a", "b", "c"])"#, "a, b, or c"),
        (r#"ListFormat("en", {"type": "unit", "style": "long"}).format(["a", "b", "c"])"#, "a, b, c"),
        (r#"ListFormat("en", {"type": "unit", "style": "short"}).format(["a", "b", "c"])"#, "a, b, c"),
        (r#"ListFormat("en", {"type": "unit", "style": "narrow"}).format(["a", "b", "c"])"#, "a b c"),
        (r#"ListFormat("en", {"type": "conjunction", "style": "long"}).format([])"#, ""),
        (r#"ListFormat("en", {"type": "disjunction", "style": "long"}).format([])"#, ""),
        (r#"ListFormat("en", {"type": "conjunction", "style": "long"}).format(["a"])"#, "a"),
        (r#"ListFormat("en", {"type": "disjunction", "style": "long"}).format(["a"])"#, "a"),
        (r#"ListFormat("en", {"type": "conjunction", "style": "long"}).format(["a", "b"])"#, "a and b"),
        (r#"ListFormat("en", {"type": "disjunction", "style": "long"}).format(["a", "b"])"#, "a or b"),
        (r#"ListFormat("de", {"type": "conjunction", "style": "long"}).format(["a", "b", "c"])"#, "a, b und c"),
        (r#"ListFormat("de", {"type": "disjunction", "style": "long"}).format(["a", "b", "c"])"#, "a, b oder c"),
        (r#"ListFormat("de", {"type": "unit", "style": "long"}).format(["a", "b", "c"])"#, "a, b und c"),
        (r#"ListFormat("de", {"type": "conjunction", "style": "long"}).format(["a", "b"])"#, "a und b"),
        (r#"ListFormat("de", {"type": "unit", "style": "narrow"}).format(["a", "b", "c"])"#, "a, b und c"),
        (r#"ListFormat("fr", {"type": "conjunction", "style": "long"}).format(["a", "b", "c"])"#, "a, b et c"),
        (r#"ListFormat("fr", {"type": "disjunction", "style": "long"}).format(["a", "b", "c"])"#, "a, b ou c"),
        (r#"ListFormat("fr", {"type": "unit", "style": "long"}).format(["a", "b", "c"])"#, "a, b et c"),
        (r#"ListFormat("fr", {"type": "conjunction", "style": "long"}).format(["a", "b"])"#, "a et b"),
        (r#"ListFormat("fr", {"type": "unit", "style": "narrow"}).format(["a", "b", "c"])"#, "a b c"),
        (r#"ListFormat("es", {"type": "conjunction", "style": "long"}).format(["a", "b", "c"])"#, "a, b y c"),
        (r#"ListFormat("es", {"type": "disjunction", "style": "long"}).format(["a", "b", "c"])"#, "a, b o c"),
        (r#"ListFormat("es", {"type": "unit", "style": "long"}).format(["a", "b", "c"])"#, "a, b y c"),
        (r#"ListFormat("es", {"type": "conjunction", "style": "long"}).format(["a", "b"])"#, "a y b"),
        (r#"ListFormat("es", {"type": "unit", "style": "narrow"}).format(["a", "b", "c"])"#, "a b c"),
        (r#"ListFormat("ja", {"type": "conjunction", "style": "long"}).format(["a", "b", "c"])"#, "a、b、c"),
        (r#"ListFormat("ja", {"type": "disjunction", "style": "long"}).format(["a", "b", "c"])"#, "a、b、またはc"),
        (r#"ListFormat("ja", {"type": "unit", "style": "long"}).format(["a", "b", "c"])"#, "a b c"),
        (r#"ListFormat("ja", {"type": "conjunction", "style": "long"}).format(["a", "b"])"#, "a、b"),
        (r#"ListFormat("ja", {"type": "unit", "style": "narrow"}).format(["a", "b", "c"])"#, "abc"),
        (r#"ListFormat("zh", {"type": "conjunction", "style": "long"}).format(["a", "b", "c"])"#, "a、b和c"),
        (r#"ListFormat("zh", {"type": "disjunction", "style": "long"}).format(["a", "b", "c"])"#, "a、b或c"),
        (r#"ListFormat("zh", {"type": "unit", "style": "long"}).format(["a", "b", "c"])"#, "abc"),
        (r#"ListFormat("zh", {"type": "conjunction", "style": "long"}).format(["a", "b"])"#, "a和b"),
        (r#"ListFormat("zh", {"type": "unit", "style": "narrow"}).format(["a", "b", "c"])"#, "abc"),
        (r#"ListFormat("es", {"type": "conjunction", "style": "long"}).format(["España", "Italia"])"#, "España e Italia"),
        (r#"ListFormat("es", {"type": "disjunction", "style": "long"}).format(["siete", "ocho"])"#, "siete u ocho"),
        (r#"ListFormat("es", {"type": "conjunction", "style": "long"}).format(["agua", "hielo"])"#, "agua y hielo"),
        (r#"ListFormat("en", {"type": "conjunction", "style": "long"}).format(["", " x ", "a, b"])"#, ",  x , and a, b"),
        (r#"ListFormat("zh-TW", {"type": "conjunction", "style": "long"}).format(["a", "b", "c"])"#, "a、b和c"),
        (r#"ListFormat("de", {"type": "disjunction", "style": "short"}).format(["a", "b", "c"])"#, "a, b oder c"),
        (r#"ListFormat("fr", {"type": "conjunction", "style": "short"}).format(["a", "b", "c", "d"])"#, "a, b, c et d"),
        (r#"ListFormat("en", {"type": "conjunction", "style": "narrow"}).format(["a", "b", "c", "d", "e"])"#, "a, b, c, d, e"),
    ];

    /// `(call, Chromium's answer, the native answer)` where ICU4X's data or
    /// options cannot give Chromium's answer. The native answer is pinned:
    /// when a newer ICU4X gives Chromium's, move the case to [`CASES`].
    const DIFFERENCES: &[(&str, &str, &str)] = &[
        // CLDR joins a "full" date to its time with a pattern of its own
        // (es: "{1}, {0}"); ICU4X has three lengths of joining pattern, and
        // its long one says " a las ".
        (
            r#"DateTimeFormat("es", {"timeZone": "UTC", "dateStyle": "full", "timeStyle": "short"}).format(new Date("2026-12-07T15:04:05Z"))"#,
            "lunes, 7 de diciembre de 2026, 15:04",
            "lunes, 7 de diciembre de 2026 a las 15:04",
        ),
        (
            r#"DateTimeFormat("es", {"dateStyle": "full", "timeStyle": "medium", "timeZone": "UTC"}).format(new Date("2026-12-07T00:04:05Z"))"#,
            "lunes, 7 de diciembre de 2026, 0:04:05",
            "lunes, 7 de diciembre de 2026 a las 00:04:05",
        ),
        // ICU4X's Spanish times pad the hour to two digits; CLDR's es
        // timeFormats, which Chromium reads, do not ("H:mm:ss").
        (
            r#"DateTimeFormat("es", {"dateStyle": "short", "timeStyle": "medium", "timeZone": "Asia/Tokyo"}).format(new Date("2026-12-07T15:04:05Z"))"#,
            "8/12/26, 0:04:05",
            "8/12/26, 00:04:05",
        ),
        (
            r#"DateTimeFormat("es", {"timeStyle": "medium", "timeZone": "UTC"}).format(new Date("2026-12-07T00:04:05Z"))"#,
            "0:04:05",
            "00:04:05",
        ),
        // ICU4X's Traditional Chinese full date has no space before the
        // weekday; Chromium's has one.
        (
            r#"DateTimeFormat("zh-TW", {"dateStyle": "full", "timeStyle": "short", "timeZone": "Asia/Taipei"}).format(new Date("2026-12-07T15:04:05Z"))"#,
            "2026年12月7日 星期一 晚上11:04",
            "2026年12月7日星期一 晚上11:04",
        ),
        // A short date: Chromium's pattern ("M/d/yy", "dd.MM.yy") always
        // writes two digits of the year; ICU4X writes the century for years
        // far from now, and has no option to leave it out.
        (
            r#"DateTimeFormat("en", {"dateStyle": "short", "timeZone": "UTC"}).format(new Date("1900-03-04T00:00:00Z"))"#,
            "3/4/00",
            "3/4/1900",
        ),
        (
            r#"DateTimeFormat("en", {"dateStyle": "short", "timeZone": "UTC"}).format(new Date("2100-03-04T00:00:00Z"))"#,
            "3/4/00",
            "3/4/2100",
        ),
        (
            r#"DateTimeFormat("de", {"dateStyle": "short", "timeZone": "UTC"}).format(new Date("1900-03-04T00:00:00Z"))"#,
            "04.03.00",
            "04.03.1900",
        ),
        // Swiss and Austrian money: ICU4X 2.3's data groups fr-CH numbers
        // with "'" where Chromium's uses a narrow no-break space, and names
        // the euro "€" in de-CH where Chromium's says "EUR"; and
        // icu_experimental 0.6 has no separators of money's own (fr-CH's
        // ".", de-AT's "."), which 0.7 has but needs ICU4X 2.4.
        (
            r#"NumberFormat("fr-CH", {"style": "decimal", "useGrouping": true}).format(-1234567.5)"#,
            "-1\u{202f}234\u{202f}567,5",
            "-1'234'567,5",
        ),
        (
            r#"NumberFormat("fr-CH", {"style": "currency", "currency": "CHF", "useGrouping": true}).format(-1234567.5)"#,
            "-1\u{202f}234\u{202f}567.50\u{a0}CHF",
            "-1'234'567,50\u{a0}CHF",
        ),
        (
            r#"NumberFormat("de-CH", {"style": "currency", "currency": "EUR", "useGrouping": true}).format(-1234567.5)"#,
            "EUR-1'234'567.50",
            "€-1'234'567.50",
        ),
        (
            r#"NumberFormat("de-AT", {"style": "currency", "currency": "EUR", "useGrouping": true}).format(-1234567.5)"#,
            "-€\u{a0}1.234.567,50",
            "-€\u{a0}1\u{a0}234\u{a0}567,50",
        ),
    ];

    /// `(call, what the error names)`: calls Chromium throws a RangeError
    /// for, and the native functions refuse with a sentence naming the
    /// value.
    #[rustfmt::skip]
    const ERRORS: &[(&str, &str)] = &[
        (r#"NumberFormat("en_US", {"useGrouping": true}).format(1)"#, "`en_US`"),
        (r#"NumberFormat("not a locale", {"useGrouping": true}).format(1)"#, "`not a locale`"),
        (r#"NumberFormat("en", {"style": "currency", "currency": "US", "useGrouping": true}).format(1)"#, "`US`"),
        (r#"NumberFormat("en", {"style": "currency", "currency": "EU1", "useGrouping": true}).format(1)"#, "`EU1`"),
        (r#"DateTimeFormat("en", {"dateStyle": "medium", "timeZone": "Mars/Olympus"}).format(new Date("2026-12-07T15:04:05Z"))"#, "`Mars/Olympus`"),
        (r#"DateTimeFormat("en", {"dateStyle": "medium", "timeZone": "UTC"}).format(new Date(8640000000000001))"#, "8640000000000001"),
        (r#"RelativeTimeFormat("en", {"numeric": "always", "style": "long"}).format(NaN, "day")"#, "NaN"),
        (r#"RelativeTimeFormat("en", {"numeric": "always", "style": "long"}).format(Infinity, "day")"#, "Infinity"),
    ];

    /// `(call, what the error names)`: well-formed tags of languages CLDR
    /// has no data for. Chromium formats them in its own default locale
    /// (en-US here, the user's language elsewhere); the native functions
    /// refuse them rather than answer in CLDR's root locale.
    #[rustfmt::skip]
    const REFUSED: &[(&str, &str)] = &[
        (r#"NumberFormat("xx-QQ", {"useGrouping": true}).format(1)"#, "`xx-QQ` is not a locale Kiln can format for"),
        (r#"ListFormat("zz-Latn", {"type": "unit", "style": "long"}).format(["a"])"#, "`zz-Latn` is not a locale Kiln can format for"),
    ];

    #[test]
    fn every_case_answers_as_chromium_does() {
        let wrong: Vec<String> = CASES
            .iter()
            .filter_map(|(call, chromium)| {
                let answer = run(call);
                (answer.as_deref() != Ok(*chromium))
                    .then(|| format!("{call}\n  Chromium: {chromium:?}\n  native:   {answer:?}"))
            })
            .collect();
        assert!(
            wrong.is_empty(),
            "{} of {} cases differ from Chromium:\n{}",
            wrong.len(),
            CASES.len(),
            wrong.join("\n")
        );
    }

    #[test]
    fn known_differences_from_chromium_are_as_written() {
        for (call, chromium, native) in DIFFERENCES {
            assert_ne!(chromium, native, "{call}: not a difference");
            assert_eq!(
                run(call).as_deref(),
                Ok(*native),
                "{call} (Chromium: {chromium:?})"
            );
        }
    }

    #[test]
    fn a_call_intl_refuses_is_an_error_naming_the_value() {
        for (call, named) in ERRORS.iter().chain(REFUSED) {
            match run(call) {
                Err(message) => assert!(
                    message.contains(named),
                    "{call}: {message:?} names no {named}"
                ),
                Ok(answer) => panic!("{call}: answered {answer:?}"),
            }
        }
    }

    /// Runs `call` through the function that stands for its `Intl` constructor.
    fn run(call: &str) -> Result<String, String> {
        let (constructor, rest) = call.split_once('(').expect("a constructor");
        let (arguments, format_arguments) = rest.split_once(").format(").expect("`.format(`");
        let format_arguments = format_arguments.strip_suffix(')').expect("a closing `)`");
        let arguments: Value =
            serde_json::from_str(&format!("[{arguments}]")).expect("JSON arguments");
        let locale = arguments[0].as_str().expect("a locale").to_owned();
        let options = &arguments[1];
        let text = |key: &str| options[key].as_str();
        let digits = |key: &str| {
            options[key]
                .as_u64()
                .map(|digits| u8::try_from(digits).expect("digits"))
        };
        let width = || match text("style") {
            Some("long") => Width::Long,
            Some("short") => Width::Short,
            Some("narrow") => Width::Narrow,
            other => panic!("style {other:?}"),
        };
        match constructor {
            "NumberFormat" => number(
                js_number(format_arguments),
                &NumberOptions {
                    locale,
                    style: match text("style") {
                        Some("decimal") | None => NumberStyle::Decimal,
                        Some("percent") => NumberStyle::Percent,
                        Some("currency") => {
                            NumberStyle::Currency(text("currency").expect("a currency").to_owned())
                        }
                        Some(other) => panic!("style {other}"),
                    },
                    minimum_fraction_digits: digits("minimumFractionDigits"),
                    maximum_fraction_digits: digits("maximumFractionDigits"),
                    grouping: match &options["useGrouping"] {
                        Value::Bool(true) => Grouping::Always,
                        Value::Bool(false) => Grouping::Never,
                        Value::String(text) if text == "min2" => Grouping::Min2,
                        _ => Grouping::Auto,
                    },
                },
            ),
            "DateTimeFormat" => {
                let argument = format_arguments
                    .strip_prefix("new Date(")
                    .and_then(|rest| rest.strip_suffix(')'))
                    .expect("new Date(…)");
                // An RFC 3339 instant in quotes, or milliseconds since 1970.
                let epoch_ms = match serde_json::from_str::<String>(argument) {
                    Ok(instant) => instant
                        .parse::<jiff::Timestamp>()
                        .expect("an RFC 3339 instant")
                        .as_millisecond() as f64,
                    Err(_) => js_number(argument),
                };
                let style = |key: &str| {
                    text(key).map(|style| match style {
                        "full" => Length::Full,
                        "long" => Length::Long,
                        "medium" => Length::Medium,
                        "short" => Length::Short,
                        other => panic!("{key} {other}"),
                    })
                };
                date(
                    epoch_ms,
                    &DateOptions {
                        locale,
                        time_zone: text("timeZone").expect("a timeZone").to_owned(),
                        date_style: style("dateStyle"),
                        time_style: style("timeStyle"),
                    },
                )
            }
            "RelativeTimeFormat" => {
                let (value, unit) = format_arguments.split_once(", ").expect("value, unit");
                let unit: String = serde_json::from_str(unit).expect("a unit");
                let unit = TimeUnit::ALL
                    .into_iter()
                    .find(|candidate| candidate.name() == unit)
                    .expect("a unit's name");
                relative_time(
                    js_number(value),
                    unit,
                    &RelativeTimeOptions {
                        locale,
                        auto: text("numeric") == Some("auto"),
                        width: width(),
                    },
                )
            }
            "ListFormat" => list(
                &serde_json::from_str::<Vec<String>>(format_arguments)
                    .expect("a JSON array of strings"),
                &ListOptions {
                    locale,
                    kind: match text("type") {
                        Some("conjunction") => ListKind::Conjunction,
                        Some("disjunction") => ListKind::Disjunction,
                        Some("unit") => ListKind::Unit,
                        other => panic!("type {other:?}"),
                    },
                    width: width(),
                },
            ),
            other => panic!("no Intl.{other} here"),
        }
    }

    /// A JavaScript number literal: `-0`, `NaN` and `Infinity` included.
    fn js_number(text: &str) -> f64 {
        text.trim().parse().expect("a number")
    }
}
