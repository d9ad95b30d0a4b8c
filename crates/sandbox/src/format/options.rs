//! What `format.*` is asked for, read and checked once, the same for both
//! backends: the browser's `Intl` (`browser.rs`) and ICU4X (`native.rs`).

/// How wide a relative time's or a list's words are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Width {
    Long,
    Short,
    Narrow,
}

impl Width {
    pub(crate) const ALL: [Self; 3] = [Self::Long, Self::Short, Self::Narrow];

    /// Its name in `Intl`'s options.
    pub(crate) const fn name(self) -> &'static str {
        match self {
            Self::Long => "long",
            Self::Short => "short",
            Self::Narrow => "narrow",
        }
    }
}

/// A date's or a time's length, as `Intl.DateTimeFormat`'s `dateStyle` and
/// `timeStyle` name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Length {
    Full,
    Long,
    Medium,
    Short,
}

impl Length {
    pub(crate) const fn name(self) -> &'static str {
        match self {
            Self::Full => "full",
            Self::Long => "long",
            Self::Medium => "medium",
            Self::Short => "short",
        }
    }
}

/// `format.number`'s style.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NumberStyle {
    Decimal,
    /// The value times 100, with the locale's percent sign.
    Percent,
    /// An ISO 4217 code, upper case (`EUR`).
    Currency(String),
}

/// How `format.number` groups digits, as `Intl`'s `useGrouping` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Grouping {
    /// The locale's rule (the default): es writes 1234 but 12.345.
    Auto,
    /// From 1,000 up in every locale (`useGrouping: true`).
    Always,
    /// Only from five digits up.
    Min2,
    /// Never (`useGrouping: false`).
    Never,
}

/// `format.number(value, options)`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NumberOptions {
    /// A well-formed BCP 47 tag (`en`, `de-CH`, `zh-Hans`).
    pub locale: String,
    pub style: NumberStyle,
    /// 0 to 20; the style's default when absent (0 for decimal and
    /// percent, the currency's digits for currency).
    pub minimum_fraction_digits: Option<u8>,
    /// 0 to 20, at least the minimum; the style's default when absent (3
    /// for decimal, 0 for percent, the currency's digits for currency).
    pub maximum_fraction_digits: Option<u8>,
    /// Separators between groups of digits (`1,234`).
    pub grouping: Grouping,
}

/// `format.date(date, options)`: at least one of the two styles.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DateOptions {
    pub locale: String,
    /// An IANA zone name (`Europe/Berlin`, `UTC`).
    pub time_zone: String,
    pub date_style: Option<Length>,
    /// `Medium` or `Short` only: the longer ones name the zone, which the
    /// backends spell differently.
    pub time_style: Option<Length>,
}

/// The unit of `format.relativeTime(value, unit)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TimeUnit {
    Year,
    Quarter,
    Month,
    Week,
    Day,
    Hour,
    Minute,
    Second,
}

impl TimeUnit {
    pub(crate) const ALL: [Self; 8] = [
        Self::Year,
        Self::Quarter,
        Self::Month,
        Self::Week,
        Self::Day,
        Self::Hour,
        Self::Minute,
        Self::Second,
    ];

    /// Its singular name, as `Intl.RelativeTimeFormat` takes it.
    pub(crate) const fn name(self) -> &'static str {
        match self {
            Self::Year => "year",
            Self::Quarter => "quarter",
            Self::Month => "month",
            Self::Week => "week",
            Self::Day => "day",
            Self::Hour => "hour",
            Self::Minute => "minute",
            Self::Second => "second",
        }
    }
}

/// `format.relativeTime(value, unit, options)`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RelativeTimeOptions {
    pub locale: String,
    /// `auto` says "yesterday" and "next year" where the locale has a word;
    /// `always` (false) says "1 day ago".
    pub auto: bool,
    pub width: Width,
}

/// What a list joins with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListKind {
    /// "a, b, and c"
    Conjunction,
    /// "a, b, or c"
    Disjunction,
    /// "a, b, c"
    Unit,
}

impl ListKind {
    pub(crate) const ALL: [Self; 3] = [Self::Conjunction, Self::Disjunction, Self::Unit];

    pub(crate) const fn name(self) -> &'static str {
        match self {
            Self::Conjunction => "conjunction",
            Self::Disjunction => "disjunction",
            Self::Unit => "unit",
        }
    }
}

/// `format.list(items, options)`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ListOptions {
    pub locale: String,
    pub kind: ListKind,
    pub width: Width,
}
