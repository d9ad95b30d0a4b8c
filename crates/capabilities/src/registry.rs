//! One table of capabilities: every source (built-ins, the host's own tools,
//! MCP servers) adds to it, and every entrance looks tools up in it.
//!
//! An implementation is reached only with a [`Permit`], which only the
//! dispatcher's ladder can make: no entrance can call a tool without walking
//! the ladder first.

use std::collections::BTreeMap;
use std::rc::Rc;

use futures::future::LocalBoxFuture;
use kiln_types::tool_result::{ToolReply, Warning};
use serde_json::Value;

use crate::args::InputSchema;
use crate::dispatch::{CallContext, Permit};
use crate::spec::{CapabilitySpec, Source};

/// What a capability does.
pub trait Implementation {
    /// Runs one call whose arguments the ladder already checked and whose
    /// permission it already decided.
    fn call(
        &self,
        args: Value,
        context: CallContext,
        permit: Permit,
    ) -> LocalBoxFuture<'static, ToolReply>;
}

/// One capability: its spec, its compiled schema and its implementation.
pub struct Entry {
    spec: CapabilitySpec,
    schema: InputSchema,
    implementation: Rc<dyn Implementation>,
}

impl Entry {
    #[must_use]
    pub fn spec(&self) -> &CapabilitySpec {
        &self.spec
    }

    pub(crate) fn schema(&self) -> &InputSchema {
        &self.schema
    }

    pub(crate) fn implementation(&self) -> Rc<dyn Implementation> {
        self.implementation.clone()
    }
}

/// Every capability a host serves, by wire name.
#[derive(Default, Clone)]
pub struct Registry {
    /// Every claim on a name. More than one claim makes the name unavailable.
    claims: BTreeMap<String, Vec<Rc<Entry>>>,
    warnings: Vec<Warning>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("names", &self.claims.keys().collect::<Vec<_>>())
            .field("warnings", &self.warnings)
            .finish()
    }
}

pub use kiln_types::words::is_identifier;

impl Registry {
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one capability. A name that is not an identifier or a schema that
    /// does not compile drops the entry with a `tool_entry_invalid` warning
    /// (returned too); the registry keeps serving the rest.
    pub fn add(
        &mut self,
        spec: CapabilitySpec,
        implementation: Rc<dyn Implementation>,
    ) -> Result<(), Warning> {
        let module = spec.source.module();
        let invalid = |reason: &str, message: String| Warning {
            code: "tool_entry_invalid".into(),
            message,
            module: Some(module.clone()),
            tool: Some(spec.name.clone()),
            index: None,
            reason: Some(reason.into()),
        };
        let problem = if is_identifier(&spec.name) {
            InputSchema::compile(&spec.input_schema).map_err(|why| {
                invalid(
                    "input_schema",
                    format!(
                        "{module} tool `{}`: its input schema does not compile ({why}); it was dropped",
                        spec.name
                    ),
                )
            })
        } else {
            Err(invalid(
                "name",
                format!(
                    "{module} tool `{}`: the name is not a JavaScript identifier; it was dropped",
                    spec.name
                ),
            ))
        };
        match problem {
            Ok(schema) => {
                let claims = self.claims.entry(spec.name.clone()).or_default();
                // Kiln's own names win over an MCP server's: a server named
                // `file` with a tool `read` must not take `file_read` (and
                // `workspace.read` with it) from the run.
                let taken = |claims: &[Rc<Entry>]| {
                    claims
                        .iter()
                        .any(|entry| matches!(entry.spec.source, Source::Builtin))
                };
                let lost = |entry: &CapabilitySpec| Warning {
                    code: "tool_entry_invalid".into(),
                    message: format!(
                        "{} tool `{}`: the name is one of Kiln's built-in tools, which keeps it; it was dropped",
                        entry.source.module(),
                        entry.name
                    ),
                    module: Some(entry.source.module()),
                    tool: Some(entry.name.clone()),
                    index: None,
                    reason: Some("name_taken".into()),
                };
                if matches!(spec.source, Source::Mcp { .. }) && taken(claims) {
                    let warning = lost(&spec);
                    self.warnings.push(warning.clone());
                    return Err(warning);
                }
                if matches!(spec.source, Source::Builtin) {
                    let (dropped, kept): (Vec<_>, Vec<_>) = claims
                        .drain(..)
                        .partition(|entry| matches!(entry.spec.source, Source::Mcp { .. }));
                    *claims = kept;
                    for entry in dropped {
                        self.warnings.push(lost(&entry.spec));
                    }
                }
                claims.push(Rc::new(Entry {
                    spec,
                    schema,
                    implementation,
                }));
                Ok(())
            }
            Err(warning) => {
                self.warnings.push(warning.clone());
                Err(warning)
            }
        }
    }

    /// The capabilities whose spec `keep` accepts (a child's narrower belt),
    /// with no warnings: they were the parent's to report.
    #[must_use]
    pub fn filtered(&self, keep: impl Fn(&CapabilitySpec) -> bool) -> Self {
        Self {
            claims: self
                .claims
                .iter()
                .filter(|(_, claims)| claims.iter().all(|entry| keep(&entry.spec)))
                .map(|(name, claims)| (name.clone(), claims.clone()))
                .collect(),
            warnings: Vec::new(),
        }
    }

    /// Records a warning about a source (an MCP server that did not answer).
    pub fn warn(&mut self, warning: Warning) {
        self.warnings.push(warning);
    }

    /// The capability `name`, or why there is none.
    pub fn lookup(&self, name: &str) -> Result<&Rc<Entry>, String> {
        match self.claims.get(name).map(Vec::as_slice) {
            Some([only]) => Ok(only),
            Some(claims) if !claims.is_empty() => Err(format!(
                "{name} is claimed by {} sources ({}), so it is unavailable",
                claims.len(),
                claims
                    .iter()
                    .map(|c| c.spec.source.module())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            _ => Err(format!("{name} is not a capability of this host")),
        }
    }

    /// Every usable spec, by name.
    pub fn specs(&self) -> impl Iterator<Item = &CapabilitySpec> {
        self.claims
            .values()
            .filter(|claims| claims.len() == 1)
            .flatten()
            .map(|e| &e.spec)
    }

    /// The sandbox catalog: one entry per claim (so admission sees and reports
    /// duplicates), each with its module.
    #[must_use]
    pub fn catalog(&self) -> Value {
        Value::Array(
            self.claims
                .values()
                .flatten()
                .map(|entry| {
                    let mut item = entry.spec.catalog_entry();
                    if let Some(map) = item.as_object_mut() {
                        map.insert("module".into(), Value::String(entry.spec.source.module()));
                    }
                    item
                })
                .collect(),
        )
    }

    #[must_use]
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }
}
