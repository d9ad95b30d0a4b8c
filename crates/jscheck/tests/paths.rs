//! The return-path analysis as a table: the eight shapes people ask a code
//! node for pass, ordinary conditionals pass, and a path that omits an
//! output fails naming it.

use kiln_jscheck::{output_paths, parse_body};

/// The issues of `code` against `outputs`, as their sentences.
fn issues(code: &str, outputs: &[&str]) -> Vec<String> {
    let body = parse_body(code).unwrap_or_else(|error| panic!("{code:?} does not parse: {error}"));
    output_paths(&body, outputs)
        .into_iter()
        .map(|issue| issue.message)
        .collect()
}

#[test]
fn the_eight_shapes_pass() {
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "reshape",
            "return { rows: items.map(({ id, name }) => ({ id, label: name.toUpperCase() })) };",
            &["rows"],
        ),
        (
            "merge/join",
            "const byId = new Map(users.map(u => [u.id, u]));\n\
             const joined = orders.map(o => ({ ...o, user: byId.get(o.userId) ?? null }));\n\
             return { joined, unmatched: joined.filter(o => o.user === null).length };",
            &["joined", "unmatched"],
        ),
        (
            "compute/derive",
            "let total = 0;\nfor (const line of lines) { total += line.price * line.qty; }\n\
             return { total, average: lines.length ? total / lines.length : 0 };",
            &["total", "average"],
        ),
        (
            "extract/parse",
            "const [header, ...rest] = csv.trim().split('\\n');\nconst names = header.split(',');\n\
             const records = rest.map(line => Object.fromEntries(line.split(',').map((v, i) => [names[i], v])));\n\
             return { records };",
            &["records"],
        ),
        (
            "split",
            "const evens = [], odds = [];\nfor (const n of numbers) (n % 2 ? odds : evens).push(n);\n\
             return { evens, odds };",
            &["evens", "odds"],
        ),
        (
            "format/render",
            "const html = `<ul>${items.map(i => `<li>${i}</li>`).join('')}</ul>`;\nreturn { html, count: items.length };",
            &["html", "count"],
        ),
        (
            "validate",
            "const errors = [];\nif (!email.includes('@')) errors.push('email has no @');\n\
             if (age < 0) errors.push('age is negative');\nreturn { valid: errors.length === 0, errors };",
            &["valid", "errors"],
        ),
        (
            "seed",
            "return { users: Array.from({ length: 3 }, (_, i) => ({ id: i + 1, name: `user ${i + 1}` })) };",
            &["users"],
        ),
    ];
    for (shape, code, outputs) in cases {
        assert_eq!(issues(code, outputs), Vec::<String>::new(), "{shape}");
    }
}

#[test]
fn conditionals_that_give_every_output_pass() {
    let cases: &[(&str, &str)] = &[
        (
            "ternary",
            "return n > 0 ? { sign: 'positive', size: n } : { sign: 'not positive', size: -n };",
        ),
        (
            "if/else",
            "if (n > 0) { return { sign: 'positive', size: n }; } else { return { sign: 'other', size: -n }; }",
        ),
        (
            "early return",
            "if (!items.length) return { sign: 'empty', size: 0 };\nreturn { sign: 'some', size: items.length };",
        ),
        (
            "switch with default",
            "switch (kind) {\n case 'a': return { sign: 'a', size: 1 };\n case 'b': { return { sign: 'b', size: 2 }; }\n default: return { sign: '?', size: 0 };\n}",
        ),
        (
            "partition into always-given outputs",
            "const sign = n > 0 ? 'positive' : 'other';\nconst size = Math.abs(n);\nreturn { sign, size };",
        ),
        (
            "a variable the AST cannot see into",
            "const out = { sign: 'x', size: 1 };\nreturn out;",
        ),
        (
            "a spread",
            "const base = { sign: 'x' };\nreturn { ...base, size: 1 };",
        ),
        (
            "await",
            "const size = await tools.count({});\nreturn await { sign: 'x', size };",
        ),
        ("finish", "finish({ sign: 'x', size: 1 });"),
        (
            "try with a catch that also returns",
            "try { return { sign: 'ok', size: JSON.parse(text).length }; } catch (e) { return { sign: 'bad', size: 0 }; }",
        ),
        (
            "throw on the other path",
            "if (n < 0) throw new Error('negative');\nreturn { sign: 'ok', size: n };",
        ),
        (
            "a nested function's return is not the body's",
            "const pick = x => { return x; };\nfunction twice(y) { return [y, y]; }\nreturn { sign: pick('s'), size: twice(1).length };",
        ),
        (
            "shorthand methods and quoted keys",
            "return { 'sign': 'x', size() { return 1; } };",
        ),
    ];
    for (name, code) in cases {
        assert_eq!(
            issues(code, &["sign", "size"]),
            Vec::<String>::new(),
            "{name}"
        );
    }
}

#[test]
fn a_path_that_omits_an_output_fails_naming_it() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "a branch",
            "if (n > 0) {\n  return { sign: 'positive', size: n };\n}\nreturn { sign: 'other' };",
            "the `return` at line 4 gives no `size`",
        ),
        (
            "one side of a ternary",
            "return n > 0\n  ? { sign: 'p', size: n }\n  : { size: 0 };",
            "the `return` at line 3 gives no `sign`",
        ),
        (
            "a switch case",
            "switch (k) {\n case 1: return { sign: 'a', size: 1 };\n default: return {};\n}",
            "the `return` at line 3 gives no `sign`, `size`",
        ),
        (
            "an if with no else falls off the end",
            "if (n > 0) return { sign: 'p', size: n };",
            "the body can reach its end without a `return`, which gives no outputs",
        ),
        (
            "a switch with no default",
            "switch (k) { case 1: return { sign: 'a', size: 1 }; }",
            "the body can reach its end without a `return`, which gives no outputs",
        ),
        (
            "a switch whose case breaks",
            "switch (k) { case 1: break; default: return { sign: 'a', size: 1 }; }",
            "the body can reach its end without a `return`, which gives no outputs",
        ),
        (
            "a loop's return only",
            "for (const x of xs) { return { sign: 'a', size: x }; }",
            "the body can reach its end without a `return`, which gives no outputs",
        ),
        (
            "a bare return",
            "if (n) return;\nreturn { sign: 'a', size: 1 };",
            "a bare `return` gives no outputs",
        ),
        (
            "a string",
            "return 'done';",
            "the `return` at line 1 gives a string, not an object of outputs",
        ),
        (
            "an array",
            "return [sign, size];",
            "the `return` at line 1 gives an array, not an object of outputs",
        ),
        (
            "null",
            "return null;",
            "the `return` at line 1 gives `null`, not an object of outputs",
        ),
        (
            "undefined",
            "return undefined;",
            "the `return` at line 1 gives `undefined`, not an object of outputs",
        ),
        (
            "finish with a number",
            "finish(3);",
            "the `finish(…)` at line 1 gives a number, not an object of outputs",
        ),
        (
            "an object inside a label",
            "outer: { return { sign: 'x' }; }",
            "the `return` at line 1 gives no `size`",
        ),
    ];
    for (name, code, expected) in cases {
        let found = issues(code, &["sign", "size"]);
        assert!(
            found.iter().any(|message| message == expected),
            "{name}: expected {expected:?} among {found:?}"
        );
    }
}

#[test]
fn a_syntax_error_or_a_deep_body_is_refused_before_any_walk() {
    let error = parse_body("return { a: 1 ").err().expect("unclosed brace");
    assert!(error.contains("line 1"), "{error}");
    let deep = format!("return {}1{};", "[".repeat(200), "]".repeat(200));
    let error = parse_body(&deep).err().expect("too deep");
    assert!(error.contains("128"), "{error}");
    // The body parses as an async function's: `await` and `return` at the top.
    assert!(parse_body("const x = await tools.a({});\nreturn { x };").is_ok());
}

#[test]
fn the_deepest_body_allowed_parses_on_the_stacks_callers_give() {
    // Optimized, the runtime worker's 8 MiB wasm stack (its build.rs);
    // a debug build's frames are several times larger, and the CLI checks
    // on a thread of `kiln_sandbox::NATIVE_STACK_BYTES` (64 MiB). The
    // deepest nesting the depth check lets through, of the kinds the
    // parser recurses most on.
    let stack = if cfg!(debug_assertions) {
        64 << 20
    } else {
        8 << 20
    };
    let depth = kiln_jscheck::source_depth::MAX_SOURCE_DEPTH;
    let bodies = [
        format!(
            "return {{ x: {}1{} }};",
            "[".repeat(depth - 2),
            "]".repeat(depth - 2)
        ),
        format!(
            "return {{ x: {}1{} }};",
            "(".repeat(depth - 2),
            ")".repeat(depth - 2)
        ),
        format!(
            "{}return {{ x: 1 }};{}",
            "{".repeat(depth - 1),
            "}".repeat(depth - 1)
        ),
        format!(
            "return {{ x: {}1{} }};",
            "f(".repeat(depth - 2),
            ")".repeat(depth - 2)
        ),
    ];
    for body in bodies {
        let parsed = std::thread::Builder::new()
            .stack_size(stack)
            .spawn(move || parse_body(&body).map(|_| ()))
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(parsed, Ok(()));
    }
}

#[test]
fn a_stray_closing_brace_is_refused_naming_where_it_is() {
    // The parse once stopped at the first `}` that closed nothing: what came
    // after it was never read, so its return paths were never checked.
    let cases: &[(&str, &str)] = &[
        ("return 1; } evil()", "line 1, column 11"),
        (
            "return { sign: 'x', size: 1 };\n}\nawait tools.delete_everything({});",
            "line 2, column 1",
        ),
        (
            "return { sign: 'x', size: 1 }; })(); (async () => { return 'hidden';",
            "line 1, column 32",
        ),
        (
            "if (n) { return { sign: 'x', size: 1 }; } }",
            "line 1, column 43",
        ),
        ("}", "line 1, column 1"),
        (
            "return { sign: 'x', size: 1 };\n  }  // trailing",
            "line 2, column 3",
        ),
    ];
    for (code, position) in cases {
        let error = parse_body(code)
            .err()
            .unwrap_or_else(|| panic!("{code:?} was accepted"));
        assert!(
            error.contains("`}`") && error.contains(position),
            "{code:?}: {error}"
        );
    }
    // Braces that close what they open, in strings, templates, regular
    // expressions and comments, and a last line that is a comment, still pass.
    for code in [
        "const s = '}'; const t = `}${'}'}`; const r = /}/; /* } */\nreturn { sign: s, size: 1 }; // }",
        "if (n) { return { sign: 'a', size: 1 }; }\nreturn { sign: 'b', size: 2 };\n",
        "return { sign: 'x', size: 1 };\r\n// the end",
        "",
    ] {
        assert!(
            parse_body(code).is_ok(),
            "{code:?}: {:?}",
            parse_body(code).err()
        );
    }
}
