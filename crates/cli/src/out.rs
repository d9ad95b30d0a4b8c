//! A command's output on standard output: its result, its JSON, its lines.
//!
//! A reader that goes away before the output is all written (`kiln run … |
//! head`) is not an error: Rust ignores SIGPIPE, so the write fails with
//! `BrokenPipe`, and from then on the command's output is dropped quietly and
//! the command ends with its own status. SIGPIPE stays ignored process-wide on
//! purpose: restored, it would end `kiln mcp serve` when a sandbox child it
//! writes to dies. Any other failure to write (a full disk, a closed
//! descriptor) is said once on stderr, the rest of the output is dropped, and
//! a command that would have exited 0 exits 1 instead: a result written only
//! in part must not pass for a whole one.
//!
//! Each write is flushed, so that its failure is seen here rather than lost
//! when the process's buffer is flushed at exit. Protocol streams (a sandbox
//! process's, `kiln mcp serve --stdio`'s) write their own messages.

use std::fmt::Display;
use std::io::{self, Write as _};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU8, Ordering};

/// What became of standard output so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Every write so far went through.
    Open,
    /// The reader went away: the rest is dropped, and that is no error.
    Gone,
    /// A write failed otherwise, and it was said: the rest is dropped, and
    /// the command fails.
    Failed,
}

impl State {
    const fn code(self) -> u8 {
        match self {
            Self::Open => 0,
            Self::Gone => 1,
            Self::Failed => 2,
        }
    }

    const fn of(code: u8) -> Self {
        match code {
            0 => Self::Open,
            1 => Self::Gone,
            _ => Self::Failed,
        }
    }

    /// The state after a write, while open, that answered `written`.
    fn after(written: &io::Result<()>) -> Self {
        match written {
            Ok(()) => Self::Open,
            Err(error) if error.kind() == io::ErrorKind::BrokenPipe => Self::Gone,
            Err(_) => Self::Failed,
        }
    }
}

/// The process's one standard output, shared by every thread that prints.
static STATE: AtomicU8 = AtomicU8::new(State::Open.code());

fn state() -> State {
    State::of(STATE.load(Ordering::Relaxed))
}

/// Prints `text` and a newline, as `println!` would, unless the output is
/// already closed.
pub(crate) fn line(text: impl Display) {
    write(format_args!("{text}\n"));
}

/// Prints `text` as it is, as `print!` would, unless the output is already
/// closed.
pub(crate) fn text(text: impl Display) {
    write(format_args!("{text}"));
}

fn write(text: std::fmt::Arguments<'_>) {
    if state() != State::Open {
        return;
    }
    let written = written_to(&mut io::stdout().lock(), text);
    let next = State::after(&written);
    if let Err(error) = &written
        && next == State::Failed
    {
        // Said on stderr, which may be gone too: then nothing more can be said.
        let _ = writeln!(
            io::stderr(),
            "kiln: the output could not be written to standard output: {error}"
        );
    }
    STATE.store(next.code(), Ordering::Relaxed);
}

/// Writes `text` to `out` and flushes it.
fn written_to(out: &mut impl io::Write, text: std::fmt::Arguments<'_>) -> io::Result<()> {
    out.write_fmt(text)?;
    out.flush()
}

/// The exit code of a command that answered `code`: its own, but for a
/// command that would have succeeded although its output could not be
/// written.
pub(crate) fn status(code: ExitCode) -> ExitCode {
    if state() == State::Failed && code == ExitCode::SUCCESS {
        ExitCode::FAILURE
    } else {
        code
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer whose every write fails with `kind`.
    struct Failing(io::ErrorKind);

    impl io::Write for Failing {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(self.0.into())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_reader_gone_is_quiet_and_any_other_failure_fails_the_command() {
        let cases = [
            (None, State::Open),
            (Some(io::ErrorKind::BrokenPipe), State::Gone),
            (Some(io::ErrorKind::StorageFull), State::Failed),
            (Some(io::ErrorKind::Other), State::Failed),
        ];
        for (failing, after) in cases {
            let written = match failing {
                None => written_to(&mut Vec::new(), format_args!("hi\n")),
                Some(kind) => written_to(&mut Failing(kind), format_args!("hi\n")),
            };
            assert_eq!(State::after(&written), after, "{failing:?}");
        }
    }

    #[test]
    fn each_state_round_trips_through_its_code() {
        for state in [State::Open, State::Gone, State::Failed] {
            assert_eq!(State::of(state.code()), state);
        }
    }
}
