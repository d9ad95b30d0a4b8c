//! The guest's `console`: `log`, `info`, `warn`, `error` and `debug`, formatted in
//! the guest's context and kept in a bounded buffer the run report takes.

use std::cell::RefCell;
use std::rc::Rc;

use boa_engine::object::ObjectInitializer;
use boa_engine::property::Attribute;
use boa_engine::{Context, JsResult, JsValue, NativeFunction, js_string};
use kiln_types::{ConsoleLevel, ConsoleLine};

use crate::inspect;

/// Console lines of one run, bounded by a byte budget. A line costs its bytes
/// and the newline that ends it in the run's output, so an empty line is not
/// free; lines past the budget are counted, not kept, so a chatty program
/// cannot exhaust the host's memory.
#[derive(Clone)]
pub(crate) struct ConsoleBuffer(Rc<RefCell<Inner>>);

struct Inner {
    lines: Vec<ConsoleLine>,
    /// How many of `lines` were handed out by [`ConsoleBuffer::new_lines`].
    reported: usize,
    bytes_left: usize,
    dropped: usize,
}

impl ConsoleBuffer {
    pub(crate) fn new(budget_bytes: usize) -> Self {
        Self(Rc::new(RefCell::new(Inner {
            lines: Vec::new(),
            reported: 0,
            bytes_left: budget_bytes,
            dropped: 0,
        })))
    }

    fn push(&self, level: ConsoleLevel, text: String) {
        let mut inner = self.0.borrow_mut();
        let cost = text.len().saturating_add(1);
        if cost <= inner.bytes_left {
            inner.bytes_left -= cost;
            inner.lines.push(ConsoleLine { level, text });
        } else {
            inner.bytes_left = 0;
            inner.dropped += 1;
        }
    }

    /// Sets the run's budget before the program prints anything.
    pub(crate) fn set_budget(&self, budget_bytes: usize) {
        self.0.borrow_mut().bytes_left = budget_bytes;
    }

    /// The lines kept since the last call.
    pub(crate) fn new_lines(&self) -> Vec<ConsoleLine> {
        let mut inner = self.0.borrow_mut();
        let start = inner.reported.min(inner.lines.len());
        inner.reported = inner.lines.len();
        inner.lines[start..].to_vec()
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
