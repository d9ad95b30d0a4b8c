//! The built-in capabilities: one table of specs (data, no implementation
//! loaded to read them) and the call that mounts them on a registry.

use std::rc::Rc;

use kiln_http::HttpClient;

use crate::http_request::{self, HttpRequest};
use crate::registry::Registry;
use crate::spec::CapabilitySpec;

/// Every built-in capability's spec.
#[must_use]
pub fn specs() -> Vec<CapabilitySpec> {
    vec![http_request::spec()]
}

/// Adds every built-in to `registry`, over the platform's HTTP client.
pub fn add_builtins(registry: &mut Registry, http: &Rc<dyn HttpClient>) {
    for spec in specs() {
        let implementation = match spec.name.as_str() {
            http_request::NAME => Rc::new(HttpRequest::new(http.clone())),
            // Every spec in the table has its implementation above; the
            // coverage test fails on one that does not.
            _ => continue,
        };
        // Built-in specs are ours and compile (tested).
        let _ = registry.add(spec, implementation);
    }
}
