//! The one client of the runtime protocol ([`kiln_types::runtime`]): the
//! app (the embedded widget's page included) and the page API start their
//! runtime worker and speak to it through this crate, and only through it.
//!
//! - `client`: [`RuntimeClient`]: starts the worker, numbers each exchange,
//!   sends it, hands its streamed events to its listener and settles its
//!   answer; the change feed's watches; the in-browser model's statuses.
//! - `page_side`: [`PageSide`], what an exchange asks of its page — a page
//!   tool's call, an approval, an `ask_user` question — answered by the app
//!   (its own tools and cards) or the page API (the page's functions).
//! - `abort`: a page's `AbortSignal` as a [`Signal`] that cancels an exchange.
//! - `js`: the browser helpers every client needs: a thrown value's text,
//!   a timer.
//!
//! **Architecture invariant:** the client carries typed messages and never
//! gives them a page's shape: what a page API caller sees (camelCase, a
//! `TypeError`) is the page crate's conversion, at its own boundary.

#![warn(unreachable_pub)]

mod abort;
mod client;
mod js;
mod page_side;

pub use abort::{AbortListener, Signal};
pub use client::{Answered, ChangeListener, Listener, RuntimeClient, StatusListener, With};
pub use js::{error_text, sleep_ms};
pub use page_side::{PageCall, PageSide};
