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
use kiln_types::permission::card_text;

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

/// The terminal card: the tool, its category and the reason first, then the
/// arguments (already cut to a card's length by the ladder). Everything that
/// came from the program or a server is written with [`card_text`], so no
/// control character or bidirectional override reaches the terminal raw.
fn question(request: &ApprovalRequest) -> String {
    let args = serde_json::to_string(&request.args).unwrap_or_else(|_| "?".into());
    format!(
        "\nkiln: {tool} (call {}) wants to run — {} tool from {}.\n  Why asked: {}.\n  Arguments: {}\n  Allow? [y]es / [n]o / [a]llow {tool} for this session: ",
        request.call_number,
        request.category,
        card_text(&request.module),
        request.reason.sentence(),
        card_text(&args),
        tool = card_text(&request.tool),
    )
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
    let question = question(request);
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

/// Answers an agent's `ask_user` on the controlling terminal.
pub struct TerminalPerson;

impl kiln_agent::Person for TerminalPerson {
    fn ask(&self, question: String) -> LocalBoxFuture<'static, Result<String, String>> {
        let (sender, receiver) = oneshot::channel();
        let spawned = std::thread::Builder::new()
            .name("kiln-ask-user".into())
            .spawn(move || {
                let _ = sender.send(answer_on_terminal(&question));
            });
        Box::pin(async move {
            spawned.map_err(|error| format!("the terminal could not be asked: {error}"))?;
            receiver
                .await
                .unwrap_or_else(|_| Err("the terminal question ended without an answer".into()))
        })
    }
}

fn answer_on_terminal(question: &str) -> Result<String, String> {
    let _one_at_a_time = ASKING.lock();
    let mut tty = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
        .map_err(|error| format!("could not open the terminal to ask (/dev/tty: {error})"))?;
    let prompt = format!(
        "\nkiln: the agent asks: {}\n  Your answer: ",
        card_text(question)
    );
    tty.write_all(prompt.as_bytes())
        .map_err(|_| "could not write the question to the terminal".to_owned())?;
    let mut line = String::new();
    match BufReader::new(tty).read_line(&mut line) {
        Ok(0) | Err(_) => Err("the terminal closed before answering".into()),
        Ok(_) => Ok(line.trim_end_matches(['\n', '\r']).to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_types::permission::{AskReason, Category};
    use serde_json::json;

    fn request(tool: &str, module: &str, args: serde_json::Value) -> ApprovalRequest {
        ApprovalRequest {
            call_number: 3,
            tool: tool.into(),
            category: Category::Write,
            module: module.into(),
            description: String::new(),
            args,
            reason: AskReason::Mode,
            host: "kiln run".into(),
        }
    }

    /// What could rewrite the prompt reaches the terminal escaped, visibly.
    #[test]
    fn the_terminal_card_escapes_what_a_terminal_would_act_on() {
        let cases = [
            (
                request("save", "builtin", json!({"note": "C1 CSI \u{9b}2K"})),
                "\\u{009B}2K",
            ),
            (
                request("save", "builtin", json!({"note": "ESC \u{1b}[2K"})),
                "\\u001b[2K",
            ),
            (
                request("save", "builtin", json!({"f": "\u{202e}txt.exe"})),
                "\\u{202E}txt.exe",
            ),
            (
                request("save", "mcp:\u{2066}evil", json!({})),
                "mcp:\\u{2066}evil",
            ),
        ];
        for (request, shown) in cases {
            let text = question(&request);
            assert!(text.contains(shown), "{shown} not in {text:?}");
            assert!(
                !text.chars().any(|c| matches!(c, '\u{80}'..='\u{9f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{1b}')),
                "{text:?}"
            );
        }
    }

    #[test]
    fn the_terminal_card_puts_the_tool_and_the_reason_before_the_arguments() {
        let text = question(&request(
            "save",
            "builtin",
            json!({"body": "x".repeat(100)}),
        ));
        let reason = text.find("Why asked").unwrap_or(usize::MAX);
        let arguments = text.find("Arguments").unwrap_or(0);
        assert!(
            text.find("save").unwrap_or(usize::MAX) < reason && reason < arguments,
            "{text}"
        );
    }
}
