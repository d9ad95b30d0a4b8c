//! The `kiln` binary as a person runs it: files, standard input, exit codes, and
//! a program that never ends stopped at its wall budget.

#![expect(
    clippy::disallowed_methods,
    reason = "a test's own deadline and timings are real time: they bound and check what ran, not the code's clock"
)]
#![expect(
    clippy::unwrap_used,
    reason = "test helpers: a panic here is a failed test with its line"
)]

use std::io::Write as _;
use std::process::{Command, Stdio};

use serde_json::json;

/// `kiln args` started with its three streams piped.
fn spawn_kiln(args: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn kiln(args: &[&str], stdin: Option<&str>) -> (i32, serde_json::Value, String) {
    let mut child = spawn_kiln(args);
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
    }
    drop(child.stdin.take());
    let output = child.wait_with_output().unwrap();
    let json = serde_json::from_slice(&output.stdout).unwrap_or(serde_json::Value::Null);
    (
        output.status.code().unwrap_or(-1),
        json,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// `command` started with its streams piped and `program` on its standard
/// input (which is then closed).
fn started(command: &mut Command, program: &str) -> std::process::Child {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(program.as_bytes())
        .unwrap();
    child
}

/// `run - --tools CATALOG --limits LIMITS`: a program from standard input.
fn stdin_run<'a>(catalog: &'a std::path::Path, limits: &'a std::path::Path) -> [&'a str; 6] {
    [
        "run",
        "-",
        "--tools",
        catalog.to_str().unwrap(),
        "--limits",
        limits.to_str().unwrap(),
    ]
}

fn temp_file(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("kiln-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn runs_a_file_and_prints_its_tool_result() {
    let file = temp_file(
        "ok.js",
        "console.log('hi'); return {n: await Promise.resolve(3)}",
    );
    let (code, result, _) = kiln(&["run", file.to_str().unwrap()], None);
    assert_eq!(code, 0);
    let structured = &result["structuredContent"];
    assert_eq!(structured["status"], "completed");
    assert_eq!(structured["value"], serde_json::json!({"n": 3}));
    assert_eq!(structured["output"], "hi\n");
    assert!(
        structured["run_id"]
            .as_str()
            .unwrap()
            .starts_with("codemode:")
    );
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("completed · "), "{text}");
    assert!(
        text.contains("\n\nReturn value:\n{\n  \"n\": 3\n}\n\nOutput:\nhi\n"),
        "{text}"
    );
    assert!(result.get("isError").is_none());
}

#[test]
fn a_typescript_program_runs_with_its_types_stripped_and_refusals_are_named() {
    // Each kind of annotation, and a type error that is no JavaScript error.
    let typed = temp_file(
        "typed.ts",
        "import { parse } from \"kiln:csv\";\n\
         import type { Nothing } from \"kiln:csv\";\n\
         interface Row { name: string; total: number }\n\
         type Rows = Row[];\n\
         function first<T>(items: T[]): T | undefined { return items[0]; }\n\
         const rows = parse(\"name,total\\na,2\\nb,3\") as unknown as Array<{ name: string; total: string }>;\n\
         const typed: Rows = rows.map((row): Row => ({ name: row.name, total: Number(row.total) }));\n\
         const wrong: string = 42 as any as number;\n\
         return { first: first(typed)!.name, sum: typed.reduce((n: number, row) => n + row.total, 0), wrong };\n",
    );
    let (code, result, _) = kiln(&["run", typed.to_str().unwrap()], None);
    assert_eq!(code, 0, "{result}");
    assert_eq!(
        result["structuredContent"]["value"],
        serde_json::json!({"first": "a", "sum": 5, "wrong": 42})
    );

    // An error thrown at run time is the program's, as in JavaScript.
    let throws = temp_file(
        "throws.ts",
        "const n: number = 1;\nif (n as number > 0) throw new RangeError(`too big: ${n}`);",
    );
    let (code, result, _) = kiln(&["run", throws.to_str().unwrap()], None);
    assert_eq!(code, 1);
    assert_eq!(
        result["structuredContent"]["error"]["message"],
        "RangeError: too big: 1"
    );

    // TypeScript that makes JavaScript of its own is refused by name, with
    // what to write instead.
    let made = temp_file("enum.ts", "enum Color { Red, Green }\nreturn Color.Red;");
    let (code, result, _) = kiln(&["run", made.to_str().unwrap()], None);
    assert_eq!(code, 1);
    let message = result["structuredContent"]["error"]["message"]
        .as_str()
        .unwrap();
    assert!(
        message.starts_with("TypeScript's `enum` at line 1, column 1 cannot be stripped")
            && message.contains("\nhint: "),
        "{message}"
    );

    // A JavaScript syntax error is still the engine's own, at its place.
    let broken = temp_file("broken.js", "const a = 1;\nconst = 2;");
    let (code, result, _) = kiln(&["run", broken.to_str().unwrap()], None);
    assert_eq!(code, 1);
    let message = result["structuredContent"]["error"]["message"]
        .as_str()
        .unwrap();
    assert!(
        message.starts_with("SyntaxError: ") && message.contains("line 2"),
        "{message}"
    );

    // TypeScript's own syntax error is named where it is, not at the first
    // annotation, where the engine stopped.
    let typed_broken = temp_file(
        "broken.ts",
        "const a: number = 1;\nconst b = a + 1;\nconst c = ;\nreturn c;",
    );
    let (code, result, _) = kiln(&["run", typed_broken.to_str().unwrap()], None);
    assert_eq!(code, 1);
    assert_eq!(result["errorCode"], "syntax", "{result}");
    let message = result["structuredContent"]["error"]["message"]
        .as_str()
        .unwrap();
    assert!(
        message.starts_with("SyntaxError: ") && message.ends_with("at line 3, column 11"),
        "{message}"
    );
}

#[test]
fn scripted_tools_answer_and_an_uncaught_refusal_carries_its_code() {
    let catalog = temp_file(
        "catalog.json",
        r#"[{"name": "echo"}, {"name": "broken", "error": {"code": "no_session", "message": "No session."}}, {"name": "a-b"}]"#,
    );
    let tools = catalog.to_str().unwrap();
    let (code, result, _) = kiln(
        &["run", "-", "--tools", tools],
        Some("return await tools.echo({x: 1})"),
    );
    assert_eq!(code, 0);
    assert_eq!(
        result["structuredContent"]["value"],
        serde_json::json!({"x": 1})
    );
    assert_eq!(result["structuredContent"]["calls"][0]["outcome"], "ok");
    assert_eq!(
        result["structuredContent"]["warnings"][0]["code"],
        "tool_entry_invalid"
    );

    let program = "await tools.echo(); await tools.broken()";
    let (code, result, _) = kiln(&["run", "-", "--tools", tools], Some(program));
    assert_eq!(code, 1);
    assert_eq!(result["isError"], true);
    assert_eq!(result["errorCode"], "no_session");
    assert_eq!(
        result["structuredContent"]["error"]["message"],
        "broken (call 2) failed: No session."
    );
}

#[test]
fn reads_standard_input_and_exits_1_on_a_thrown_error() {
    let (code, result, _) = kiln(&["run", "-"], Some("throw new Error('nope')"));
    assert_eq!(code, 1);
    assert_eq!(result["errorCode"], "script");
    assert_eq!(
        result["structuredContent"]["error"]["message"],
        "Error: nope"
    );
}

#[test]
fn stops_a_program_that_never_ends_at_its_wall_budget() {
    let limits = temp_file("limits.json", r#"{"wall_ms": 300}"#);
    let args = ["run", "-", "--limits", limits.to_str().unwrap()];
    let (code, result, _) = kiln(&args, Some("while (true) {}"));
    assert_eq!(code, 1);
    assert_eq!(result["errorCode"], "budget_exhausted");
    assert_eq!(result["structuredContent"]["budget"], "wall");
    assert_eq!(
        result["structuredContent"]["termination_reason"],
        "budget_exhausted:wall"
    );
}

#[test]
fn refuses_unreadable_input_with_exit_2_and_a_message_naming_it() {
    let (code, _, stderr) = kiln(&["run", "/nonexistent/program.js"], None);
    assert_eq!(code, 2);
    assert!(stderr.contains("`/nonexistent/program.js`"), "{stderr}");

    let catalog = temp_file("object-catalog.json", r#"{"echo": {}}"#);
    let (code, _, stderr) = kiln(
        &["run", "-", "--tools", catalog.to_str().unwrap()],
        Some("return 1"),
    );
    assert_eq!(code, 2);
    assert!(
        stderr.contains("must be a JSON array") && stderr.contains("invalid_catalog"),
        "{stderr}"
    );

    let limits = temp_file("bad-limits.json", r#"{"wall": 1}"#);
    let (code, _, stderr) = kiln(
        &["run", "-", "--limits", limits.to_str().unwrap()],
        Some("return 1"),
    );
    assert_eq!(code, 2);
    assert!(
        stderr.contains("bad-limits.json") && stderr.contains("wall"),
        "{stderr}"
    );
}

#[test]
fn limits_set_the_tool_call_and_return_value_budgets() {
    let catalog = temp_file("echo-catalog.json", r#"[{"name": "echo"}]"#);
    let limits = temp_file(
        "small-limits.json",
        r#"{"tool_calls": 2, "return_bytes": 8}"#,
    );
    let args = stdin_run(&catalog, &limits);

    let (code, result, _) = kiln(
        &args,
        Some("for (;;) { try { await tools.echo() } catch (e) {} }"),
    );
    assert_eq!(code, 1);
    assert_eq!(result["structuredContent"]["budget"], "tool_calls");
    assert_eq!(result["structuredContent"]["call_count"], 2);

    let (code, result, _) = kiln(&args, Some("return 'more than eight bytes'"));
    assert_eq!(code, 1);
    assert_eq!(result["structuredContent"]["budget"], "return_value");
    assert_eq!(
        result["structuredContent"]["termination_reason"],
        "budget_exhausted:return_value"
    );
}

/// The budgets a guest spends without asking the host: JS CPU (guest execution
/// only), wall, person wait and memory, as a table of (program, limits,
/// expected termination reason).
#[test]
fn time_budgets_count_what_the_reference_counts() {
    let catalog = temp_file(
        "time-catalog.json",
        r#"[{"name": "slow", "delay_ms": 400},
            {"name": "approve", "person_wait_ms": 300, "returns": {"approved": true}}]"#,
    );
    let busy = "const t = Date.now(); while (Date.now() - t < 150) {}";
    let cases: &[(&str, String, &str, &str)] = &[
        // A guest that never stops is ended from outside, by the watchdog.
        (
            "never stops",
            "while (true) {}".into(),
            r#"{"js_cpu_ms": 300}"#,
            "budget_exhausted:js_cpu",
        ),
        // Short spans between sleeps add up; the sandbox stops it when it goes idle.
        (
            "spans add up",
            format!("for (let i = 0; i < 10; i++) {{ {busy}; await sleep(1); }}"),
            r#"{"js_cpu_ms": 400}"#,
            "budget_exhausted:js_cpu",
        ),
        // Sleeping and awaiting a tool are not JS CPU.
        (
            "waits are free",
            "await sleep(500); await tools.slow(); await sleep(500);".into(),
            r#"{"js_cpu_ms": 200}"#,
            "completed",
        ),
        (
            "wall",
            "await sleep(2000);".into(),
            r#"{"wall_ms": 300}"#,
            "budget_exhausted:wall",
        ),
        (
            "person wait",
            "await tools.approve();".into(),
            r#"{"person_wait_ms": 100}"#,
            "budget_exhausted:person_wait",
        ),
        // Not a budget of time, but one a guest also spends without stopping.
        (
            "memory",
            "let a = []; while (true) a.push('x'.repeat(1e6) + a.length);".into(),
            r#"{"memory_bytes": 16777216}"#,
            "budget_exhausted:memory",
        ),
    ];
    for (name, program, limits, reason) in cases {
        let limits = temp_file(&format!("time-{}.json", name.replace(' ', "-")), limits);
        let args = stdin_run(&catalog, &limits);
        let (_, result, stderr) = kiln(&args, Some(program));
        let structured = &result["structuredContent"];
        assert_eq!(
            structured["termination_reason"], *reason,
            "{name}: {result} {stderr}"
        );
        if *reason != "completed" {
            assert_eq!(result["errorCode"], "budget_exhausted", "{name}");
            assert_eq!(
                Some(structured["budget"].as_str().unwrap()),
                reason.strip_prefix("budget_exhausted:"),
                "{name}"
            );
        }
    }
}

#[test]
fn person_wait_is_counted_only_while_every_call_is_held_and_nothing_sleeps() {
    let catalog = temp_file(
        "person-catalog.json",
        r#"[{"name": "approve", "person_wait_ms": 500, "returns": {"approved": true}}]"#,
    );
    let tools = catalog.to_str().unwrap();
    let person_wait = |program: &str| {
        let (code, result, _) = kiln(&["run", "-", "--tools", tools], Some(program));
        assert_eq!(code, 0, "{result}");
        let structured = &result["structuredContent"];
        let call = &structured["calls"][0];
        assert_eq!(call["waited_on_person"], true);
        let text = result["content"][0]["text"].as_str().unwrap().to_owned();
        let held_for = call["duration_ms"].as_u64().unwrap();
        (
            structured["person_wait_ms"].as_u64().unwrap(),
            held_for,
            text,
        )
    };
    let (held, _, text) = person_wait("return await tools.approve()");
    assert!((480..2000).contains(&held), "{held}");
    assert!(text.contains(&format!("· person wait {held} ms")), "{text}");
    // While a sleep is pending, waiting is the program's own: not person wait.
    // The 200 ms asleep fall inside the call's time, so at least that much of
    // it is not person wait, whatever the machine's load did to the timers;
    // the rest, after the sleep settled, is.
    let (asleep, held_for, _) = person_wait("await Promise.all([tools.approve(), sleep(200)])");
    assert!(asleep + 200 <= held_for + 20, "{asleep} of {held_for}");
    assert!(asleep >= 20, "{asleep} of {held_for}");
}

/// Work that never yields inside the engine or inside value conversion (a
/// catastrophic regex, a looping Proxy trap, a getter that never returns) is
/// bounded by the CLI's watchdog at the JS CPU budget, like any loop.
#[test]
fn engine_work_that_never_yields_ends_at_the_cpu_budget() {
    let catalog = temp_file("hostile-catalog.json", r#"[{"name": "echo"}]"#);
    let limits = temp_file("hostile-limits.json", r#"{"js_cpu_ms": 400}"#);
    let programs = [
        "return /(a+)+$/.test('a'.repeat(64) + 'b')",
        "await tools.echo(new Proxy({}, {ownKeys() { for (;;) {} }}))",
        "return {get x() { for (;;) {} }}",
        "await tools.echo({toJSON() { while (true) {} }})",
    ];
    let args = stdin_run(&catalog, &limits);
    for program in programs {
        let (code, result, stderr) = kiln(&args, Some(program));
        assert_eq!(code, 1, "{program}: {stderr}");
        assert_eq!(
            result["structuredContent"]["termination_reason"], "budget_exhausted:js_cpu",
            "{program}: {result}"
        );
    }
}

/// Some engine work recurses on the host's stack with no bound of its own:
/// `JSON.stringify` of a value nested 100,000 levels deep overflows it. The
/// program runs in a child process, so that is an `engine` failure with a plain
/// message, not a dead CLI.
#[test]
fn an_engine_stack_overflow_is_an_engine_failure_not_a_dead_cli() {
    // A prototype chain 100,000 long: the engine's property lookup recurses
    // once per link, and nothing bounds how long a chain the program makes.
    let program = "let o = {}; for (let i = 0; i < 1e5; i++) o = Object.create(o); return o.x";
    // Building the chain takes seconds of JavaScript in a debug build, and the
    // CPU budget counts the time the guest runs, which a loaded machine
    // stretches past the default 10 s: the whole budget leaves the overflow
    // the only thing that can end this run.
    let catalog = temp_file("overflow-catalog.json", "[]");
    let limits = temp_file(
        "overflow-limits.json",
        &format!(
            r#"{{"js_cpu_ms": {}}}"#,
            kiln_types::RunLimits::MAX_JS_CPU_MS
        ),
    );
    let (code, result, _) = kiln(&stdin_run(&catalog, &limits), Some(program));
    assert_eq!(code, 1, "{result}");
    assert_eq!(result["errorCode"], "engine", "{result}");
    let message = result["structuredContent"]["error"]["message"]
        .as_str()
        .unwrap();
    assert!(message.contains("overflowed its stack"), "{message}");
    // The next run is a new process, as always.
    let (code, result, _) = kiln(&["run", "-"], Some("return 'alive'"));
    assert_eq!(
        (code, &result["structuredContent"]["value"]),
        (0, &serde_json::json!("alive"))
    );
}

/// A run ended from outside (the watchdog) keeps the output the guest printed
/// before it last went idle, and its known call outcomes.
#[test]
fn a_run_ended_by_the_watchdog_keeps_its_output_and_calls() {
    let catalog = temp_file("kept-catalog.json", r#"[{"name": "echo"}]"#);
    let limits = temp_file("kept-limits.json", r#"{"js_cpu_ms": 300}"#);
    let program = "console.log('before'); await tools.echo({a: 1}); while (true) {}";
    let (code, result, _) = kiln(&stdin_run(&catalog, &limits), Some(program));
    assert_eq!(code, 1);
    let structured = &result["structuredContent"];
    assert_eq!(structured["termination_reason"], "budget_exhausted:js_cpu");
    assert_eq!(structured["output"], "before\n");
    assert_eq!(structured["calls"][0]["tool"], "echo");
    assert_eq!(structured["calls"][0]["outcome"], "ok");
}

/// A run its watchdog ends in the middle of a loop keeps every line the
/// program printed, also those after it last went idle (a loop that never
/// awaits never does): lines reach the parent as they are printed. What the
/// console budget cut is counted too, not kept.
#[test]
fn a_run_ended_mid_loop_keeps_every_line_it_printed() {
    let catalog = temp_file("loop-catalog.json", "[]");
    // A budget far past what the lines before each loop take, also on a
    // loaded machine: the watchdog ends the loop, never a line.
    let limits = temp_file("loop-limits.json", r#"{"js_cpu_ms": 1000}"#);
    let cases = [
        ("console.log('before'); while (true) {}", "before\n"),
        (
            "await sleep(1); console.log('one'); console.info('two'); for (;;) {}",
            "one\ntwo\n",
        ),
    ];
    for (program, output) in cases {
        let (code, result, stderr) = kiln(&stdin_run(&catalog, &limits), Some(program));
        assert_eq!(code, 1, "{program}: {stderr}");
        let structured = &result["structuredContent"];
        assert_eq!(
            structured["termination_reason"], "budget_exhausted:js_cpu",
            "{program}: {result}"
        );
        assert_eq!(structured["output"], output, "{program}: {result}");
    }
    // Two lines of `12345\n` fit in 12 bytes; the rest are dropped and counted.
    let limits = temp_file(
        "loop-console-limits.json",
        r#"{"js_cpu_ms": 1000, "console_bytes": 12}"#,
    );
    let program = "for (let i = 0; i < 100; i++) console.log('12345'); while (true) {}";
    let (code, result, stderr) = kiln(&stdin_run(&catalog, &limits), Some(program));
    assert_eq!(code, 1, "{stderr}");
    let output = result["structuredContent"]["output"].as_str().unwrap();
    assert!(
        output.starts_with("12345\n12345\n[98 more console lines dropped"),
        "{output}"
    );
}

/// The CPU time so far of the processes whose parent is `pid`, in clock ticks.
#[cfg(target_os = "linux")]
fn children_cpu_ticks(pid: u32) -> u64 {
    let mut ticks = 0;
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // After the command's `)`: state, ppid, …, utime (the 12th), stime.
        let Some((_, fields)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = fields.split_whitespace().collect();
        if fields.get(1).and_then(|ppid| ppid.parse::<u32>().ok()) == Some(pid) {
            ticks += fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
        }
    }
    ticks
}

/// Ctrl-C while the program spins in a loop it entered after its last call:
/// the `cancelled` result still has the line it printed before the loop.
#[cfg(target_os = "linux")]
#[test]
fn ctrl_c_in_the_middle_of_a_loop_keeps_what_the_program_printed() {
    let store = std::env::temp_dir().join(format!("kiln-cli-cancel-loop-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&store);
    let program = "await workspace.write('started.txt', 'yes');\n\
                   console.log('looping');\n\
                   while (true) {}";
    let mut command = Command::new(env!("CARGO_BIN_EXE_kiln"));
    command
        .args(["run", "-", "--approve", "yes", "--store"])
        .arg(&store);
    let child = started(&mut command, program);
    wait_until("wrote its marker", || {
        store.join("files/started.txt").exists()
    });
    // From the marker on, the program's process spends CPU only on the line
    // and the loop after it: a third of a second of it means it is looping.
    let at_marker = children_cpu_ticks(child.id());
    wait_until("spun", || children_cpu_ticks(child.id()) >= at_marker + 30);
    let (_, json) = interrupted(child);
    assert_eq!(json["errorCode"], "cancelled", "{json}");
    assert_eq!(json["structuredContent"]["output"], "looping\n", "{json}");
    let _ = std::fs::remove_dir_all(&store);
}

/// The `try/catch` program the ladder tests run: what the call answered, or
/// the code and message it was refused with.
const TRY_SUM: &str = "try { return {ok: await tools.everything_get_sum({a: 1, b: 2})} } \
                       catch (error) { return {code: error.code, message: error.message} }";

#[test]
fn mcp_tools_from_the_reference_server_walk_the_ladder() {
    let server = kiln_testkit::EverythingServer::start();
    let mcp = format!("everything={}", server.url());
    let program = "const sum = await tools.everything_get_sum({a: 2, b: 3});\n\
                   const echo = await tools.everything_echo('hi');\n\
                   const weather = await tools.everything_get_structured_content({location: 'Chicago'});\n\
                   return {sum, echo, weather, names: Object.keys(tools).length};";
    let (code, json, stderr) = kiln(&["run", "-", "--mcp", &mcp], Some(program));
    assert_eq!(code, 0, "{json:#} {stderr}");
    let value = &json["structuredContent"]["value"];
    assert_eq!(value["sum"], "The sum of 2 and 3 is 5.");
    // A lone string fills the only required string field (`message`).
    assert_eq!(value["echo"], "Echo: hi");
    assert_eq!(value["weather"]["temperature"], 36);
    assert!(value["names"].as_u64().unwrap() > 10, "{value}");

    // Mode × approver, with nobody at a terminal.
    let cases: [(&[&str], &str, &str); 4] = [
        (
            &["--permission-mode", "plan"],
            "refused",
            "plan mode runs only read calls",
        ),
        (
            &["--permission-mode", "default", "--approve", "no"],
            "denied",
            "was denied",
        ),
        (
            &["--permission-mode", "default"],
            "consent_unavailable",
            "kiln run (no terminal to ask on) has nobody to ask",
        ),
        (
            &["--permission-mode", "default", "--approve", "yes"],
            "",
            "",
        ),
    ];
    for (flags, want_code, words) in cases {
        let mut args = vec!["run", "-", "--mcp", &mcp];
        args.extend_from_slice(flags);
        let (code, json, stderr) = kiln(&args, Some(TRY_SUM));
        assert_eq!(code, 0, "{flags:?}: {json:#} {stderr}");
        let value = &json["structuredContent"]["value"];
        if want_code.is_empty() {
            assert_eq!(value["ok"], "The sum of 1 and 2 is 3.", "{flags:?}");
            continue;
        }
        assert_eq!(value["code"], want_code, "{flags:?}: {value}");
        let message = value["message"].as_str().unwrap();
        assert!(message.contains(words), "{flags:?}: {message}");
        let outcome = &json["structuredContent"]["calls"][0]["outcome"];
        assert_eq!(outcome, want_code, "{flags:?}");
    }
}

#[test]
fn an_mcp_server_that_is_down_is_a_warning_and_the_run_goes_on() {
    let url = format!("down=http://127.0.0.1:{}/mcp", kiln_testkit::free_port());
    let (code, json, _) = kiln(&["run", "-", "--mcp", &url], Some("return 'down' in tools"));
    assert_eq!(code, 0, "{json:#}");
    assert_eq!(json["structuredContent"]["value"], false);
    let warning = &json["structuredContent"]["warnings"][0];
    assert_eq!(warning["code"], "tools_unavailable");
    assert!(
        warning["message"]
            .as_str()
            .unwrap()
            .contains("MCP server `down`"),
        "{warning}"
    );
}

#[test]
fn scripted_categories_meet_the_mode_and_the_terminal_approves() {
    let catalog = temp_file(
        "categories.json",
        r#"[{"name": "look", "category": "read", "returns": "seen"},
            {"name": "save", "category": "write", "returns": "saved"}]"#,
    );
    let program = temp_file(
        "categories.js",
        "const look = await tools.look();\n\
         let save;\n\
         try { save = await tools.save({note: 'x'}) } catch (error) { save = error.code }\n\
         return {look, save};",
    );
    let run = |extra: &[&str]| {
        let mut args = vec![
            "run",
            program.to_str().unwrap(),
            "--tools",
            catalog.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let (_, json, stderr) = kiln(&args, None);
        (json["structuredContent"]["value"].clone(), stderr)
    };
    let (value, stderr) = run(&["--permission-mode", "plan"]);
    assert_eq!(
        value,
        serde_json::json!({"look": "seen", "save": "refused"}),
        "{stderr}"
    );
    let (value, _) = run(&["--permission-mode", "auto"]);
    assert_eq!(value, serde_json::json!({"look": "seen", "save": "saved"}));

    // On a terminal (a pty from `script`), default mode asks there and reads
    // the answer: `a` allows `save` for the rest of the session.
    // `--json`: on a terminal `kiln run` prints a summary otherwise.
    let command = format!(
        "{} run {} --tools {} --json",
        env!("CARGO_BIN_EXE_kiln"),
        program.display(),
        catalog.display()
    );
    let mut script = Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Answer once the question is on the terminal (typed-ahead input is not
    // read), and keep the keyboard open until the run ends.
    let mut screen = script.stdout.take().unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let reader = std::thread::spawn({
        let seen = seen.clone();
        move || {
            let mut chunk = [0_u8; 4096];
            while let Ok(n @ 1..) = std::io::Read::read(&mut screen, &mut chunk) {
                seen.lock().unwrap().extend_from_slice(&chunk[..n]);
            }
        }
    });
    let asked = |seen: &[u8]| String::from_utf8_lossy(seen).contains("Allow? [y]es");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !asked(&seen.lock().unwrap()) {
        assert!(
            std::time::Instant::now() < deadline,
            "no question on the terminal"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let mut keyboard = script.stdin.take().unwrap();
    keyboard.write_all(b"a\n").unwrap();
    let status = script.wait().unwrap();
    drop(keyboard);
    reader.join().unwrap();
    let stdout = seen.lock().unwrap().clone();
    assert!(status.success(), "{}", String::from_utf8_lossy(&stdout));
    let text = String::from_utf8_lossy(&stdout);
    assert!(
        text.contains("kiln: save (call 2) wants to run")
            && text.contains("write tool from scripted"),
        "{text}"
    );
    let json: serde_json::Value = text
        .find("\n{")
        .and_then(|start| serde_json::from_str(text[start..].trim()).ok())
        .unwrap_or_else(|| panic!("no result in: {text}"));
    assert_eq!(
        json["structuredContent"]["value"],
        serde_json::json!({"look": "seen", "save": "saved"})
    );
    assert_eq!(
        json["structuredContent"]["calls"][1]["waited_on_person"],
        true
    );
}

#[test]
fn secrets_reach_a_request_header_and_never_come_back() {
    // A one-shot HTTP server that answers with the request it got.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let echo = std::thread::spawn(move || {
        use std::io::{BufRead as _, BufReader};
        let (stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut head = String::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if line.trim().is_empty() {
                break;
            }
            head.push_str(&line);
        }
        let mut stream = stream;
        let answer = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{head}",
            head.len()
        );
        stream.write_all(answer.as_bytes()).unwrap();
    });
    let program = format!(
        "const r = await tools.http_request({{url: 'http://127.0.0.1:{port}/x', \
         secret_headers: {{authorization: 'Bearer ${{API_KEY}}'}}}});\n\
         return {{status: r.status, body: r.body}};"
    );
    let mut command = Command::new(env!("CARGO_BIN_EXE_kiln"));
    command
        .args(["run", "-", "--secret", "API_KEY=KILN_TEST_KEY"])
        .arg(format!("--allow-net=http://127.0.0.1:{port}"))
        .env("KILN_TEST_KEY", "sk-test-0123456789");
    let output = started(&mut command, &program).wait_with_output().unwrap();
    echo.join().unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(!text.contains("sk-test-0123456789"), "{text}");
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let body = json["structuredContent"]["value"]["body"].as_str().unwrap();
    // The server got the key; what came back names it, redacted.
    assert!(
        body.contains("authorization: Bearer [redacted:API_KEY]"),
        "{body}"
    );

    let (code, _, stderr) = kiln(
        &["run", "-", "--secret", "NOT_SET_ANYWHERE_1"],
        Some("return 1"),
    );
    assert_eq!(code, 2);
    assert!(
        stderr.contains("`NOT_SET_ANYWHERE_1` is not set"),
        "{stderr}"
    );
}

#[test]
fn a_run_has_no_network_unless_it_asks_for_it_by_name() {
    let keys = "return Object.keys(tools)";
    let named = temp_file(
        "net-catalog.json",
        r#"[{"name": "echo", "returns": {"ok": true}}, {"name": "http_request"}]"#,
    );
    let scripted_named = temp_file(
        "net-scripted.json",
        r#"[{"name": "http_request", "returns": {"fake": true}}]"#,
    );
    let named = named.to_str().unwrap();
    let cases: [(&[&str], serde_json::Value); 4] = [
        (&["run", "-"], json!([])),
        (&["run", "-", "--allow-net"], json!(["http_request"])),
        (
            &["run", "-", "--allow-net=http://127.0.0.1:9"],
            json!(["http_request"]),
        ),
        (
            &["run", "-", "--tools", named],
            json!(["echo", "http_request"]),
        ),
    ];
    for (args, expected) in cases {
        let (code, json, stderr) = kiln(args, Some(keys));
        assert_eq!(code, 0, "{args:?}: {stderr}");
        assert_eq!(json["structuredContent"]["value"], expected, "{args:?}");
    }
    // A scripted entry cannot stand in for the built-in.
    let (code, _, stderr) = kiln(
        &["run", "-", "--tools", scripted_named.to_str().unwrap()],
        Some(keys),
    );
    assert_eq!(code, 2);
    assert!(
        stderr.contains("`http_request` is the built-in"),
        "{stderr}"
    );
    // A bad origin is refused before anything runs.
    let (code, _, stderr) = kiln(&["run", "-", "--allow-net=ftp://x"], Some(keys));
    assert_eq!(code, 2);
    assert!(stderr.contains("allow_net"), "{stderr}");
    // `--allow-net` alone is public addresses only: loopback is refused
    // before a byte is sent (nothing listens on port 9 here either way).
    let (code, json, _) = kiln(
        &["run", "-", "--allow-net"],
        Some("return await tools.http_request({url: 'http://127.0.0.1:9/'}).catch((e) => e.code)"),
    );
    assert_eq!(code, 0);
    assert_eq!(json["structuredContent"]["value"], "address_refused");
}

#[cfg(unix)]
#[test]
fn ctrl_c_prints_the_cancelled_result_with_what_the_run_had() {
    let store = std::env::temp_dir().join(format!("kiln-cli-cancel-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&store);
    let catalog = temp_file(
        "slow.json",
        r#"[{"name": "slow", "category": "read", "delay_ms": 60000}]"#,
    );
    // `slow` goes out with the marker's write, in the same batch of calls: once the
    // marker is there, `slow` has reached its tool (awaiting it only after the write
    // raced Ctrl+C against the program reaching the call).
    let program = "console.log('before');\n\
                   const slow = tools.slow({});\n\
                   await workspace.write('started.txt', 'yes');\n\
                   await slow;\n\
                   return 'never';";
    let mut command = Command::new(env!("CARGO_BIN_EXE_kiln"));
    command
        .args(["run", "-", "--approve", "yes", "--tools"])
        .arg(&catalog)
        .arg("--store")
        .arg(&store);
    let child = started(&mut command, program);
    // The file says the program is past its first call and awaiting `slow`.
    wait_until("wrote its marker", || {
        store.join("files/started.txt").exists()
    });
    let (output, json) = interrupted(child);
    assert_eq!(
        output.status.code(),
        Some(1),
        "{json} {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(json["errorCode"], "cancelled", "{json}");
    let s = &json["structuredContent"];
    assert_eq!(s["status"], "cancelled");
    assert_eq!(s["output"], "before\n");
    let outcomes: Vec<(&str, &str)> = s["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|call| {
            (
                call["tool"].as_str().unwrap(),
                call["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    // `slow` had reached its tool: what it did is unknown, never resent.
    assert_eq!(
        outcomes,
        [("slow", "outcome_unknown"), ("file_write", "ok")]
    );
    let _ = std::fs::remove_dir_all(&store);
}

/// On a terminal (a pty from `script`) `kiln run` prints the result's text
/// for a person — status, value, console, calls — and `--json` the object.
#[test]
fn on_a_terminal_kiln_run_prints_a_summary_and_json_when_asked() {
    let catalog = temp_file(
        "summary.json",
        r#"[{"name": "weather", "returns": {"c": 21}}]"#,
    );
    let program = temp_file(
        "summary.js",
        "console.log('asking');\nconst w = await tools.weather({city: 'Oslo'});\nreturn {w};",
    );
    let on_terminal = |extra: &str| {
        let command = format!(
            "{} run {} --tools {} --approve yes{extra}",
            env!("CARGO_BIN_EXE_kiln"),
            program.display(),
            catalog.display()
        );
        let output = Command::new("script")
            .args(["-qec", &command, "/dev/null"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        String::from_utf8_lossy(&output.stdout).replace("\r\n", "\n")
    };
    let summary = on_terminal("");
    for said in [
        "completed · ",
        "Return value:",
        "\"c\": 21",
        "Output:\nasking",
        "weather | ok",
    ] {
        assert!(summary.contains(said), "{said:?} in:\n{summary}");
    }
    assert!(!summary.contains("structuredContent"), "{summary}");
    let json = on_terminal(" --json");
    let start = json
        .find('{')
        .unwrap_or_else(|| panic!("no JSON in:\n{json}"));
    let value: serde_json::Value = serde_json::from_str(json[start..].trim()).unwrap();
    assert_eq!(value["structuredContent"]["value"]["w"]["c"], 21);
}

#[test]
fn a_provider_that_echoes_its_key_gives_it_to_no_program_record_or_export() {
    let key = "sk-kiln-cli-echoed-7777";
    let dir = kiln_testkit::TempDir::new(env!("CARGO_TARGET_TMPDIR"), "echoed-key");
    let store_dir = dir.join("store");
    // A reply that says the key (cut across deltas), then an error that quotes it.
    for (status, program) in [
        (200, "return await tools.model({prompt: 'hello'});"),
        (
            401,
            "try { await tools.model({prompt: 'hello'}); } catch (error) { return error.message; }",
        ),
    ] {
        let port = kiln_testkit::key_echoing_server(status);
        let base_url = format!("http://127.0.0.1:{port}/v1");
        let mut command = Command::new(env!("CARGO_BIN_EXE_kiln"));
        command
            .args(["run", "-", "--json", "--store", &store_dir])
            .args(["--provider", "openai", "--base-url", &base_url])
            .args(["--model", "gpt-4o-mini", "--key-env", "KILN_TEST_KEY"])
            .env("KILN_TEST_KEY", key);
        let output = started(&mut command, program).wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            !stdout.contains(key) && !stderr.contains(key),
            "{stdout}\n{stderr}"
        );
        assert!(
            stdout.contains("[redacted:key]"),
            "{status}: {stdout}\n{stderr}"
        );
    }
    let export = dir.path().join("export.json");
    let (code, _, stderr) = kiln(
        &[
            "memory",
            "export",
            export.to_str().unwrap(),
            "--store",
            &store_dir,
        ],
        None,
    );
    assert_eq!(code, 0, "{stderr}");
    let exported = std::fs::read_to_string(&export).unwrap();
    assert!(exported.contains("[redacted:key]"), "{exported}");
    assert!(!exported.contains(key), "{exported}");
    // Nothing the store wrote holds it either.
    let mut pending = vec![dir.path().join("store")];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                assert!(
                    !String::from_utf8_lossy(&bytes).contains(key),
                    "{} holds the key",
                    path.display()
                );
            }
        }
    }
}

/// No character a terminal acts on is left in `screen` (a pty's, its `\r`
/// taken out): no control but newline and tab, no bidirectional override.
fn assert_shown_not_acted(screen: &str, what: &str) {
    let raw: Vec<char> = screen
        .replace("\r\n", "\n")
        .chars()
        .filter(|c| {
            (c.is_control() && !matches!(c, '\n' | '\t'))
                || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{61c}')
        })
        .collect();
    assert!(raw.is_empty(), "{what}: raw {raw:?} in {screen:?}");
}

/// Issue 35 #5: what a program prints, returns or throws — a window title
/// (OSC), an erased line (CSI), a C1 command introducer, a right-to-left
/// override — reaches a terminal (a pty from `script`) written visibly, in
/// `kiln run`'s summary and `kiln node run`'s, and in their error lines.
#[test]
fn on_a_terminal_what_a_program_says_is_shown_not_acted_on() {
    const SAYS: &str = r"\x1b]0;pwned\x07 \x1b[2K \x9b31m \u202e";
    let completes = temp_file(
        "hostile.js",
        &format!("console.log('log {SAYS}');\nreturn 'value {SAYS}';"),
    );
    let throws = temp_file(
        "hostile-throws.js",
        &format!("throw new Error('thrown {SAYS}');"),
    );
    let node = |name: &str, code: String| {
        temp_file(
            name,
            &json!({"title": "t", "code": code, "outputs": [{"name": "x", "type": "any"}]})
                .to_string(),
        )
    };
    let node_completes = node(
        "hostile-node.json",
        format!("console.log('log {SAYS}');\nreturn {{x: 'output {SAYS}'}};"),
    );
    let node_throws = node(
        "hostile-node-throws.json",
        format!("throw new Error('thrown {SAYS}');"),
    );
    for (args, said) in [
        (format!("run {}", completes.display()), "log "),
        (format!("run {}", throws.display()), "thrown "),
        // Its outputs are JSON, whose own escapes show ESC; the console is prose.
        (format!("node run {}", node_completes.display()), "log "),
        (format!("node run {}", node_throws.display()), "thrown "),
    ] {
        let command = format!("{} {args}", env!("CARGO_BIN_EXE_kiln"));
        let output = Command::new("script")
            .args(["-qec", &command, "/dev/null"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let screen = String::from_utf8_lossy(&output.stdout);
        let what = format!("kiln {args}");
        assert!(
            screen.contains(&format!(
                "{said}\\u{{001B}}]0;pwned\\u{{0007}} \\u{{001B}}[2K \\u{{009B}}31m \\u{{202E}}"
            )),
            "{what}: {screen}"
        );
        assert_shown_not_acted(&screen, &what);
    }
}

/// Polls `done` every 20 ms until it holds; a minute without it fails the
/// test, naming what the program never did.
#[cfg(unix)]
fn wait_until(what: &str, done: impl Fn() -> bool) {
    let waited = std::time::Instant::now();
    while !done() {
        assert!(
            waited.elapsed() < std::time::Duration::from_secs(60),
            "the program never {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Sends SIGINT to the supervising `kiln` process alone (it passes it on),
/// and answers what it printed, with its stdout read as JSON.
#[cfg(unix)]
fn interrupted(child: std::process::Child) -> (std::process::Output, serde_json::Value) {
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let output = child.wait_with_output().unwrap();
    let json = serde_json::from_slice(&output.stdout).unwrap_or_default();
    (output, json)
}

/// `kiln ARGS | head`: a reader that goes away before the output is written
/// (here, before anything is). Rust ignores SIGPIPE, so each write to the
/// closed pipe fails with `BrokenPipe`, and `kiln` must take it as the reader
/// leaving rather than panic: it ends quietly, with the command's own status.
#[test]
fn a_reader_that_goes_away_ends_the_output_quietly() {
    // More than a pipe buffer (64 KiB) of output: 60,000 characters of
    // console, in the text part and in the structured part, and the value.
    let program = "console.log('y'.repeat(60000)); return 'x'.repeat(15000)";
    let cases: [&[&str]; 3] = [
        &["run", "-"],
        &["run", "-", "--report"],
        &["eval", "codeact", "--list"],
    ];
    for args in cases {
        let mut child = spawn_kiln(args);
        // The reader goes away at once: every write finds the pipe closed.
        drop(child.stdout.take());
        let mut stdin = child.stdin.take().unwrap();
        // `eval --list` reads no input and may be gone already.
        let _ = stdin.write_all(program.as_bytes());
        drop(stdin);
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        let what = format!("kiln {}: {stderr}", args.join(" "));
        assert!(!stderr.contains("panicked"), "{what}");
        assert!(!stderr.contains("failed printing"), "{what}");
        assert!(!stderr.contains("standard output"), "{what}");
        assert_eq!(output.status.code(), Some(0), "{what}");
    }
}
