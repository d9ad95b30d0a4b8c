//! `progress(percent, message?)`: a long program says how far it has come.
//!
//! Fire-and-forget: the call answers `undefined` at once and the report goes
//! to the host as it is made ([`ToolHost::progress`]), also from a loop that
//! never goes idle. `percent` is clamped to 0–100 and the message cut at
//! [`MAX_PROGRESS_MESSAGE_CHARS`] characters; a report within
//! [`PROGRESS_INTERVAL_MS`] of the last one sent, or past
//! [`MAX_PROGRESS_REPORTS`] in the run, is dropped, so a program that reports
//! in a tight loop costs the host nothing. Only a `percent` that is not a
//! number is an error: the program has a bug worth seeing.

use std::cell::RefCell;
use std::rc::Rc;

use boa_engine::property::Attribute;
use boa_engine::{Context, JsNativeError, JsResult, JsValue, NativeFunction, js_string};
use kiln_types::{
    MAX_PROGRESS_MESSAGE_CHARS, MAX_PROGRESS_REPORTS, PROGRESS_INTERVAL_MS, Progress,
};

use crate::clock::Moment;
use crate::tools::ToolHost;

/// Where a run's reports go, and how many it has sent and when.
#[derive(Clone, Default)]
pub(crate) struct ProgressReports(Rc<RefCell<Reports>>);

#[derive(Default)]
struct Reports {
    host: Option<Rc<dyn ToolHost>>,
    sent: u32,
    last: Option<Moment>,
}

impl ProgressReports {
    /// Starts the run: its reports go to `host`.
    pub(crate) fn start(&self, host: Rc<dyn ToolHost>) {
        let mut reports = self.0.borrow_mut();
        reports.host = Some(host);
        reports.sent = 0;
        reports.last = None;
    }

    /// Sends `progress` unless the interval or the run's count says to drop
    /// it; says whether it was sent.
    fn report(&self, progress: &Progress) -> bool {
        let now = Moment::now();
        let host = {
            let mut reports = self.0.borrow_mut();
            let soon = reports.last.is_some_and(|last| {
                now.saturating_duration_since(last).as_secs_f64() * 1e3 < PROGRESS_INTERVAL_MS
            });
            if soon || reports.sent >= MAX_PROGRESS_REPORTS {
                return false;
            }
            reports.sent += 1;
            reports.last = Some(now);
            reports.host.clone()
        };
        if let Some(host) = host {
            host.progress(progress);
        }
        true
    }
}

/// Defines the global `progress` on `context`, reporting into `reports`.
pub(crate) fn install(context: &mut Context, reports: ProgressReports) -> JsResult<()> {
    context.insert_data(reports);
    let progress = NativeFunction::from_fn_ptr(progress).to_js_function(context.realm());
    let attributes = Attribute::WRITABLE | Attribute::CONFIGURABLE;
    context.register_global_property(js_string!("progress"), progress, attributes)
}

fn progress(_this: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let percent = args.first().cloned().unwrap_or_default();
    let Some(percent) = percent.as_number().filter(|number| !number.is_nan()) else {
        let shown = crate::inspect::shown(&percent, context);
        return Err(JsNativeError::typ()
            .with_message(format!(
                "progress(percent, message) takes a number from 0 to 100 as `percent`; got {shown}"
            ))
            .into());
    };
    let message = match args.get(1) {
        None => None,
        Some(message) if message.is_undefined() || message.is_null() => None,
        Some(message) => {
            let text = message.to_string(context)?.to_std_string_escaped();
            Some(match text.char_indices().nth(MAX_PROGRESS_MESSAGE_CHARS) {
                Some((cut, _)) => text[..cut].to_owned(),
                None => text,
            })
        }
    };
    if let Some(reports) = context.get_data::<ProgressReports>() {
        reports.report(&Progress {
            percent: percent.clamp(0.0, 100.0),
            message,
        });
    }
    Ok(JsValue::undefined())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::NoTools;

    #[test]
    fn a_run_sends_at_most_its_count_of_reports_and_the_next_run_starts_afresh() {
        let reports = ProgressReports::default();
        reports.start(Rc::new(NoTools));
        let half = Progress {
            percent: 50.0,
            message: None,
        };
        let mut sent = 0;
        for _ in 0..MAX_PROGRESS_REPORTS + 5 {
            // As if each came after the interval.
            reports.0.borrow_mut().last = None;
            sent += u32::from(reports.report(&half));
        }
        assert_eq!(sent, MAX_PROGRESS_REPORTS);
        // One sooner than the interval is dropped.
        reports.start(Rc::new(NoTools));
        assert!(reports.report(&half));
        assert!(!reports.report(&half));
    }
}
