//! The guest's `console`: `log`, `info`, `warn`, `error` and `debug`, formatted in
//! the guest's context and kept in a bounded buffer the run report takes.
//!
//! Each line kept also goes to the run's [`ToolHost`] as it is printed
//! ([`ToolHost::console`]), one line at a time: a guest that never stops running
//! JavaScript (`console.log(x); while (true) {}`) gives the sandbox no later
//! moment to send it, and its host ends such a run by terminating its worker
//! or process, which takes whatever was not sent with it. The console budget
//! bounds what is sent as it bounds what is kept, so a program printing in a
//! loop sends at most one message per line it could keep (a line costs at
//! least one byte of the budget). Past the budget nothing is kept, and the
//! count of dropped lines is told at each of the first [`TOLD_EACH`] drops,
//! then each time it reaches a power of two, and at each idle point: a host
//! that ends the run from outside has the exact count up to there, and at
//! least half of it past there, for at most a few dozen more messages however
//! long the flood. The report carries every kept line and the exact count,
//! and is what a host reports when it comes: the lines streamed are its copy
//! for the run it has to end.

use std::cell::RefCell;
use std::rc::Rc;

use boa_engine::object::ObjectInitializer;
use boa_engine::property::Attribute;
use boa_engine::{Context, JsResult, JsValue, NativeFunction, js_string};
use kiln_types::{ConsoleLevel, ConsoleLine};

use crate::inspect;
use crate::tools::ToolHost;

/// How many dropped lines are each told to the host; past that, the count is
/// told at each power of two.
const TOLD_EACH: usize = 1024;

/// Console lines of one run, bounded by a byte budget. A line costs its bytes
/// and the newline that ends it in the run's output, so an empty line is not
/// free; lines past the budget are counted, not kept, so a chatty program
/// cannot exhaust the host's memory.
#[derive(Clone)]
pub(crate) struct ConsoleBuffer(Rc<RefCell<Inner>>);

struct Inner {
    lines: Vec<ConsoleLine>,
    bytes_left: usize,
    dropped: usize,
    /// The count of dropped lines the host was last told.
    dropped_told: usize,
    /// Where each kept line goes as it is printed, once the run has started.
    host: Option<Rc<dyn ToolHost>>,
}

/// What a print tells the host: the line it kept, if any, and the count of
/// lines dropped so far.
struct Told {
    host: Rc<dyn ToolHost>,
    line: Option<ConsoleLine>,
    dropped: usize,
}

impl ConsoleBuffer {
    pub(crate) fn new(budget_bytes: usize) -> Self {
        Self(Rc::new(RefCell::new(Inner {
            lines: Vec::new(),
            bytes_left: budget_bytes,
            dropped: 0,
            dropped_told: 0,
            host: None,
        })))
    }

    fn push(&self, level: ConsoleLevel, text: String) {
        let told = {
            let mut inner = self.0.borrow_mut();
            let cost = text.len().saturating_add(1);
            let line = if cost <= inner.bytes_left {
                inner.bytes_left -= cost;
                let line = ConsoleLine { level, text };
                inner.lines.push(line.clone());
                Some(line)
            } else {
                inner.bytes_left = 0;
                inner.dropped += 1;
                if inner.dropped > TOLD_EACH && !inner.dropped.is_power_of_two() {
                    return;
                }
                None
            };
            inner.dropped_told = inner.dropped;
            inner.host.clone().map(|host| Told {
                host,
                line,
                dropped: inner.dropped,
            })
        };
        // Told with the buffer released: the host may take its time.
        if let Some(Told {
            host,
            line,
            dropped,
        }) = told
        {
            host.console(line.as_slice(), dropped);
        }
    }

    /// Starts the run: sets its budget before the program prints anything,
    /// and where its lines go as they are printed.
    pub(crate) fn start(&self, budget_bytes: usize, host: Rc<dyn ToolHost>) {
        let mut inner = self.0.borrow_mut();
        inner.bytes_left = budget_bytes;
        inner.host = Some(host);
    }

    /// Tells the host the count of dropped lines if it moved since it was
    /// last told (the guest is going idle).
    pub(crate) fn catch_up(&self) {
        let told = {
            let mut inner = self.0.borrow_mut();
            if inner.dropped == inner.dropped_told {
                return;
            }
            inner.dropped_told = inner.dropped;
            inner.host.clone().map(|host| (host, inner.dropped))
        };
        if let Some((host, dropped)) = told {
            host.console(&[], dropped);
        }
    }

    /// The kept lines and the number dropped.
    pub(crate) fn take(&self) -> (Vec<ConsoleLine>, usize) {
        let mut inner = self.0.borrow_mut();
        (std::mem::take(&mut inner.lines), inner.dropped)
    }
}

/// Defines the global `console` object on `context`, printing into `buffer`.
pub(crate) fn install(context: &mut Context, buffer: ConsoleBuffer) -> JsResult<()> {
    context.insert_data(buffer);
    let mut console = ObjectInitializer::new(context);
    for level in ConsoleLevel::ALL {
        let print = NativeFunction::from_copy_closure(move |_this, args, context| {
            print(level, args, context)
        });
        console.function(print, js_string!(level.method()), 0);
    }
    let console = console.build();
    context.register_global_property(js_string!("console"), console, Attribute::all())?;
    Ok(())
}

fn print(level: ConsoleLevel, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let mut text = String::new();
    for (index, arg) in args.iter().enumerate() {
        if index > 0 {
            text.push(' ');
        }
        text.push_str(&inspect::display(arg, context)?);
    }
    if let Some(buffer) = context.get_data::<ConsoleBuffer>() {
        buffer.push(level, text);
    }
    Ok(JsValue::undefined())
}
