//! The registry's sources: MCP servers (the real reference server) and the
//! built-ins, each reached through the ladder.

#![allow(
    clippy::unwrap_used,
    clippy::result_large_err,
    reason = "a test: a panic is a failed test with a line number, and its tools answer the contract's error"
)]

use std::rc::Rc;

use futures::executor::block_on;
use kiln_capabilities::mcp::{McpServer, add_server, connect, tool_identifier};
use kiln_capabilities::{
    Category, Dispatcher, Gate, GateSettings, HeldSignal, Mode, NetPolicy, Registry, SecretScope,
};
use kiln_mcp::{McpClient, McpTool, ServerInfo};
use kiln_testkit::EverythingServer;
use kiln_types::protocol::CallRequest;
use kiln_types::run::RunLimits;
use kiln_types::tool_result::ToolReply;
use serde_json::{Value, json};

fn dispatcher(registry: Registry, limits: RunLimits) -> Dispatcher {
    let settings = GateSettings {
        mode: Mode::Auto,
        ..GateSettings::default()
    };
    let gate = Gate::headless("sources test", settings).unwrap();
    Dispatcher::new(
        Rc::new(registry),
        Some(gate),
        SecretScope::new(),
        limits,
        "sources test",
    )
}

fn call(dispatcher: &Dispatcher, number: u32, tool: &str, args: Value) -> ToolReply {
    let held: HeldSignal = Rc::new(|_| {});
    block_on(dispatcher.call(
        CallRequest {
            call_number: number,
            tool: tool.into(),
            args,
        },
        held,
    ))
}

#[test]
fn mcp_names_map_to_identifiers_by_one_rule() {
    assert_eq!(
        tool_identifier("everything", "get-sum"),
        "everything_get_sum"
    );
    assert_eq!(tool_identifier("gh", "repos.list/all"), "gh_repos_list_all");
    assert_eq!(tool_identifier("s", "ok_$name9"), "s_ok_$name9");
}

#[test]
fn a_session_with_the_reference_server_through_the_ladder_survives_its_death() {
    let server = EverythingServer::start();
    let http = kiln_http::default_client();
    let connected = block_on(connect(
        "everything",
        &server.url(),
        Category::External,
        &[],
        &SecretScope::new(),
        http.clone(),
    ))
    .unwrap();
    assert_eq!(connected.info.name, "mcp-servers/everything");
    let mut registry = Registry::new();
    add_server(&mut registry, &connected);
    let names: Vec<&str> = registry.specs().map(|spec| spec.name.as_str()).collect();
    assert!(names.contains(&"everything_get_sum"), "{names:?}");
    assert!(
        registry
            .specs()
            .all(|spec| spec.category == Category::External)
    );
    let dispatcher = dispatcher(registry, RunLimits::default());

    let sum = call(
        &dispatcher,
        1,
        "everything_get_sum",
        json!({"a": 2, "b": 3}),
    )
    .unwrap();
    assert_eq!(sum, "The sum of 2 and 3 is 5.");
    let weather = call(
        &dispatcher,
        2,
        "everything_get_structured_content",
        json!({"location": "Chicago"}),
    )
    .unwrap();
    assert_eq!(weather["temperature"], 36);
    // Validation happens before the server is asked.
    let refused = call(
        &dispatcher,
        3,
        "everything_get_sum",
        json!({"a": "two", "b": 3}),
    );
    assert_eq!(refused.unwrap_err().code, "invalid_arguments");

    // The server dies mid-session: the call fails naming it, and nothing hangs.
    let port = server.port;
    drop(server);
    let failure = call(
        &dispatcher,
        4,
        "everything_get_sum",
        json!({"a": 1, "b": 1}),
    )
    .unwrap_err();
    assert_eq!(failure.code, "mcp_unavailable");
    assert!(
        failure.message.contains("MCP server `everything`"),
        "{}",
        failure.message
    );

    // It comes back on the same port: the client opens a new session by itself.
    let old_session = connected.client.session_id();
    let _server = EverythingServer::start_on(port);
    let sum = call(
        &dispatcher,
        5,
        "everything_get_sum",
        json!({"a": 1, "b": 1}),
    )
    .unwrap();
    assert_eq!(sum, "The sum of 1 and 1 is 2.");
    assert_ne!(connected.client.session_id(), old_session);
    block_on(connected.client.close()).unwrap();
    assert_eq!(connected.client.session_id(), None);
}

#[test]
fn an_unreachable_server_is_tools_unavailable() {
    let url = format!("http://127.0.0.1:{}/mcp", kiln_testkit::free_port());
    let warning = block_on(connect(
        "gone",
        &url,
        Category::External,
        &[],
        &SecretScope::new(),
        kiln_http::default_client(),
    ))
    .unwrap_err();
    assert_eq!(warning.code, "tools_unavailable");
    assert_eq!(warning.module.as_deref(), Some("mcp:gone"));
    assert!(warning.message.contains(&url), "{}", warning.message);
}

#[test]
fn a_tool_whose_schema_does_not_compile_is_tool_entry_invalid_and_clashing_names_are_unavailable() {
    let tool = |name: &str, schema: Value| McpTool {
        name: name.into(),
        title: None,
        description: Some(format!("{name} does things")),
        input_schema: schema,
        output_schema: None,
        annotations: None,
    };
    let server = McpServer {
        client: Rc::new(McpClient::new(
            "odd",
            "http://127.0.0.1:9/mcp",
            kiln_http::default_client(),
        )),
        info: ServerInfo {
            name: "odd".into(),
            version: "1".into(),
            protocol_version: kiln_mcp::PROTOCOL_VERSION.into(),
            instructions: None,
        },
        tools: vec![
            tool(
                "broken",
                json!({"type": "object", "properties": {"a": {"type": 12}}}),
            ),
            tool("get-item", json!({"type": "object"})),
            tool("get_item", json!({"type": "object"})),
            tool("fine", json!({"type": "object"})),
        ],
        category: Category::Read,
        secrets: Vec::new(),
    };
    let mut registry = Registry::new();
    add_server(&mut registry, &server);
    let warning = &registry.warnings()[0];
    assert_eq!(warning.code, "tool_entry_invalid");
    assert_eq!(warning.tool.as_deref(), Some("odd_broken"));
    assert!(
        warning.message.contains("does not compile"),
        "{}",
        warning.message
    );
    let why = registry.lookup("odd_get_item").err().unwrap();
    assert!(why.contains("claimed by 2 sources"), "{why}");
    assert_eq!(
        registry.lookup("odd_fine").unwrap().spec().category,
        Category::Read
    );
}

#[test]
fn a_server_tool_named_like_a_builtin_is_dropped_and_the_builtin_kept() {
    let server = |name: &str| McpServer {
        client: Rc::new(McpClient::new(
            name,
            "http://127.0.0.1:9/mcp",
            kiln_http::default_client(),
        )),
        info: ServerInfo {
            name: name.into(),
            version: "1".into(),
            protocol_version: kiln_mcp::PROTOCOL_VERSION.into(),
            instructions: None,
        },
        tools: vec![McpTool {
            name: "read".into(),
            title: None,
            description: Some("reads something else".into()),
            input_schema: json!({"type": "object"}),
            output_schema: None,
            annotations: None,
        }],
        category: Category::Read,
        secrets: Vec::new(),
    };
    let storage = || {
        kiln_capabilities::Storage::new(
            kiln_store::native::MemoryBackend::new(),
            kiln_store::native::MemoryTree::new(),
            "run",
            "default",
        )
    };
    // Whichever comes first, the built-in keeps the name.
    for server_first in [false, true] {
        let mut registry = Registry::new();
        if server_first {
            add_server(&mut registry, &server("file"));
        }
        kiln_capabilities::builtin::add_storage(&mut registry, &storage());
        if !server_first {
            add_server(&mut registry, &server("file"));
        }
        let kept = registry.lookup("file_read").unwrap();
        assert_eq!(kept.spec().source.module(), "builtin", "{server_first}");
        let warning = registry
            .warnings()
            .iter()
            .find(|warning| warning.reason.as_deref() == Some("name_taken"))
            .unwrap();
        assert_eq!(
            warning.message,
            "mcp:file tool `file_read`: the name is one of Kiln's built-in tools, which keeps it; it was dropped"
        );
    }
}

#[test]
fn every_builtin_has_a_spec_that_compiles_and_a_test_that_calls_it() {
    let http = kiln_http::default_client();
    let mut registry = Registry::new();
    kiln_capabilities::builtin::add_http_request(&mut registry, &http, NetPolicy::Public);
    let backend = kiln_store::native::MemoryBackend::new();
    let storage = kiln_capabilities::Storage::new(
        backend,
        kiln_store::native::MemoryTree::new(),
        "run",
        "default",
    );
    kiln_capabilities::builtin::add_storage(&mut registry, &storage);
    let skills = Rc::new(kiln_store::skills::Skills::new(Some(
        kiln_store::config::Config::new(kiln_store::native::MemoryBackend::new()),
    )));
    kiln_capabilities::skill_tools::add_skill_tools(&mut registry, &skills, true);
    assert!(registry.warnings().is_empty(), "{:?}", registry.warnings());
    // Each built-in's name must be called in one of this crate's or the CLI's
    // tests (compared without whitespace, so formatting cannot hide a call).
    let tests: String = [
        include_str!("sources.rs"),
        include_str!("ladder.rs"),
        include_str!("storage.rs"),
        include_str!("../../cli/tests/cli.rs"),
    ]
    .concat()
    .split_whitespace()
    .collect();
    for spec in kiln_capabilities::builtin::specs() {
        assert!(
            registry.lookup(&spec.name).is_ok(),
            "{} is not mounted",
            spec.name
        );
        assert!(
            tests.contains(&format!("tools.{}(", spec.name))
                || tests.contains(&format!("\"{}\",json!", spec.name)),
            "the built-in `{}` has no test that calls it",
            spec.name
        );
    }
}

#[test]
fn http_request_answers_status_headers_and_body_within_the_fetch_budget() {
    // A loopback server answering every request with 200 and a fixed body.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        use std::io::{BufRead as _, BufReader, Write as _};
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let mut stream = stream;
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nx-kind: test\r\ncontent-length: 11\r\nconnection: close\r\n\r\nhello world");
        }
    });
    let mut registry = Registry::new();
    let policy = NetPolicy::Only(vec![format!("http://127.0.0.1:{port}")]);
    kiln_capabilities::builtin::add_http_request(
        &mut registry,
        &kiln_http::default_client(),
        policy,
    );
    let limits = RunLimits {
        fetch_calls: 2,
        fetch_body_bytes: 5,
        ..RunLimits::default()
    };
    let dispatcher = dispatcher(registry, limits);
    let url = format!("http://127.0.0.1:{port}/");
    let reply = call(&dispatcher, 1, "http_request", json!({"url": url})).unwrap();
    assert_eq!(reply["status"], 200);
    assert_eq!(reply["headers"]["x-kind"], "test");
    assert_eq!(reply["body"], "hello");
    assert_eq!(reply["truncated"], true);
    let bytes = call(
        &dispatcher,
        2,
        "http_request",
        json!({"url": url, "response_type": "bytes"}),
    )
    .unwrap();
    assert_eq!(bytes["body"], json!({"$bytes": "aGVsbG8="}));
    let spent = call(&dispatcher, 3, "http_request", json!({"url": url})).unwrap_err();
    assert_eq!(spent.code, "budget_exhausted:fetch_calls");
    assert!(
        spent.message.contains("budget of 2 requests"),
        "{}",
        spent.message
    );
    // A URL refused before sending says so, not that the budget is spent
    // (and spends nothing).
    let refused = call(
        &dispatcher,
        4,
        "http_request",
        json!({"url": "file:///etc/passwd"}),
    );
    assert_eq!(refused.unwrap_err().code, "invalid_arguments");
}

#[test]
fn http_request_refuses_other_schemes_and_unknown_secrets_by_name() {
    let mut registry = Registry::new();
    kiln_capabilities::builtin::add_http_request(
        &mut registry,
        &kiln_http::default_client(),
        NetPolicy::Public,
    );
    let dispatcher = dispatcher(registry, RunLimits::default());
    let failure = call(
        &dispatcher,
        1,
        "http_request",
        json!({"url": "file:///etc/passwd"}),
    )
    .unwrap_err();
    assert_eq!(failure.code, "invalid_arguments");
    assert!(
        failure.message.contains("only http and https"),
        "{}",
        failure.message
    );
    let failure = call(
        &dispatcher,
        2,
        "http_request",
        json!({"url": "http://127.0.0.1:9/", "secret_headers": {"authorization": "Bearer ${NOPE}"}}),
    )
    .unwrap_err();
    assert_eq!(failure.code, "secret_unavailable");
    assert!(
        failure.message.contains("no secret named `NOPE`"),
        "{}",
        failure.message
    );
    let failure = call(
        &dispatcher,
        3,
        "http_request",
        json!({"url": "http://x", "verb": "GET"}),
    )
    .unwrap_err();
    assert_eq!(failure.code, "invalid_arguments");
}

#[test]
fn a_secret_bound_to_origins_is_sent_nowhere_else() {
    use kiln_capabilities::secrets::origin_of;
    for (url, origin) in [
        (
            "https://API.example.com/v1?x=1",
            Some("https://api.example.com"),
        ),
        (
            "https://api.example.com:443/",
            Some("https://api.example.com"),
        ),
        (
            "http://user:pw@127.0.0.1:8080/x",
            Some("http://127.0.0.1:8080"),
        ),
        ("ftp://example.com/", None),
        ("not a url", None),
    ] {
        assert_eq!(origin_of(url).as_deref(), origin, "{url}");
    }
    let mut registry = Registry::new();
    // Both loopback origins named: the secret's binding is what refuses the second.
    let policy =
        NetPolicy::parse_origins(&["http://127.0.0.1:9".into(), "http://127.0.0.1:10".into()])
            .unwrap();
    kiln_capabilities::builtin::add_http_request(
        &mut registry,
        &kiln_http::default_client(),
        policy,
    );
    let mut secrets = SecretScope::new();
    secrets.insert(
        "KEY",
        kiln_capabilities::Secret::for_origins("sk-bound", vec!["http://127.0.0.1:9".into()]),
    );
    let gate = Gate::headless(
        "sources test",
        GateSettings {
            mode: Mode::Auto,
            ..GateSettings::default()
        },
    )
    .unwrap();
    let dispatcher = Dispatcher::new(
        Rc::new(registry),
        Some(gate),
        secrets,
        RunLimits::default(),
        "t",
    );
    let failure = call(
        &dispatcher,
        1,
        "http_request",
        json!({"url": "http://127.0.0.1:10/steal", "secret_headers": {"x-key": "${KEY}"}}),
    )
    .unwrap_err();
    assert_eq!(failure.code, "secret_not_allowed");
    assert!(
        failure.message.contains("the secret `KEY` was not sent: it may be sent only to http://127.0.0.1:9, not to http://127.0.0.1:10"),
        "{}",
        failure.message
    );

    // A secret that names no origins, in a run that may reach any public
    // address, is sent nowhere (refused before anything is sent, so no request
    // leaves this machine); a run that names its origins may use it there.
    let unbound = |policy: NetPolicy| {
        let mut registry = Registry::new();
        kiln_capabilities::builtin::add_http_request(
            &mut registry,
            &kiln_http::default_client(),
            policy,
        );
        let mut secrets = SecretScope::new();
        secrets.insert("LOOSE", kiln_capabilities::Secret::new("sk-loose"));
        Dispatcher::new(
            Rc::new(registry),
            Some(
                Gate::headless(
                    "sources test",
                    GateSettings {
                        mode: Mode::Auto,
                        ..GateSettings::default()
                    },
                )
                .unwrap(),
            ),
            secrets,
            RunLimits::default(),
            "t",
        )
    };
    let failure = call(
        &unbound(NetPolicy::Public),
        1,
        "http_request",
        json!({"url": "https://api.example.com/", "secret_headers": {"x-key": "${LOOSE}"}}),
    )
    .unwrap_err();
    assert_eq!(failure.code, "secret_not_allowed", "{}", failure.message);
    assert!(
        failure.message.contains("it names no origins"),
        "{}",
        failure.message
    );
    assert_eq!(
        dispatcher.run_state().fetch_calls(),
        0,
        "a refused secret spends nothing"
    );
    // To its own origin it goes (nothing listens there: the network error is the proof).
    let failure = call(
        &dispatcher,
        2,
        "http_request",
        json!({"url": "http://127.0.0.1:9/ok", "secret_headers": {"x-key": "${KEY}"}}),
    )
    .unwrap_err();
    assert_eq!(failure.code, "network_error");
}
