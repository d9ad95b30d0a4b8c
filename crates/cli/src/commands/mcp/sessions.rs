//! The sessions `kiln mcp serve` holds, and the bounds on them: who each
//! client said it is (`clientInfo.name`, cut to an agent name's limits), when
//! it was last heard from, at most [`SessionLimits::max`] at once (the one
//! idle the longest makes way for a new one; when every one is busy, none
//! opens) and none kept idle past [`SessionLimits::idle_ms`]. A session is
//! busy while it has a call in flight or a program going: it is never closed
//! for another, nor for idleness. Pure: time comes in as `now_ms`, busyness
//! as a question the caller answers.

use std::collections::HashMap;

/// The longest agent name the store keeps, in characters.
const AGENT_CHARS: usize = kiln_store::durable::MAX_AGENT_CHARS;
/// The longest agent a run request takes, in bytes (`RunRequest`'s `agent`).
const AGENT_BYTES: usize = 128;

/// Sessions held at most, by default (`--max-sessions`).
pub(crate) const MAX_SESSIONS: u32 = 64;
/// How long a session may be idle before it is closed, by default
/// (`--session-idle-minutes`): as long as an ended run's result is kept.
pub(crate) const IDLE_MINUTES: u64 = 60;

/// How many sessions, and how long an idle one is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SessionLimits {
    pub(crate) max: usize,
    pub(crate) idle_ms: u64,
}

/// A session closed to make way, for being idle, or by its client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Closed {
    pub(crate) id: String,
    /// Its client's name, as kept.
    pub(crate) client: Option<String>,
}

/// No session could be opened: `max` are open and every one is busy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Full {
    pub(crate) max: usize,
}

struct Session {
    client: Option<String>,
    last_ms: f64,
    /// The stdio transport's one session: never closed, never counted.
    lasting: bool,
}

/// The sessions of one server.
pub(crate) struct Sessions {
    open: HashMap<String, Session>,
    limits: SessionLimits,
}

impl Sessions {
    pub(crate) fn new(limits: SessionLimits) -> Self {
        Self {
            open: HashMap::new(),
            limits,
        }
    }

    /// Opens `id`, which is never closed nor counted (the stdio transport's).
    pub(crate) fn open_lasting(&mut self, id: &str) {
        self.open.insert(
            id.to_owned(),
            Session {
                client: None,
                last_ms: 0.0,
                lasting: true,
            },
        );
    }

    /// Opens `id` at `now_ms`. At the limit, the session idle the longest
    /// (not `busy`) is closed for it and answered, for the caller to let go
    /// of what it held.
    ///
    /// # Errors
    ///
    /// [`Full`] when the limit is reached and every session is busy.
    pub(crate) fn open(
        &mut self,
        id: &str,
        now_ms: f64,
        busy: &dyn Fn(&str) -> bool,
    ) -> Result<Option<Closed>, Full> {
        let counted = self
            .open
            .values()
            .filter(|session| !session.lasting)
            .count();
        let mut closed = None;
        if counted >= self.limits.max {
            let oldest = self
                .open
                .iter()
                .filter(|(id, session)| !session.lasting && !busy(id))
                .min_by(|a, b| a.1.last_ms.total_cmp(&b.1.last_ms))
                .map(|(id, _)| id.clone());
            let Some(oldest) = oldest else {
                return Err(Full {
                    max: self.limits.max,
                });
            };
            closed = self.close(&oldest);
        }
        self.open.insert(
            id.to_owned(),
            Session {
                client: None,
                last_ms: now_ms,
                lasting: false,
            },
        );
        Ok(closed)
    }

    /// Session `id` was heard from at `now_ms`; whether it is open.
    pub(crate) fn touch(&mut self, id: &str, now_ms: f64) -> bool {
        match self.open.get_mut(id) {
            Some(session) => {
                session.last_ms = session.last_ms.max(now_ms);
                true
            }
            None => false,
        }
    }

    /// Keeps session `id`'s client name, cut ([`client_name`]).
    pub(crate) fn name_client(&mut self, id: &str, name: Option<&str>) {
        if let Some(session) = self.open.get_mut(id) {
            session.client = name.and_then(client_name);
        }
    }

    /// Session `id`'s client name, as kept.
    pub(crate) fn client(&self, id: &str) -> Option<&str> {
        self.open
            .get(id)
            .and_then(|session| session.client.as_deref())
    }

    /// Closes `id` (not the lasting one); what it was, when it was open.
    pub(crate) fn close(&mut self, id: &str) -> Option<Closed> {
        if self.open.get(id)?.lasting {
            return None;
        }
        self.open.remove(id).map(|session| Closed {
            id: id.to_owned(),
            client: session.client,
        })
    }

    /// Closes the sessions idle past the limit at `now_ms`, none `busy`.
    pub(crate) fn expire(&mut self, now_ms: f64, busy: &dyn Fn(&str) -> bool) -> Vec<Closed> {
        let idle_ms = self.limits.idle_ms as f64;
        let idle: Vec<String> = self
            .open
            .iter()
            .filter(|(id, session)| {
                !session.lasting && now_ms - session.last_ms > idle_ms && !busy(id)
            })
            .map(|(id, _)| id.clone())
            .collect();
        idle.iter().filter_map(|id| self.close(id)).collect()
    }
}

/// A client's `clientInfo.name` as an agent name: control characters
/// dropped, cut at a character's edge to the store's 100 characters and a
/// run request's 128 bytes, trimmed; `None` when nothing is left. Stops
/// reading `name` once that much is kept, however long it is.
pub(crate) fn client_name(name: &str) -> Option<String> {
    let mut cut = String::new();
    for c in name.chars().filter(|c| !c.is_control()).take(AGENT_CHARS) {
        if cut.len() + c.len_utf8() > AGENT_BYTES {
            break;
        }
        cut.push(c);
    }
    let cut = cut.trim();
    (!cut.is_empty()).then(|| cut.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sessions(max: usize) -> Sessions {
        Sessions::new(SessionLimits {
            max,
            idle_ms: 1_000,
        })
    }

    const IDLE: &dyn Fn(&str) -> bool = &|_| false;

    #[test]
    fn at_the_limit_the_longest_idle_session_makes_way_and_a_busy_one_never() {
        let mut sessions = sessions(2);
        sessions.open_lasting("stdio");
        assert_eq!(sessions.open("a", 0.0, IDLE), Ok(None));
        sessions.name_client("a", Some("first"));
        assert_eq!(sessions.open("b", 10.0, IDLE), Ok(None));
        assert!(sessions.touch("a", 20.0));
        // `b` was heard from the longest ago: it makes way.
        assert_eq!(
            sessions.open("c", 30.0, IDLE),
            Ok(Some(Closed {
                id: "b".into(),
                client: None
            }))
        );
        assert!(!sessions.touch("b", 40.0));
        // A busy session is never closed for another; when all are, none opens.
        let busy_a: &dyn Fn(&str) -> bool = &|id| id == "a";
        assert_eq!(
            sessions
                .open("d", 50.0, busy_a)
                .map(|closed| closed.map(|closed| closed.id)),
            Ok(Some("c".into()))
        );
        assert_eq!(sessions.open("e", 60.0, &|_| true), Err(Full { max: 2 }));
        assert_eq!(sessions.client("a"), Some("first"));
        assert!(
            sessions.touch("stdio", 70.0),
            "the lasting one is never counted"
        );
    }

    #[test]
    fn idle_sessions_expire_and_busy_or_lasting_ones_stay() {
        let mut sessions = sessions(10);
        sessions.open_lasting("stdio");
        for (id, at) in [("a", 0.0), ("b", 500.0), ("busy", 0.0)] {
            assert_eq!(sessions.open(id, at, IDLE), Ok(None));
        }
        assert_eq!(sessions.expire(1_000.0, IDLE), [], "idle exactly the limit");
        let busy: &dyn Fn(&str) -> bool = &|id| id == "busy";
        let closed: Vec<String> = sessions
            .expire(1_001.0, busy)
            .into_iter()
            .map(|closed| closed.id)
            .collect();
        assert_eq!(closed, ["a"]);
        assert!(sessions.touch("b", 1_001.0) && sessions.touch("busy", 1_001.0));
        assert!(sessions.touch("stdio", 1e12));
        assert_eq!(sessions.close("stdio"), None);
    }

    #[test]
    fn a_client_name_is_cut_to_an_agent_names_limits() {
        let huge = "n".repeat(1 << 20);
        let cases: [(&str, Option<String>); 6] = [
            ("claude-code", Some("claude-code".into())),
            (&huge, Some("n".repeat(100))),
            // 100 two-byte characters are more than a run's 128 bytes.
            (&"é".repeat(100), Some("é".repeat(64))),
            ("\u{1b}]0;owned\u{7}  name\n", Some("]0;owned  name".into())),
            ("  \u{0}\t ", None),
            ("", None),
        ];
        for (name, expected) in cases {
            let cut = client_name(name);
            assert_eq!(cut, expected, "{:?}", name.get(..20));
            if let Some(agent) = cut {
                // A run takes it as its agent.
                let request = serde_json::json!({"code": "return 1", "agent": agent});
                assert!(kiln_run::RunRequest::from_value(request).is_ok(), "{agent}");
            }
        }
    }
}
