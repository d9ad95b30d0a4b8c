//! A provider's own key kept out of everything it answers.
//!
//! A provider (or a proxy in front of it) may echo what it was sent: an error
//! that quotes the request's headers, a reply that repeats them. Whatever a
//! provider answers goes on to a program (`tools.model`, which under
//! `kiln mcp serve` belongs to another principal), to the agent's events, to
//! job records and exports. So [`KeyGuard`] scrubs the key here, where the
//! answer enters Kiln, before anything else sees it, in the browser and
//! natively alike:
//!
//! - every text a turn streams (text deltas, tool-call pieces, ids, names,
//!   arguments, stop messages) has the key's bytes replaced by
//!   [`KEY_MARKER`]. A delta that ends with what could be the start of the
//!   key is held back until the next piece says whether it is, so a key cut
//!   across two deltas is scrubbed too;
//! - an error's message is scrubbed the same way;
//! - an error, a model list or a finished turn that carries the key in a form
//!   other than its own bytes ([`kiln_http::reflection::encoded_form`]: base64,
//!   hex, escapes, another case) is withheld: the error's words are replaced,
//!   the turn ends with an error instead of its stop. Deltas already passed on
//!   are not taken back; they went to the person whose key it is, and the
//!   assembled reply (what a program, a record or an export gets) never
//!   leaves.
//!
//! A partial echo (the key without its last character) is not the key and is
//! not caught, as for a run's `--secret` values; nor is a key shorter than
//! [`MIN_KEY_CHARS`], a placeholder that guards nothing.

use std::collections::BTreeMap;

use futures::StreamExt as _;
use futures::stream;
use kiln_http::reflection::encoded_form;
use serde_json::Value;

use crate::failure::Peer;
use crate::{ApiKey, ErrorKind, Event, EventStream, ModelInfo, ProviderError, ToolCall};

/// What the key is replaced with.
pub const KEY_MARKER: &str = "[redacted:key]";

/// A key shorter than this is not scrubbed: it guards nothing (a placeholder a
/// local server takes, `none`, `k`), and scrubbing it, or its other-case
/// forms, would cut ordinary words out of every reply. Providers' real keys
/// are dozens of characters.
pub const MIN_KEY_CHARS: usize = 8;

/// The key a provider sends, to scrub from what it answers. Without a key it
/// changes nothing.
#[derive(Clone, Default)]
pub(crate) struct KeyGuard {
    key: Option<String>,
}

impl KeyGuard {
    pub(crate) fn new(key: Option<&ApiKey>) -> Self {
        Self {
            key: key
                .map(|key| key.expose().to_owned())
                .filter(|key| key.chars().count() >= MIN_KEY_CHARS),
        }
    }

    /// `text` with the key's bytes replaced.
    pub(crate) fn text(&self, text: &str) -> String {
        match &self.key {
            Some(key) if text.contains(key.as_str()) => text.replace(key.as_str(), KEY_MARKER),
            _ => text.to_owned(),
        }
    }

    /// Where `text` (already scrubbed) carries the key encoded, in words.
    fn encoded_in(&self, text: &str) -> Option<&'static str> {
        let key = self.key.as_ref()?;
        encoded_form(text.as_bytes(), key.as_bytes()).map(|form| form.describe())
    }

    /// `value` with the key scrubbed from every string in it, keys included.
    fn value(&self, value: Value) -> Value {
        match value {
            Value::String(text) => Value::String(self.text(&text)),
            Value::Array(items) => Value::Array(items.into_iter().map(|v| self.value(v)).collect()),
            Value::Object(map) => Value::Object(
                map.into_iter()
                    .map(|(k, v)| (self.text(&k), self.value(v)))
                    .collect(),
            ),
            other => other,
        }
    }

    fn call(&self, call: ToolCall) -> ToolCall {
        ToolCall {
            id: self.text(&call.id),
            name: self.text(&call.name),
            arguments: self.value(call.arguments),
        }
    }

    /// `error` with its words scrubbed, or replaced when they carry the key
    /// encoded.
    pub(crate) fn error(&self, error: ProviderError) -> ProviderError {
        let message = self.text(&error.message);
        let message = match self.encoded_in(&message) {
            Some(form) => withheld(form),
            None => message,
        };
        ProviderError { message, ..error }
    }

    /// A model list with the key scrubbed from its names, or why it is
    /// withheld (a name carries the key encoded).
    pub(crate) fn models(&self, models: Vec<ModelInfo>) -> Result<Vec<ModelInfo>, String> {
        models
            .into_iter()
            .map(|model| {
                let model = ModelInfo {
                    id: self.text(&model.id),
                    display_name: model.display_name.map(|name| self.text(&name)),
                };
                let names = std::iter::once(&model.id).chain(&model.display_name);
                match names.into_iter().find_map(|name| self.encoded_in(name)) {
                    Some(form) => Err(withheld(form)),
                    None => Ok(model),
                }
            })
            .collect()
    }

    /// `events` with the key scrubbed from each, as they come; `peer` names the
    /// turn in the error that withholds it.
    pub(crate) fn stream(self, events: EventStream, peer: Peer) -> EventStream {
        if self.key.is_none() {
            return events;
        }
        let mut turn = Turn {
            guard: self,
            peer,
            text: String::new(),
            fragments: BTreeMap::new(),
            stop: None,
            ended: false,
        };
        events
            .map(Some)
            .chain(stream::once(async { None }))
            .flat_map(move |item| {
                stream::iter(match item {
                    Some(item) => turn.pass(item),
                    // The stream ended without its `Done`: what was held goes on.
                    None => {
                        let mut out = turn.flush();
                        out.extend(turn.stop.take().map(Ok));
                        out
                    }
                })
            })
            .boxed_local()
    }
}

fn withheld(form: &str) -> String {
    format!(
        "the provider's answer was withheld: it carries the provider's key {form} (a provider \
         or a proxy that echoes its request)"
    )
}

/// One turn's scrubbing state: what is held back of the text and of each
/// tool call's arguments.
struct Turn {
    guard: KeyGuard,
    peer: Peer,
    /// Held-back text: a tail that could be the start of the key.
    text: String,
    fragments: BTreeMap<usize, String>,
    /// The turn's stop, held until its `Done` shows the whole answer is clean.
    stop: Option<Event>,
    /// After an error or a withheld stop nothing more is passed on.
    ended: bool,
}

type Item = Result<Event, ProviderError>;

impl Turn {
    fn pass(&mut self, item: Item) -> Vec<Item> {
        if self.ended {
            return Vec::new();
        }
        let event = match item {
            Ok(event) => event,
            Err(error) => {
                let mut out = self.flush();
                self.ended = true;
                self.stop = None;
                out.push(Err(self.guard.error(error)));
                return out;
            }
        };
        match event {
            Event::TextDelta { text } => {
                self.text.push_str(&text);
                let released = self.release_text();
                if released.is_empty() {
                    Vec::new()
                } else {
                    vec![Ok(Event::TextDelta { text: released })]
                }
            }
            Event::ToolCallDelta { index, fragment } => {
                let held = self.fragments.entry(index).or_default();
                held.push_str(&fragment);
                let released = release(&self.guard, held);
                if released.is_empty() {
                    Vec::new()
                } else {
                    vec![Ok(Event::ToolCallDelta {
                        index,
                        fragment: released,
                    })]
                }
            }
            Event::ToolCallStart { index, id, name } => vec![Ok(Event::ToolCallStart {
                index,
                id: self.guard.text(&id),
                name: self.guard.text(&name),
            })],
            Event::ToolCallEnd { index, call } => {
                let mut out = Vec::new();
                if let Some(rest) = self.fragments.remove(&index).filter(|r| !r.is_empty()) {
                    out.push(Ok(Event::ToolCallDelta {
                        index,
                        fragment: rest,
                    }));
                }
                out.push(Ok(Event::ToolCallEnd {
                    index,
                    call: self.guard.call(call),
                }));
                out
            }
            Event::Usage { usage } => vec![Ok(Event::Usage { usage })],
            Event::Stop { mut stop } => {
                let out = self.flush();
                stop.message = stop.message.map(|message| self.guard.text(&message));
                self.stop = Some(Event::Stop { stop });
                out
            }
            Event::Done { mut message } => {
                message.text = self.guard.text(&message.text);
                message.tool_calls = message
                    .tool_calls
                    .into_iter()
                    .map(|call| self.guard.call(call))
                    .collect();
                let arguments: Vec<String> = message
                    .tool_calls
                    .iter()
                    .map(|call| call.arguments.to_string())
                    .collect();
                let encoded = std::iter::once(&message.text)
                    .chain(&arguments)
                    .find_map(|text| self.guard.encoded_in(text));
                if let Some(form) = encoded {
                    self.ended = true;
                    self.stop = None;
                    return vec![Err(self.peer.error(ErrorKind::Stream, withheld(form)))];
                }
                let mut out: Vec<Item> = self.stop.take().map(Ok).into_iter().collect();
                out.push(Ok(Event::Done { message }));
                out
            }
        }
    }

    fn release_text(&mut self) -> String {
        release(&self.guard, &mut self.text)
    }

    /// Everything still held back, passed on (the turn is ending).
    fn flush(&mut self) -> Vec<Item> {
        let mut out = Vec::new();
        if self.ended {
            return out;
        }
        if !self.text.is_empty() {
            out.push(Ok(Event::TextDelta {
                text: std::mem::take(&mut self.text),
            }));
        }
        for (index, fragment) in std::mem::take(&mut self.fragments) {
            if !fragment.is_empty() {
                out.push(Ok(Event::ToolCallDelta { index, fragment }));
            }
        }
        out
    }
}

/// Scrubs `held` and answers all of it but the longest tail that could be the
/// start of the key, which stays held.
fn release(guard: &KeyGuard, held: &mut String) -> String {
    let Some(key) = &guard.key else {
        return std::mem::take(held);
    };
    let scrubbed = guard.text(held);
    let keep = (1..key.len().min(scrubbed.len() + 1))
        .rev()
        .find(|&length| {
            let start = scrubbed.len() - length;
            scrubbed.is_char_boundary(start)
                && key.as_bytes().starts_with(&scrubbed.as_bytes()[start..])
        })
        .unwrap_or(0);
    let cut = scrubbed.len() - keep;
    *held = scrubbed[cut..].to_owned();
    scrubbed[..cut].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FinalMessage, Stop, StopReason};

    fn guard() -> KeyGuard {
        KeyGuard::new(Some(&ApiKey::new("sk-live-0123456789")))
    }

    fn run(events: Vec<Item>) -> Vec<Item> {
        let peer = Peer::new(
            crate::ProviderKind::OpenAi,
            "https://api.example.com/v1/chat/completions",
            Some("m"),
        );
        futures::executor::block_on(
            guard()
                .stream(stream::iter(events).boxed_local(), peer)
                .collect::<Vec<_>>(),
        )
    }

    fn text_of(items: &[Item]) -> String {
        items
            .iter()
            .filter_map(|item| match item {
                Ok(Event::TextDelta { text }) => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    fn delta(text: &str) -> Item {
        Ok(Event::TextDelta { text: text.into() })
    }

    fn stop() -> Item {
        Ok(Event::Stop {
            stop: Stop {
                reason: StopReason::EndTurn,
                message: None,
            },
        })
    }

    #[test]
    fn a_key_cut_across_deltas_is_scrubbed_and_nothing_else_is_lost() {
        let cases: &[&[&str]] = &[
            &["your key is sk-live-0123456789."],
            &["your key is sk-li", "ve-0123", "456789."],
            &["s", "k", "-live-0123456789", "."],
            // Looks like the start of the key, then is not: passed on whole.
            &["sk-live-01", "x and sk-", "live-0123456789", "."],
        ];
        for pieces in cases {
            let mut events: Vec<Item> = pieces.iter().map(|piece| delta(piece)).collect();
            events.push(stop());
            let items = run(events);
            let whole: String = pieces.concat();
            assert_eq!(
                text_of(&items),
                whole.replace("sk-live-0123456789", KEY_MARKER),
                "{pieces:?}"
            );
            assert!(matches!(items.last(), Some(Ok(Event::Stop { .. }))));
        }
    }

    #[test]
    fn tool_arguments_errors_and_the_final_message_are_scrubbed() {
        let call = ToolCall {
            id: "call_1".into(),
            name: "echo".into(),
            arguments: serde_json::json!({"sk-live-0123456789": ["x sk-live-0123456789"]}),
        };
        let items = run(vec![
            Ok(Event::ToolCallDelta {
                index: 0,
                fragment: "{\"a\": \"sk-live-0".into(),
            }),
            Ok(Event::ToolCallDelta {
                index: 0,
                fragment: "123456789\"}".into(),
            }),
            Ok(Event::ToolCallEnd {
                index: 0,
                call: call.clone(),
            }),
            stop(),
            Ok(Event::Done {
                message: FinalMessage {
                    text: "sk-live-0123456789".into(),
                    tool_calls: vec![call],
                    ..FinalMessage::default()
                },
            }),
        ]);
        let shown = format!("{items:?}");
        assert!(!shown.contains("sk-live-0123456789"), "{shown}");
        assert!(shown.contains(KEY_MARKER), "{shown}");
    }

    #[test]
    fn a_placeholder_key_too_short_to_guard_anything_changes_nothing() {
        for key in ["k", "none", "ollama1"] {
            let guard = KeyGuard::new(Some(&ApiKey::new(key)));
            let text = format!("Kind words: {key}, K, NONE, Ollama1.");
            assert_eq!(guard.text(&text), text);
            assert_eq!(guard.encoded_in(&text), None);
        }
    }

    #[test]
    fn an_encoded_key_withholds_the_answer() {
        // `sk-live-0123456789` as base64.
        let encoded = "c2stbGl2ZS0wMTIzNDU2Nzg5";
        let error = guard().error(ProviderError {
            kind: ErrorKind::KeyRejected,
            provider: crate::ProviderKind::Anthropic,
            url: "https://api.example.com/v1/messages".into(),
            model: None,
            status: Some(401),
            message: format!("bad header: {encoded}"),
            hint: None,
        });
        assert!(!error.message.contains(encoded), "{}", error.message);
        assert!(error.message.contains("withheld"), "{}", error.message);

        let items = run(vec![
            delta("fine"),
            stop(),
            Ok(Event::Done {
                message: FinalMessage {
                    text: format!("fine {encoded}"),
                    ..FinalMessage::default()
                },
            }),
        ]);
        let Some(Err(error)) = items.last() else {
            panic!("{items:?}");
        };
        assert!(error.message.contains("withheld"), "{error}");
    }
}
