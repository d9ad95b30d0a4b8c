//! Where the page is: the view and, for a conversation, its thread (for
//! History, the job it opens), kept in the URL's fragment (`#/chat/ID`,
//! `#/history/ID`, `#/agents`, `#/skills`, `#/settings`) so that a reload, a
//! bookmark or a link opens the same place and Back goes back. A fragment
//! needs nothing of the host: the app stays a plain static site.

use leptos::prelude::*;
use wasm_bindgen::JsCast as _;
use wasm_bindgen::prelude::Closure;

/// A view of the app.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Route {
    /// The conversation: a kept thread, or a new one (`None`).
    Chat(Option<String>),
    /// The workspace's agent profiles and their editor.
    Agents,
    /// The workspace's skills, the shipped ones beside them, and their editor.
    Skills,
    /// The program editor and its result.
    Editor,
    Nodes,
    Memory,
    Files,
    /// The history of runs, with one job opened (`Some`) or none.
    History(Option<String>),
    Settings,
}

/// The views the navigation lists, in order: fragment, label.
pub(crate) const VIEWS: [(&str, &str); 9] = [
    ("chat", "Chat"),
    ("agents", "Agents"),
    ("skills", "Skills"),
    ("editor", "Program"),
    ("nodes", "Code nodes"),
    ("memory", "Memory"),
    ("files", "Files"),
    ("history", "History"),
    ("settings", "Settings"),
];

/// The characters a thread or a job id has (`t-<ms>-<hex>`, `j-<ms>-<hex>`),
/// so that a fragment cannot carry anything else into a request.
fn is_record_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

impl Route {
    /// The route a fragment names (`#/chat/t-1`, `#/history/j-1`,
    /// `#/memory`); anything it does not know is the chat, and an id that is
    /// not one is dropped.
    pub(crate) fn parse(hash: &str) -> Self {
        let path = hash.trim_start_matches('#').trim_start_matches('/');
        let mut parts = path.split('/');
        match (parts.next().unwrap_or(""), parts.next()) {
            ("agents", _) => Self::Agents,
            ("skills", _) => Self::Skills,
            ("editor", _) => Self::Editor,
            ("nodes", _) => Self::Nodes,
            ("memory", _) => Self::Memory,
            ("files", _) => Self::Files,
            ("history", Some(id)) if is_record_id(id) => Self::History(Some(id.to_owned())),
            ("history", _) => Self::History(None),
            ("settings", _) => Self::Settings,
            ("chat", Some(id)) if is_record_id(id) => Self::Chat(Some(id.to_owned())),
            _ => Self::Chat(None),
        }
    }

    /// The fragment for this route.
    pub(crate) fn hash(&self) -> String {
        match self {
            Self::Chat(Some(id)) => format!("#/chat/{id}"),
            Self::Chat(None) => "#/chat".to_owned(),
            Self::History(Some(id)) => format!("#/history/{id}"),
            other => format!("#/{}", other.view()),
        }
    }

    /// The view's fragment word (`chat`, `memory`, …).
    pub(crate) fn view(&self) -> &'static str {
        match self {
            Self::Chat(_) => "chat",
            Self::Agents => "agents",
            Self::Skills => "skills",
            Self::Editor => "editor",
            Self::Nodes => "nodes",
            Self::Memory => "memory",
            Self::Files => "files",
            Self::History(_) => "history",
            Self::Settings => "settings",
        }
    }
}

/// The page's route, following the fragment.
#[derive(Clone, Copy)]
pub(crate) struct Router {
    pub(crate) route: RwSignal<Route>,
    /// The conversation the chat view last showed: the navigation's Chat goes
    /// back to it, not to a new one.
    pub(crate) chat: RwSignal<Route>,
    /// Whether the route is the page's fragment; an embedded chat's (the widget's) is
    /// its own, so that it adds nothing to the host page's history.
    follows_url: bool,
}

fn current_hash() -> String {
    web_sys::window()
        .and_then(|window| window.location().hash().ok())
        .unwrap_or_default()
}

impl Router {
    /// Reads the fragment now and follows its changes (links, Back, Forward),
    /// and is the page's router for the views under it (`use_context`): the
    /// History view opens the job the route names.
    pub(crate) fn start() -> Self {
        let start = Route::parse(&current_hash());
        let chat = RwSignal::new(match &start {
            Route::Chat(_) => start.clone(),
            _ => Route::Chat(None),
        });
        let route = RwSignal::new(start);
        let router = Self {
            route,
            chat,
            follows_url: true,
        };
        provide_context(router);
        // Wherever the page goes, the chat's last place is kept.
        Effect::new(move || {
            route.with(|route| {
                if matches!(route, Route::Chat(_)) && chat.with_untracked(|chat| chat != route) {
                    chat.set(route.clone());
                }
            });
        });
        if let Some(window) = web_sys::window() {
            let follow = Closure::<dyn Fn()>::new(move || {
                let next = Route::parse(&current_hash());
                if route.get_untracked() != next {
                    route.try_set(next);
                }
            });
            let _ = window
                .add_event_listener_with_callback("hashchange", follow.as_ref().unchecked_ref());
            // The page's own listener lives as long as the page.
            follow.forget();
        }
        router
    }

    /// A route of its own, starting at `start`, that neither reads nor writes the URL.
    pub(crate) fn detached(start: Route) -> Self {
        Self {
            route: RwSignal::new(start.clone()),
            chat: RwSignal::new(start),
            follows_url: false,
        }
    }

    /// Goes to `route`: a new history entry, unless `replace` (a new
    /// thread getting its id is the same place, not a step Back can undo).
    /// A detached router only moves its signal.
    pub(crate) fn go(self, route: Route, replace: bool) {
        let hash = route.hash();
        self.route.set(route);
        if !self.follows_url {
            return;
        }
        let Some(window) = web_sys::window() else {
            return;
        };
        if current_hash() == hash {
            return;
        }
        // A fragment-only `replace` stays in the document: no load, no new entry.
        if replace {
            let _ = window.location().replace(&hash);
        } else {
            let _ = window.location().set_hash(&hash);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Route;

    #[test]
    fn a_fragment_names_its_view_and_only_a_well_formed_thread_or_job() {
        let too_long = format!("#/history/j-{}", "0".repeat(63));
        let cases = [
            ("", Route::Chat(None)),
            ("#/", Route::Chat(None)),
            ("#/chat", Route::Chat(None)),
            (
                "#/chat/t-0001796559046583-0b4d6c95",
                Route::Chat(Some("t-0001796559046583-0b4d6c95".into())),
            ),
            ("#/chat/<img src=x>", Route::Chat(None)),
            ("#/chat/a%2Fb", Route::Chat(None)),
            ("#/memory", Route::Memory),
            ("#/agents", Route::Agents),
            ("#/skills", Route::Skills),
            ("#/skills/web-research", Route::Skills),
            ("#/settings/providers", Route::Settings),
            ("#/nodes/board", Route::Nodes),
            ("#/history", Route::History(None)),
            (
                "#/history/j-1796599502052-f5b0d7e6",
                Route::History(Some("j-1796599502052-f5b0d7e6".into())),
            ),
            ("#/history/<img src=x>", Route::History(None)),
            ("#/history/a%2Fb", Route::History(None)),
            ("#/history/\"],*", Route::History(None)),
            (too_long.as_str(), Route::History(None)),
            ("#/nowhere", Route::Chat(None)),
        ];
        for (hash, route) in cases {
            assert_eq!(Route::parse(hash), route, "{hash}");
        }
        for route in [
            Route::Chat(Some("t-1".into())),
            Route::Chat(None),
            Route::Files,
            Route::Editor,
            Route::Agents,
            Route::Skills,
            Route::History(None),
            Route::History(Some("j-1796599502052-f5b0d7e6".into())),
        ] {
            assert_eq!(Route::parse(&route.hash()), route, "round trip");
        }
    }
}
