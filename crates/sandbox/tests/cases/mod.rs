//! The table of programs every sandbox build must report identically, natively
//! and in wasm, and the helper that compares a report with its expectation.

pub mod scripted;
pub mod stdlib;

use kiln_types::{RunOutcome, RunReport};

/// Renders a report as one comparable line: the outcome, the calls (when
/// there are a few), then console lines.
pub fn summary(report: &RunReport) -> String {
    let mut outcome = match &report.outcome {
        RunOutcome::Completed { value } if report.finished => format!("finished {value}"),
        RunOutcome::Completed { value } => format!("completed {value}"),
        RunOutcome::Failed(error) => {
            let kind = serde_json::to_value(error.kind).unwrap_or_default();
            let code = error
                .code
                .as_deref()
                .map(|code| format!(" {code}"))
                .unwrap_or_default();
            format!("{}{code} {}", kind.as_str().unwrap_or("?"), error.message)
        }
    };
    if !report.calls.is_empty() && report.calls.len() <= 5 {
        let calls: Vec<String> = report
            .calls
            .iter()
            .map(|call| format!("{} {}", call.tool, call.outcome.as_str()))
            .collect();
        outcome.push_str(&format!(" [{}]", calls.join(", ")));
    }
    let console: Vec<String> = report
        .console
        .iter()
        .map(|line| format!("{}> {}", line.level.method(), line.text))
        .collect();
    if console.is_empty() {
        outcome
    } else {
        format!("{outcome} | {}", console.join(" | "))
    }
}

/// Programs every sandbox build must run identically, natively and in wasm.
pub const CASES: &[(&str, &str)] = &[
    // `finish(value)` ends the run at once, from anywhere, uncatchably.
    ("finish({n: 1}); return 2", r#"finished {"n":1}"#),
    ("finish()", "finished null"),
    (
        "try { finish(1) } catch (e) { return 'caught' } finally { console.log('finally') }",
        "finished 1",
    ),
    (
        "await Promise.resolve(); [1, 2, 3].forEach((n) => { if (n == 2) finish(n) }); return 0",
        "finished 2",
    ),
    (
        "await Promise.all([1, 2].map(async (n) => { await null; finish(n) })); return 0",
        "finished 1",
    ),
    (
        "try { finish(10n) } catch (e) { return e.name + ': ' + e.message }",
        r#"completed "TypeError: finish(value) takes JSON: `value` is a BigInt, which JSON cannot carry""#,
    ),
    (
        "const o = {get x() { finish('inner'); return 1 }}; finish(o)",
        r#"finished "inner""#,
    ),
    ("return 1 + 1", "completed 2"),
    (
        "return {a: [1, 'x', true, null]}",
        r#"completed {"a":[1,"x",true,null]}"#,
    ),
    (
        "const x = await Promise.resolve(5); return x * 2",
        "completed 10",
    ),
    (
        "return [2 ** 40, -(2 ** 33), 0.5, -0, 1e21]",
        "completed [1099511627776,-8589934592,0.5,0,1e+21]",
    ),
    ("return 'text'", r#"completed "text""#),
    ("return undefined", "completed null"),
    ("", "completed null"),
    (
        "console.log('hi', 1, {a: 1, 'b-c': [2]}); console.warn('w'); return null",
        r#"completed null | log> hi 1 { a: 1, "b-c": [ 2 ] } | warn> w"#,
    ),
    (
        "function named() {} console.log(named, () => 1)",
        "completed null | log> [Function: named] [Function (anonymous)]",
    ),
    (
        "const a = {n: 1}; a.self = a; console.log(a)",
        "completed null | log> { n: 1, self: [Circular] }",
    ),
    (
        "console.error(new RangeError('out'))",
        "completed null | error> RangeError: out",
    ),
    (
        "throw new TypeError('bad input')",
        "script TypeError: bad input",
    ),
    (
        "await Promise.reject(new Error('later'))",
        "script Error: later",
    ),
    ("throw 'boom'", "script Uncaught boom"),
    (
        "null.x",
        "script TypeError: cannot convert 'null' or 'undefined' to object",
    ),
    ("return (", "syntax"),
    (
        "await new Promise(() => {})",
        "never_settled the program is waiting on a promise that nothing can settle (nothing is left to run)",
    ),
    (
        "return eval('1')",
        "script EvalError: eval is not allowed in the Kiln sandbox",
    ),
    (
        "return (function(){}).constructor('return 1')()",
        "script EvalError: compiling a string into code (eval, Function) is not allowed in the Kiln sandbox",
    ),
    (
        "return (async function(){}).constructor('return 1')",
        "script EvalError: compiling a string into code (eval, Function) is not allowed in the Kiln sandbox",
    ),
    ("await sleep(20); return 'slept'", r#"completed "slept""#),
    (
        "const t = Date.now(); await Promise.all([sleep(30), sleep(30)]); return Date.now() - t < 1000",
        "completed true",
    ),
    // Hostile (issue 15 #7): many sleeps settle in about linear time.
    (
        "await Promise.all(Array.from({length: 5000}, (_, i) => sleep(i % 5))); return 'woke'",
        r#"completed "woke""#,
    ),
    (
        "await sleep(-1)",
        "script RangeError: sleep(ms) takes an integer number of milliseconds from 0 to 10000; got -1",
    ),
    (
        "await sleep(1.5)",
        "script RangeError: sleep(ms) takes an integer number of milliseconds from 0 to 10000; got 1.5",
    ),
    (
        "await sleep('5')",
        "script RangeError: sleep(ms) takes an integer number of milliseconds from 0 to 10000; got the string \"5\"",
    ),
    (
        "try { sleep(10001) } catch (e) { return e instanceof RangeError }",
        "completed true",
    ),
    ("return 'x'.repeat(16 * 1024 - 2)", "completed_len 16384"),
    (
        "return 'x'.repeat(16 * 1024)",
        "budget_exhausted budget_exhausted:return_value: the returned value is 16386 bytes of JSON, more than the 16384 bytes a run may return",
    ),
    (
        "return [new Date(0), NaN, -Infinity, undefined, () => 1, Symbol('s')]",
        r#"completed ["1970-01-01T00:00:00.000Z",null,null,null,null,null]"#,
    ),
    (
        "return {a: undefined, f() {}, b: 2, toString: 1}",
        r#"completed {"b":2,"toString":1}"#,
    ),
    (
        "return {toJSON(key) { return 'key=' + key }}",
        r#"completed "key=""#,
    ),
    (
        "return {inner: {toJSON(key) { return key }}}",
        r#"completed {"inner":"inner"}"#,
    ),
    (
        "return {a: {b: 1n}}",
        "script TypeError: `value.a.b` is a BigInt, which JSON cannot carry",
    ),
    (
        "const a = {x: []}; a.x.push(a); return a",
        "script TypeError: cyclic value: `value.x[0]` refers back to `value`",
    ),
    (
        "let o = {}; let c = o; for (let i = 0; i < 100000; i++) { c.n = {}; c = c.n } return o",
        "script TypeError: `…n.n.n.n.n.n.n.n.n.n.n.n.n.n.n.n.n.n.n.n.n.n.n.n.n.n.n.n.n.n.n` is nested more than 64 levels deep, deeper than Kiln carries a value",
    ),
    (
        "return new Proxy({}, {ownKeys() { throw new Error('trap') }})",
        "script Error: trap",
    ),
    (
        "return {get boom() { throw new RangeError('getter') }}",
        "script RangeError: getter",
    ),
    (
        "let n = 0; return await waitFor(() => ++n >= 3 && n, {interval: 1, timeout: 5000})",
        "completed 3",
    ),
    (
        "let n = 0; try { await waitFor(() => { n++; return false }, {timeout: 600, interval: 250}) } \
      catch (e) { return [e.code, e.message, n] }",
        r#"completed ["wait_timeout","waitFor timed out after 600 ms: the condition was still falsy after 4 attempts",4]"#,
    ),
    (
        "await waitFor(() => true, {timeout: 30001})",
        "script RangeError: waitFor timeout must be an integer number of milliseconds from 0 to 30000; got 30001",
    ),
    (
        "await waitFor(async () => { throw new TypeError('inner') })",
        "script TypeError: inner",
    ),
    (
        "await waitFor(42)",
        "script TypeError: waitFor(condition, {timeout, interval}) needs a function as its condition",
    ),
    // Hostile: a program that replaces the globals waitFor reads changes
    // neither its 30 s cap nor its 250 ms least interval (issue 15 #8).
    (
        "Number.isInteger = () => true; Math.min = (a) => a; \
         await waitFor(() => true, {timeout: 1e9})",
        "script RangeError: waitFor timeout must be an integer number of milliseconds from 0 to 30000; got 1000000000",
    ),
    (
        "Math.max = () => 0; Math.round = () => 1; let n = 0; \
         try { await waitFor(() => { n++; return false }, {timeout: 600, interval: 1}) } \
         catch (e) { return [e.code, n] }",
        r#"completed ["wait_timeout",4]"#,
    ),
    (
        "String = () => 'planted'; Number.isFinite = () => true; \
         try { await waitFor(() => true, {interval: -5}) } catch (e) { return e.message }",
        r#"completed "waitFor interval must be a finite number of milliseconds; got -5""#,
    ),
    // Hostile (issue 15 #5): no thread can wake the guest, so it gets no
    // atomic waits (`waitAsync` once held a run open until its wall budget).
    (
        "return [typeof Atomics.wait, typeof Atomics.waitAsync, typeof Atomics.notify]",
        r#"completed ["undefined","undefined","function"]"#,
    ),
    (
        "const a = new Int32Array(new SharedArrayBuffer(16)); \
         try { Atomics.waitAsync(a, 0, 0, 100000); return 'waiting' } catch (e) { return e.name }",
        r#"completed "TypeError""#,
    ),
    (
        "return typeof setTimeout + typeof fetch + typeof require",
        r#"completed "undefinedundefinedundefined""#,
    ),
];

/// Checks one case; `syntax` alone matches any syntax error, whose wording is
/// Boa's, and `completed_len N` a completed run whose value is N bytes of JSON.
pub fn check(code: &str, expected: &str, report: &RunReport) -> Result<(), String> {
    let actual = summary(report);
    let matches = match expected.strip_prefix("completed_len ") {
        // A long value: compare its JSON length, not its text.
        Some(length) => matches!(&report.outcome, RunOutcome::Completed { value }
            if value.to_string().len().to_string() == length),
        None if expected == "syntax" => actual.starts_with("syntax "),
        None => actual == expected,
    };
    if matches {
        Ok(())
    } else {
        Err(format!(
            "program `{code}`\n  expected: {expected}\n  actual:   {actual}"
        ))
    }
}

/// The catalog the tool cases run against (scripted tools).
pub const TOOL_CATALOG: &str = r#"[
    {"name": "echo", "description": "Echoes its arguments"},
    {"name": "answer", "returns": {"answer": 42}},
    {"name": "slow", "returns": "late", "delay_ms": 30},
    {"name": "broken", "error": {"code": "no_session", "message": "No session.", "detail": {"hint": "launch"}}},
    {"name": "dup"}, {"name": "dup"},
    {"name": "get-sum"},
    {"name": "planted", "returns": {"$bytes": "%% not base64"}},
    {"name": "planted_shape", "returns": {"rows": [{"id": 1}, {"$bytes": 5}]}},
    {"name": "planted_detail", "error": {"code": "no_session", "message": "No session.", "detail": {"blob": {"$bytes": "%% not base64"}}}}
]"#;

/// Programs against [`TOOL_CATALOG`] and what they must report, calls included.
pub const TOOL_CASES: &[(&str, &str)] = &[
    // `tools.describe(name)`: the tool as TypeScript; not itself a tool.
    (
        "return [tools.describe('echo'), Object.keys(tools).includes('describe')]",
        r#"completed ["/** Echoes its arguments */\ndeclare function echo(args?: {\n  [key: string]: unknown;\n}): Promise<unknown>;",false]"#,
    ),
    (
        "try { tools.describe('nope') } catch (e) { return e.message.startsWith('tools.describe: this run has no tool `nope`; it has ') }",
        "completed true",
    ),
    (
        "return await tools.echo({text: 'hi', n: [1, 2]})",
        r#"completed {"text":"hi","n":[1,2]} [echo ok]"#,
    ),
    (
        "return await tools.answer()",
        r#"completed {"answer":42} [answer ok]"#,
    ),
    (
        "const [a, b] = await Promise.all([tools.slow(), tools.echo({x: 1})]); return [a, b]",
        r#"completed ["late",{"x":1}] [slow ok, echo ok]"#,
    ),
    (
        "await tools.broken({})",
        "tool no_session broken (call 1) failed: No session. [broken error]",
    ),
    (
        "try { await tools.broken() } catch (e) { return [e.code, e.message, e.detail] }",
        r#"completed ["no_session","No session.",{"hint":"launch"}] [broken error]"#,
    ),
    (
        "await tools.echo(); await tools.dup()",
        "tool tool_unavailable dup (call 2) failed: dup is unavailable in this run (duplicate_name) [echo ok, dup tool_unavailable]",
    ),
    (
        "tools.work()",
        "script TypeError: tools.work is not available in this codemode run. Available tools: answer, broken, dup, echo, planted, planted_detail, planted_shape, slow (8). Not every tool is available inside programs yet.",
    ),
    (
        "return [Object.keys(tools), 'echo' in tools, 'work' in tools, typeof tools.echo]",
        r#"completed [["answer","broken","dup","echo","planted","planted_detail","planted_shape","slow"],true,false,"function"]"#,
    ),
    (
        "return [tools.then, tools.toJSON, tools[Symbol.iterator], JSON.stringify(tools), (await tools) === tools]",
        r#"completed [null,null,null,"{}",true]"#,
    ),
    ("tools.echo = 1", "script TypeError: tools is read-only"),
    (
        "const a = {}; a.self = a; await tools.echo(a)",
        "script TypeError: tools.echo (call 1): its arguments are not JSON: TypeError: cyclic value: `value.self` refers back to `value`",
    ),
    // A value from outside the guest cannot receive fails that call,
    // catchably (the run goes on), and the next call works.
    (
        "let code; try { await tools.planted() } catch (e) { code = e.code } return [code, await tools.answer()]",
        r#"completed ["invalid_result",{"answer":42}] [planted error, answer ok]"#,
    ),
    (
        "await tools.planted()",
        "tool invalid_result planted (call 1) failed: its answer cannot reach the program: TypeError: `value` is a `$bytes` value that is not base64: Invalid symbol 37, offset 0. [planted error]",
    ),
    // Any malformed `$bytes` value, wherever it is in an answer or in a
    // refusal's detail, fails that call catchably as `invalid_result`: the
    // program catches it and goes on (issue 35 #10).
    (
        "try { await tools.planted_shape() } catch (e) { return [e.code, e.message, await tools.answer()] }",
        r#"completed ["invalid_result","its answer cannot reach the program: TypeError: `value.rows[1]` is a `$bytes` value that is not a base64 string but a number",{"answer":42}] [planted_shape error, answer ok]"#,
    ),
    (
        "let caught; try { await tools.planted_detail() } catch (e) { caught = [e.code, e.message, e.detail === undefined] } \
         return [caught, await tools.answer()]",
        r#"completed [["invalid_result","its refusal (no_session: No session.) has a detail that cannot reach the program: TypeError: `value.blob` is a `$bytes` value that is not base64: Invalid symbol 37, offset 0.",true],{"answer":42}] [planted_detail error, answer ok]"#,
    ),
    (
        "await tools.planted_detail()",
        "tool invalid_result planted_detail (call 1) failed: its refusal (no_session: No session.) has a detail that cannot reach the program: TypeError: `value.blob` is a `$bytes` value that is not base64: Invalid symbol 37, offset 0. [planted_detail error]",
    ),
    // The host reads values with the realm's own `Object.keys`, whatever the
    // program put in its place.
    (
        "Object.keys = () => ['planted']; return await tools.echo({a: 1})",
        r#"completed {"a":1} [echo ok]"#,
    ),
    // Calls made from a getter while a call's arguments are read get numbers
    // of their own (`native.rs` shows that they count against the budget).
    (
        "let depth = 0; const evil = {};\nObject.defineProperty(evil, 'x', {enumerable: true, get() { if (depth++ < 2) tools.echo(evil); return depth; }});\ntry { return await tools.echo(evil) } catch (e) { return e.message }",
        r#"completed {"x":3} [echo ok, echo ok, echo ok]"#,
    ),
    (
        "for (let i = 0; i < 300; i++) { try { await tools.echo({i}) } catch (e) {} }",
        "budget_exhausted budget_exhausted:tool_calls: the program made more than 200 tool calls",
    ),
    // Values across the boundary: bytes stay bytes both ways; Date, undefined
    // and non-finite numbers follow JSON.stringify.
    (
        "const b = new Uint8Array([1, 2, 3, 255]); const back = await tools.echo({b, sub: b.subarray(1, 3)}); return [back.b instanceof Uint8Array, Array.from(back.sub), back]",
        r#"completed [true,[2,3],{"b":{"$bytes":"AQID/w=="},"sub":{"$bytes":"AgM="}}] [echo ok]"#,
    ),
    (
        "return await tools.echo({d: new Date(0), n: NaN, u: undefined, i: -Infinity, a: [undefined, () => 1]})",
        r#"completed {"d":"1970-01-01T00:00:00.000Z","n":null,"i":null,"a":[null,null]} [echo ok]"#,
    ),
    // Hostile arguments: conversion runs in the guest, so a trap's throw is the
    // guest's own error, and nothing reaches the host.
    (
        "await tools.echo(new Proxy({}, {ownKeys() { throw new Error('trap') }}))",
        "script TypeError: tools.echo (call 1): its arguments are not JSON: Error: trap",
    ),
    (
        "await tools.echo({get x() { throw new RangeError('no getter for you') }})",
        "script TypeError: tools.echo (call 1): its arguments are not JSON: RangeError: no getter for you",
    ),
    (
        "return await tools.echo({then(resolve) { resolve('thenable') }, x: 1})",
        r#"completed {"x":1} [echo ok]"#,
    ),
    // Hostile depth (issue 15 #9): 64 levels cross both ways, 65 do not,
    // whatever the envelopes around them.
    (
        "let o = 1; for (let i = 0; i < 63; i++) o = [o]; const r = await tools.echo({o}); \
         let d = 0; let x = r.o; while (Array.isArray(x)) { d++; x = x[0] } return [d, x]",
        "completed [63,1] [echo ok]",
    ),
    (
        "let o = 1; for (let i = 0; i < 64; i++) o = [o]; await tools.echo({o})",
        "script TypeError: tools.echo (call 1): its arguments are not JSON: TypeError: `…][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0]` is nested more than 64 levels deep, deeper than Kiln carries a value",
    ),
    (
        "let o = {}; for (let i = 0; i < 1e5; i++) o = {o}; await tools.echo(o)",
        "script TypeError: tools.echo (call 1): its arguments are not JSON: TypeError: `…o.o.o.o.o.o.o.o.o.o.o.o.o.o.o.o.o.o.o.o.o.o.o.o.o.o.o.o.o.o.o` is nested more than 64 levels deep, deeper than Kiln carries a value",
    ),
    (
        "await tools.echo({toJSON() { throw new Error('no JSON') }})",
        "script TypeError: tools.echo (call 1): its arguments are not JSON: Error: no JSON",
    ),
];

/// The message a built-in's depth bound throws for `what`.
fn too_deep(what: &str) -> String {
    format!(
        r#"completed "RangeError: {what} nests deeper than {} levels; the sandbox stops there rather than overflow its stack""#,
        kiln_sandbox::MAX_NATIVE_DEPTH
    )
}

/// Programs whose values or source nest deep enough to overflow the engine's
/// stack, each ended before the stack is (issue 15 #12), and the ordinary uses
/// of the same built-ins, which must not change. A host runs them on the stack
/// it gives a sandbox (natively [`kiln_sandbox::NATIVE_STACK_BYTES`]).
pub fn deep_cases() -> Vec<(String, String)> {
    let deep_array = "let a = []; for (let i = 0; i < 1e5; i++) a = [a];";
    let caught = |body: &str| {
        format!(
            "{deep_array} try {{ {body}; return 'ran' }} catch (e) {{ return `${{e.name}}: ${{e.message}}` }}"
        )
    };
    let limit = kiln_sandbox::source_depth::MAX_SOURCE_DEPTH;
    let mut cases: Vec<(String, String)> = [
        ("String(a)", "an array joined into a string"),
        ("a.join(',')", "an array joined into a string"),
        ("`${a}`", "an array joined into a string"),
        ("a + ''", "an array joined into a string"),
        ("a.toLocaleString()", "an array turned into a string"),
        ("a.flat(Infinity)", "an array flattened with flat()"),
        ("JSON.stringify(a)", "a value given to JSON.stringify"),
        ("JSON.stringify(a, null, 2)", "a value given to JSON.stringify"),
        ("JSON.stringify(a, (k, v) => v)", "a value given to JSON.stringify"),
        ("JSON.stringify(a, ['x'])", "a value given to JSON.stringify"),
        (
            "let p = {}; for (let i = 0; i < 1e5; i++) p = new Proxy(p, {}); p.x",
            "a chain of proxies",
        ),
        (
            "let p = {}; for (let i = 0; i < 1e5; i++) p = Proxy.revocable(p, {}).proxy",
            "a chain of proxies",
        ),
        (
            "let f = () => 1; for (let i = 0; i < 1e5; i++) f = f.bind(null); f()",
            "a chain of bound functions",
        ),
        // Proxies and bound functions chain through each other: one count.
        (
            "let f = () => 1; for (let i = 0; i < 1e5; i++) f = i % 2 ? f.bind(null) : new Proxy(f, {}); f()",
            "a chain of proxies",
        ),
        // The program cannot reach what the bounds use.
        (
            "Object.defineProperty(Object.prototype, '0', {set() {}}); \
             Object.defineProperty(Array.prototype, '0', {set() {}}); JSON.stringify(a)",
            "a value given to JSON.stringify",
        ),
        (
            "WeakMap.prototype.get = () => 0; WeakMap.prototype.set = () => 0; \
             Function.prototype.call = () => 0; Reflect.apply = () => 0; \
             let p = {}; for (let i = 0; i < 1e5; i++) p = new Proxy(p, {}); p.x",
            "a chain of proxies",
        ),
        (
            "Function.prototype.call = () => 'x'; Array.prototype.some = () => false; a.flat(Infinity)",
            "an array flattened with flat()",
        ),
        // A proxy whose handler is a chain is as deep as the chain.
        (
            "let h = {}; for (let i = 0; i < 1e5; i++) h = new Proxy({}, h); new Proxy({}, h).x",
            "a chain of proxies",
        ),
    ]
    .iter()
    .map(|(body, what)| (caught(body), too_deep(what)))
    .collect();
    let ordinary: [(&str, &str); 16] = [
        ("return String([1, [2, [3]]])", r#"completed "1,2,3""#),
        ("return [[1, 2], [3]].join('|')", r#"completed "1,2|3""#),
        (
            "return [1, [2, [3, [4]]]].flat(Infinity)",
            "completed [1,2,3,4]",
        ),
        ("return [1, [2, [3]]].flat()", r#"completed [1,2,[3]]"#),
        ("return [[1], [[2]]].flat(0).length", "completed 2"),
        (
            "return JSON.stringify({b: 1, a: {c: 2, d: 3}}, ['a', 'c'])",
            r#"completed "{\"a\":{\"c\":2}}""#,
        ),
        (
            "return JSON.stringify({n: 2, m: [3]}, (k, v) => typeof v === 'number' ? v * 10 : v)",
            r#"completed "{\"n\":20,\"m\":[30]}""#,
        ),
        (
            "return JSON.stringify({a: [1]}, null, 1)",
            r#"completed "{\n \"a\": [\n  1\n ]\n}""#,
        ),
        (
            "const p = new Proxy({x: 1}, {get: (t, k) => k === 'y' ? 5 : t[k]}); return [p.x, p.y, Proxy.name, Proxy.length]",
            r#"completed [1,5,"Proxy",2]"#,
        ),
        (
            "const {proxy, revoke} = Proxy.revocable({}, {}); revoke(); try { proxy.x } catch (e) { return e.name }",
            r#"completed "TypeError""#,
        ),
        (
            "try { Proxy({}, {}) } catch (e) { try { new Proxy(1, {}) } catch (f) { return [e.name, f.name] } }",
            r#"completed ["TypeError","TypeError"]"#,
        ),
        (
            "function add(a, b) { return a + b } const inc = add.bind(null, 1); return [inc(2), inc.name, inc.length]",
            r#"completed [3,"bound add",1]"#,
        ),
        // The bounded built-ins look like the engine's own.
        (
            "return [[].join.name, [].join.length, [].flat.length, JSON.stringify.length, \
             Function.prototype.bind.length, Proxy.revocable.name, 'prototype' in Proxy, \
             Object.getOwnPropertyDescriptor(Array.prototype, 'join').enumerable]",
            r#"completed ["join",1,0,3,1,"revocable",false,false]"#,
        ),
        (
            "try { new [].join() } catch (e) { try { new JSON.stringify() } catch (f) { return [e.name, f.name] } }",
            r#"completed ["TypeError","TypeError"]"#,
        ),
        (
            "return JSON.stringify({a: 1, b: [2]}, function (k, v) { return k === 'a' ? this.a + v : v })",
            r#"completed "{\"a\":2,\"b\":[2]}""#,
        ),
        // (The engine's separator is ", "; a browser's is ",".)
        (
            "return [1, [2, 3]].toLocaleString().replaceAll(' ', '')",
            r#"completed "1,2,3""#,
        ),
    ];
    cases.extend(
        ordinary
            .iter()
            .map(|(code, expected)| ((*code).to_owned(), (*expected).to_owned())),
    );
    // Source that nests past the bound is refused before the parser recurses;
    // at the bound it runs.
    let nested = |depth: usize| format!("return {}1{}", "(".repeat(depth), ")".repeat(depth));
    let refused = format!(
        "syntax SyntaxError: the program nests deeper than {limit} levels (brackets, template \
         substitutions or prefix operators) at line 1, column {}; the parser stops there rather \
         than overflow its stack",
        8 + limit
    );
    cases.push((nested(limit), "completed 1".to_owned()));
    cases.push((nested(limit + 1), refused));
    for deep in [
        format!("return {}{}", "[".repeat(50_000), "]".repeat(50_000)),
        format!("return {}1", "!".repeat(50_000)),
        format!("return {}", "`${".repeat(50_000)),
        format!("return {}1{}", "{a: ".repeat(50_000), "}".repeat(50_000)),
    ] {
        cases.push((deep, "syntax".to_owned()));
    }
    cases
}

/// A program that reports progress too soon, out of range, too long, in a
/// loop, and wrongly; [`check_progress`] reads what reached the host.
pub const PROGRESS_PROGRAM: &str = r"
const start = Date.now();
progress(-5, 'starting');
progress(50, 'too soon');
while (Date.now() - start < 120) {}
progress(250, 'x'.repeat(600));
let calls = 0;
while (Date.now() - start < 450) { progress(42); calls++ }
let error;
try { progress('half') } catch (e) { error = `${e.name}: ${e.message}` }
return [calls > 10, error]
";

/// What [`PROGRESS_PROGRAM`]'s run and its reports must be.
pub fn check_progress(report: &RunReport, reported: &[kiln_types::Progress]) -> Result<(), String> {
    let expected = r#"completed [true,"TypeError: progress(percent, message) takes a number from 0 to 100 as `percent`; got the string \"half\""]"#;
    let summary = summary(report);
    if summary != expected {
        return Err(format!("the run: {summary}"));
    }
    let shown: Vec<(f64, Option<usize>)> = reported
        .iter()
        .map(|progress| {
            (
                progress.percent,
                progress.message.as_ref().map(|text| text.chars().count()),
            )
        })
        .collect();
    let (first, rest) = reported.split_first().ok_or("no report reached the host")?;
    let ok = first.percent == 0.0
        && first.message.as_deref() == Some("starting")
        && rest.first().is_some_and(|cut| cut.percent == 100.0 && cut.message.as_deref() == Some("x".repeat(500).as_str()))
        // One at most every 100 ms: from 120 ms to 450 ms, three at most.
        && (2..=4).contains(&rest.len())
        && rest[1..].iter().all(|later| later.percent == 42.0 && later.message.is_none());
    if ok {
        Ok(())
    } else {
        Err(format!("the reports (percent, message length): {shown:?}"))
    }
}
