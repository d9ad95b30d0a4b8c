//! What the storage panels (Memory, Files, History) say, as plain data and
//! strings: sizes, times, the breadcrumb of a folder, a
//! file's preview, a store error's message and hint, and which panels a
//! committed change concerns. Pure, so it is tested natively.

use kiln_types::records::{Change, Table};
use kiln_types::runtime::Problem;

/// The most of a text file the Files panel shows.
pub(crate) const PREVIEW_BYTES: usize = 256 * 1024;

/// A byte count for people: `512 B`, `1.5 KiB`, `16.0 MiB`.
pub(crate) fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// A moment as `YYYY-MM-DD HH:MM` in the person's time zone.
/// `offset_minutes` is JavaScript's `Date#getTimezoneOffset()`: UTC minus
/// local time, in minutes (−120 in Central Europe in summer).
pub(crate) fn format_time(epoch_ms: u64, offset_minutes: i64) -> String {
    let local_minutes = (epoch_ms / 60_000) as i64 - offset_minutes;
    let days = local_minutes.div_euclid(24 * 60);
    let minute_of_day = local_minutes.rem_euclid(24 * 60);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}",
        minute_of_day / 60,
        minute_of_day % 60
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_index + 2) / 5 + 1) as u32;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// One step of a folder's breadcrumb: what it says and the folder it opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Crumb {
    pub label: String,
    pub path: String,
}

/// The workspace root, then each folder down to `dir` (a workspace path,
/// `/`-separated; the empty path is the root).
pub(crate) fn breadcrumb(dir: &str) -> Vec<Crumb> {
    let mut crumbs = vec![Crumb {
        label: "Workspace".to_owned(),
        path: String::new(),
    }];
    for part in dir.split('/').filter(|part| !part.is_empty()) {
        let path = join(&crumbs[crumbs.len() - 1].path, part);
        crumbs.push(Crumb {
            label: part.to_owned(),
            path,
        });
    }
    crumbs
}

/// `name` inside the folder `dir`.
fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_owned()
    } else {
        format!("{dir}/{name}")
    }
}

/// The path of `name` in `dir`, for a new folder or an uploaded file: one
/// name, not a path. `Err` is a sentence naming what is wrong.
/// The runtime worker checks the whole path again as it writes.
pub(crate) fn child_path(dir: &str, name: &str) -> Result<String, String> {
    let name = name.trim();
    if name.is_empty() {
        return Err("Type a name first.".to_owned());
    }
    if name.contains('/') || name.contains('\\') {
        return Err(format!(
            "`{name}` is a path; give one name (open the folder first to make it there)."
        ));
    }
    if name == "." || name == ".." {
        return Err(format!("`{name}` is not a name a file or folder can have."));
    }
    let path = join(dir, name);
    if path.chars().any(char::is_control) {
        return Err(format!("path `{path}` contains a control character"));
    }
    Ok(path)
}

/// How the Files panel shows an opened file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Preview {
    /// UTF-8 text, at most [`PREVIEW_BYTES`] of it; `cut` when there was more.
    Text { text: String, cut: bool },
    /// Anything else: only its size is shown.
    Binary { bytes: u64 },
}

/// Text when the bytes are UTF-8 without NUL characters, else binary.
pub(crate) fn preview(bytes: &[u8]) -> Preview {
    if bytes.contains(&0) {
        return Preview::Binary {
            bytes: bytes.len() as u64,
        };
    }
    let shown = &bytes[..bytes.len().min(PREVIEW_BYTES)];
    let text = match std::str::from_utf8(shown) {
        Ok(text) => text,
        // Cut inside a character: keep what precedes it, when that is all.
        Err(error) if error.error_len().is_none() && shown.len() < bytes.len() => {
            std::str::from_utf8(&shown[..error.valid_up_to()]).unwrap_or_default()
        }
        Err(_) => {
            return Preview::Binary {
                bytes: bytes.len() as u64,
            };
        }
    };
    Preview::Text {
        text: text.to_owned(),
        cut: shown.len() < bytes.len(),
    }
}

/// A store error for the page: its sentence, then what to do (the
/// problem's hint as a `hint:` line), if anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ErrorText {
    pub message: String,
    pub hint: Option<String>,
    /// The problem's code (`conflict`, `quota_exceeded`, …), for the
    /// page's styles and tests.
    pub code: String,
}

impl ErrorText {
    pub(crate) fn new(problem: &Problem) -> Self {
        Self::with_prefix("", problem)
    }

    /// A problem the runtime worker (or the store behind it) reported,
    /// after a few words saying what was being done.
    pub(crate) fn with_prefix(before: &str, problem: &Problem) -> Self {
        Self {
            message: format!("{before}{}", problem.message),
            hint: problem.hint.as_ref().map(|hint| format!("hint: {hint}")),
            code: problem.code.clone().unwrap_or_else(|| "runtime".to_owned()),
        }
    }

    /// The message and the hint as one text (the hint on its own line).
    pub(crate) fn sentence(&self) -> String {
        match &self.hint {
            Some(hint) => format!("{}\n{hint}", self.message),
            None => self.message.clone(),
        }
    }

    /// An error the page itself found (not the store's).
    pub(crate) fn plain(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            hint: None,
            code: "page".to_owned(),
        }
    }
}

impl std::fmt::Display for ErrorText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.sentence())
    }
}

/// An `ErrorText` is what a panel's load throws to its `<ErrorBoundary>`.
impl std::error::Error for ErrorText {}

/// Which panels a batch of committed changes concerns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Affected {
    pub memories: bool,
    pub jobs: bool,
    pub run_entries: bool,
    pub config: bool,
    /// Threads and messages: the History panel's search reads them.
    pub messages: bool,
}

pub(crate) fn affected(changes: &[Change]) -> Affected {
    let mut affected = Affected::default();
    for change in changes {
        match change.table {
            Table::Memories => affected.memories = true,
            Table::Jobs => affected.jobs = true,
            Table::RunEntries => affected.run_entries = true,
            Table::Config => affected.config = true,
            Table::Threads | Table::Messages => affected.messages = true,
        }
    }
    affected
}

/// A JSON value as the panels show it: indented.
pub(crate) fn value_text(value: &serde_json::Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

/// A job's status in a word for people.
pub(crate) fn status_label(status: &str) -> &str {
    match status {
        "running" => "running",
        "ok" => "finished",
        "error" => "failed",
        "cancelled" => "cancelled",
        "interrupted" => "interrupted (its tab closed)",
        other => other,
    }
}

/// How long a job took, or that it has not ended.
pub(crate) fn duration_label(started_ms: u64, finished_ms: Option<u64>) -> String {
    match finished_ms {
        None => "not finished".to_owned(),
        Some(finished) => {
            let ms = finished.saturating_sub(started_ms);
            if ms < 1000 {
                format!("{ms} ms")
            } else {
                format!("{:.1} s", ms as f64 / 1000.0)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        let cases = [
            (0, "0 B"),
            (1023, "1023 B"),
            (1024, "1.0 KiB"),
            (1536, "1.5 KiB"),
            (16 * 1024 * 1024, "16.0 MiB"),
            (3 * 1024 * 1024 * 1024 + 1, "3.0 GiB"),
        ];
        for (bytes, shown) in cases {
            assert_eq!(format_bytes(bytes), shown, "{bytes}");
        }
    }

    #[test]
    fn times_in_the_persons_zone() {
        // 2025-03-04T09:05:30Z
        let at = 1_741_079_130_000;
        let cases = [
            (0, "2025-03-04 09:05"),
            (-60, "2025-03-04 10:05"),
            (300, "2025-03-04 04:05"),
            (-900, "2025-03-05 00:05"),
            (600, "2025-03-03 23:05"),
        ];
        for (offset, shown) in cases {
            assert_eq!(format_time(at, offset), shown, "{offset}");
        }
        assert_eq!(format_time(0, 0), "1970-01-01 00:00");
        // A leap day.
        assert_eq!(format_time(1_709_208_000_000, 0), "2024-02-29 12:00");
    }

    #[test]
    fn the_breadcrumb_of_a_folder() {
        let crumbs = |path: &str| {
            breadcrumb(path)
                .into_iter()
                .map(|crumb| (crumb.label, crumb.path))
                .collect::<Vec<_>>()
        };
        assert_eq!(crumbs(""), [("Workspace".to_owned(), String::new())]);
        assert_eq!(
            crumbs("notes/2025/march"),
            [
                ("Workspace".to_owned(), String::new()),
                ("notes".to_owned(), "notes".to_owned()),
                ("2025".to_owned(), "notes/2025".to_owned()),
                ("march".to_owned(), "notes/2025/march".to_owned()),
            ]
        );
    }

    #[test]
    fn a_new_name_in_a_folder() {
        let notes = "notes";
        let cases = [
            ("a.txt", Ok("notes/a.txt")),
            ("  b  ", Ok("notes/b")),
            ("", Err("Type a name first.")),
            (
                "x/y",
                Err("`x/y` is a path; give one name (open the folder first to make it there)."),
            ),
            ("..", Err("`..` is not a name a file or folder can have.")),
            (
                "a\u{7}",
                Err("path `notes/a\u{7}` contains a control character"),
            ),
        ];
        for (name, expected) in cases {
            let got = child_path(notes, name);
            assert_eq!(
                got,
                expected.map(str::to_owned).map_err(str::to_owned),
                "{name:?}"
            );
        }
        assert_eq!(child_path("", "top").unwrap(), "top");
    }

    #[test]
    fn previews() {
        assert_eq!(
            preview(b"hello\n"),
            Preview::Text {
                text: "hello\n".to_owned(),
                cut: false
            }
        );
        assert_eq!(
            preview(&[0x89, b'P', b'N', b'G', 0]),
            Preview::Binary { bytes: 5 }
        );
        assert_eq!(preview(&[0xff, 0xfe, b'a']), Preview::Binary { bytes: 3 });
        // A long text is cut, on a character boundary.
        let mut long = "a".repeat(PREVIEW_BYTES - 1).into_bytes();
        long.extend("é and more".as_bytes());
        match preview(&long) {
            Preview::Text { text, cut } => {
                assert!(cut);
                assert_eq!(text.len(), PREVIEW_BYTES - 1);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_problem_is_a_message_and_a_hint() {
        let conflict = Problem {
            bad_request: false,
            message: "`m-1` in memories was changed elsewhere".to_owned(),
            code: Some("conflict".to_owned()),
            hint: Some("reload it and apply the change again".to_owned()),
            status: None,
        };
        assert_eq!(
            ErrorText::with_prefix("Not saved: ", &conflict),
            ErrorText {
                message: "Not saved: `m-1` in memories was changed elsewhere".to_owned(),
                hint: Some("hint: reload it and apply the change again".to_owned()),
                code: "conflict".into(),
            }
        );
        let plain = ErrorText::new(&Problem::bad_request("a memory's text is empty"));
        assert_eq!(plain.message, "a memory's text is empty");
        assert_eq!(plain.hint, None);
    }

    #[test]
    fn changes_reach_the_panels_they_concern() {
        let change = |table| Change {
            table,
            key: "k".to_owned(),
            version: Some(1),
        };
        assert_eq!(affected(&[]), Affected::default());
        assert_eq!(
            affected(&[change(Table::Memories), change(Table::RunEntries)]),
            Affected {
                memories: true,
                run_entries: true,
                ..Affected::default()
            }
        );
        assert_eq!(
            affected(&[change(Table::Config), change(Table::Messages)]),
            Affected {
                config: true,
                messages: true,
                ..Affected::default()
            }
        );
    }

    #[test]
    fn job_words() {
        assert_eq!(status_label("ok"), "finished");
        assert_eq!(status_label("error"), "failed");
        assert_eq!(status_label("odd"), "odd");
        assert_eq!(duration_label(1000, None), "not finished");
        assert_eq!(duration_label(1000, Some(1250)), "250 ms");
        assert_eq!(duration_label(1000, Some(3500)), "2.5 s");
    }
}
