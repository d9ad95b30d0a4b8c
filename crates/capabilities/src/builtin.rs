//! The built-in capabilities: one table of specs (data, no implementation
//! loaded to read them) and the calls that mount them on a registry:
//! [`add_http_request`] (network reach, mounted only when a run asks for it,
//! under the [`NetPolicy`] it asked for) and [`add_storage`] (what needs the
//! host's stores: memory, history, files).

use std::rc::Rc;

use kiln_http::HttpClient;

use crate::http_request::{self, HttpRequest, NetPolicy};
use crate::registry::Registry;
use crate::spec::CapabilitySpec;
use crate::storage::{self, Storage};

/// Every built-in capability's spec, the storage capabilities included.
#[must_use]
pub fn specs() -> Vec<CapabilitySpec> {
    let mut specs = vec![http_request::spec()];
    specs.extend(storage::table().into_iter().map(|(spec, _)| spec));
    specs.extend(crate::skill_tools::specs());
    specs
}

/// Adds `http_request` to `registry`, over the platform's HTTP client, reaching
/// what `policy` allows. Nothing mounts it by default: a run's tools are its
/// whitelist, and network reach is asked for by name.
pub fn add_http_request(registry: &mut Registry, http: &Rc<dyn HttpClient>, policy: NetPolicy) {
    add_http_request_beside_mcp(registry, http, policy, &[]);
}

/// [`add_http_request`] for a run that mounts the MCP servers at
/// `mcp_endpoints`: it never reaches their origins directly
/// ([`HttpRequest::beside_mcp`]).
pub fn add_http_request_beside_mcp(
    registry: &mut Registry,
    http: &Rc<dyn HttpClient>,
    policy: NetPolicy,
    mcp_endpoints: &[String],
) {
    // Built-in specs are ours and compile (tested).
    let _ = registry.add(
        http_request::spec(),
        Rc::new(HttpRequest::beside_mcp(http.clone(), policy, mcp_endpoints)),
    );
}

/// Adds the memory, history and file capabilities to `registry`, over the
/// stores the host opened for this run (see [`crate::storage`]).
pub fn add_storage(registry: &mut Registry, storage: &Storage) {
    storage::add(registry, storage);
}

/// Mounts only the run memory's capabilities (`list_shared`, `read_shared`,
/// `share_result`) over `storage`: a run with no workspace still has a run
/// memory for its plan steps and sub-agents.
pub fn add_run_memory(registry: &mut Registry, storage: &Storage) {
    storage::add_only(
        registry,
        storage,
        &["list_shared", "read_shared", "share_result"],
    );
}
