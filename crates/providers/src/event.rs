//! What a streaming turn yields, and the final message assembled from it
//! (`kiln_types::chat`, which the page shares).

pub use kiln_types::chat::{Event, FinalMessage, Stop, StopReason, Usage};
