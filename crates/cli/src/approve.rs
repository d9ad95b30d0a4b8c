//! Who answers the CLI's permission questions: the terminal, a fixed answer,
//! or nobody (the headless gate).
//!
//! The program runs in a child process whose standard streams are pipes, so
//! the terminal is reached through `/dev/tty`: the question is written there
//! (not to stdout, which carries the result) and `y`, `n` or `a` (allow for
//! this session) is read back.

use std::io::{BufRead as _, BufReader, Write as _};
use std::sync::Mutex;

use futures::channel::oneshot;
use futures::future::LocalBoxFuture;
use kiln_capabilities::{Answer, ApprovalRequest, Approver};

/// Asks on the controlling terminal, one question at a time.
pub struct Terminal;

/// One question at a time, even when calls run in parallel.
static ASKING: Mutex<()> = Mutex::new(());

impl Approver for Terminal {
    fn ask(&self, request: ApprovalRequest) -> LocalBoxFuture<'static, Answer> {
        let (sender, receiver) = oneshot::channel();
        // A thread, so the sandbox's other calls and sleeps go on meanwhile.
        let spawned = std::thread::Builder::new()
            .name("kiln-approve".into())
            .spawn(move || {
                let _ = sender.send(ask_terminal(&request));
            });
        Box::pin(async move {
            if let Err(error) = spawned {
                return Answer::Unavailable {
                    reason: format!("the terminal could not be asked: {error}"),
                };
            }
            receiver.await.unwrap_or_else(|_| Answer::Unavailable {
                reason: "the terminal question ended without an answer".into(),
            })
        })
    }
}

fn ask_terminal(request: &ApprovalRequest) -> Answer {
    let _one_at_a_time = ASKING.lock();
    let tty = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty");
    let mut tty = match tty {
        Ok(tty) => tty,
        Err(error) => {
            return Answer::Unavailable {
                reason: format!("kiln run could not open the terminal to ask (/dev/tty: {error})"),
            };
        }
    };
    let args = serde_json::to_string(&request.args).unwrap_or_else(|_| "?".into());
    let question = format!(
        "\nkiln: {} (call {}) wants to run — {} tool from {}.\n  Why asked: {}.\n  Arguments: {}\n  Allow? [y]es / [n]o / [a]llow {} for this session: ",
        request.tool,
        request.call_number,
        request.category,
        request.module,
        request.reason.sentence(),
        args,
        request.tool,
    );
    if tty.write_all(question.as_bytes()).is_err() {
        return Answer::Unavailable {
            reason: "kiln run could not write its question to the terminal".into(),
        };
    }
    let mut reader = BufReader::new(tty);
    loop {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => {
                return Answer::Unavailable {
                    reason: "the terminal closed before answering".into(),
                };
            }
            Ok(_) => {}
        }
        match line.trim().to_ascii_lowercase().as_str() {
            "y" | "yes" => return Answer::Approve,
            "n" | "no" => return Answer::Deny,
            "a" | "allow" => return Answer::AllowForSession,
            _ => {
                let _ = reader.get_mut().write_all(b"  Please answer y, n or a: ");
            }
        }
    }
}
