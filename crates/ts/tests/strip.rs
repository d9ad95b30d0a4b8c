//! `kiln_ts::strip` as a table: each kind of TypeScript annotation with
//! its exact JavaScript, each output checked to keep every character at its
//! line and column; plain JavaScript left alone (`Ok(None)`); each refusal
//! naming what and where; and no panic on any hostile program of
//! `shared/testdata/escape-corpus` or on any truncation of the TypeScript
//! cases.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers: a panic here is a failed test with its line"
)]

use std::path::{Path, PathBuf};

use kiln_ts::{MAX_SOURCE_CHARS, StripError, Unsupported, javascript_of, strip};

/// (kind, TypeScript, the JavaScript `strip` answers).
const STRIPPED: &[(&str, &str, &str)] = &[
    (
        "parameter and return types",
        "function add(a: number, b: number): number {\n  return a + b;\n}\nreturn add(1, 2);",
        "function add(a        , b        )         {\n  return a + b;\n}\nreturn add(1, 2);",
    ),
    (
        "interface",
        "interface Point { x: number; y: number }\nconst p: Point = { x: 1, y: 2 };\nreturn p.x;",
        ";                                       \nconst p        = { x: 1, y: 2 };\nreturn p.x;",
    ),
    (
        "type alias",
        "type Row = { name: string; total: number };\nconst rows: Row[] = [];\nreturn rows;",
        ";                                          \nconst rows        = [];\nreturn rows;",
    ),
    (
        "as",
        "const data = JSON.parse(text) as { items: string[] };\nreturn data.items;",
        "const data = JSON.parse(text)                       ;\nreturn data.items;",
    ),
    (
        "as const",
        "const modes = [\"a\", \"b\"] as const;\nreturn modes;",
        "const modes = [\"a\", \"b\"]         ;\nreturn modes;",
    ),
    (
        "satisfies",
        "const limits = { max: 3 } satisfies Record<string, number>;\nreturn limits.max;",
        "const limits = { max: 3 }                                 ;\nreturn limits.max;",
    ),
    (
        "generic function",
        "function first<T>(items: T[]): T | undefined {\n  return items[0];\n}\nreturn first([1]);",
        "function first   (items     )                {\n  return items[0];\n}\nreturn first([1]);",
    ),
    (
        "generic call",
        "const n = first<number>([1, 2]);\nconst m = new Map<string, number[]>();\nreturn n;",
        "const n = first        ([1, 2]);\nconst m = new Map                  ();\nreturn n;",
    ),
    (
        "non-null",
        "const el = list.find((x) => x > 1)!;\nreturn el!.toString();",
        "const el = list.find((x) => x > 1) ;\nreturn el .toString();",
    ),
    (
        "optional",
        "function greet(name?: string) {\n  return `hi ${name ?? \"you\"}`;\n}\nreturn greet();",
        "function greet(name         ) {\n  return `hi ${name ?? \"you\"}`;\n}\nreturn greet();",
    ),
    (
        "declare",
        "declare const input: { url: string };\ndeclare function log(x: unknown): void;\nreturn 1;",
        ";                                    \n                                       \nreturn 1;",
    ),
    (
        "import type",
        "import { parse } from \"kiln:csv\";\nimport type { Options } from \"kiln:csv\";\nconst rows = parse(text);\nreturn rows;",
        "import { parse } from \"kiln:csv\";\n                                        \nconst rows = parse(text);\nreturn rows;",
    ),
    (
        "type specifier",
        "import { parse, type Row } from \"kiln:csv\";\nconst rows: Row[] = parse(text);\nreturn rows.length;",
        "import { parse,          } from \"kiln:csv\";\nconst rows        = parse(text);\nreturn rows.length;",
    ),
    (
        "type-only exports",
        "export interface Result { ok: boolean }\nexport type Id = string;\nexport type { Result as R };\nreturn { ok: true };",
        "       ;                               \n                        \n;                           \nreturn { ok: true };",
    ),
    (
        "class fields and implements",
        "class Counter implements Tally {\n  private count: number = 0;\n  readonly step = 1;\n  add(by?: number): this {\n    this.count += by ?? this.step;\n    return this;\n  }\n}\nreturn new Counter().add(2);",
        "class Counter                  {\n          count         = 0;\n           step = 1;\n  add(by         )       {\n    this.count += by ?? this.step;\n    return this;\n  }\n}\nreturn new Counter().add(2);",
    ),
    (
        "abstract",
        "abstract class Shape {\n  abstract area(): number;\n  describe() { return `area ${this.area()}`; }\n}\nclass Square extends Shape { area() { return 4; } }\nreturn new Square().describe();",
        "         class Shape {\n                          \n  describe() { return `area ${this.area()}`; }\n}\nclass Square extends Shape { area() { return 4; } }\nreturn new Square().describe();",
    ),
    (
        "arrow functions",
        "const double = (n: number): number => n * 2;\nconst pick = <K extends string>(k: K) => k;\nreturn [1, 2].map((x: number) => double(x));",
        "const double = (n        )         => n * 2;\nconst pick =                   (k   ) => k;\nreturn [1, 2].map((x        ) => double(x));",
    ),
    (
        "type error",
        "const n: number = \"a\";\nreturn n;",
        "const n         = \"a\";\nreturn n;",
    ),
    (
        "definite and this",
        "let total!: number;\nfunction f(this: Window, a = 1) { return a; }\ntotal = f.call(globalThis);\nreturn total;",
        "let total         ;\nfunction f(              a = 1) { return a; }\ntotal = f.call(globalThis);\nreturn total;",
    ),
    (
        "await and return",
        "const res = await tools.fetch<{ body: string }>({ url });\nif (!res) return null as unknown as string;\nreturn res.body;",
        "const res = await tools.fetch                  ({ url });\nif (!res) return null                     ;\nreturn res.body;",
    ),
    (
        "asi guard",
        "let a = 1\ntype T = number\n(a as T).toFixed(2)",
        "let a = 1\n;              \n(a     ).toFixed(2)",
    ),
    (
        "multi-line arrow return",
        "const f = (a: number)\n  : number =>\n  a + 1;\nreturn f(1);",
        "const f = (a         \n         ) =>\n  a + 1;\nreturn f(1);",
    ),
    (
        "astral in a type",
        "const mood: \"😀\" | \"é\" = \"😀\"; return mood;",
        "const mood            = \"😀\"; return mood;",
    ),
    (
        "overloads",
        "function len(x: string): number;\nfunction len(x: unknown[]): number;\nfunction len(x: any) { return x.length; }\nreturn len(\"ab\");",
        ";                               \n                                   \nfunction len(x     ) { return x.length; }\nreturn len(\"ab\");",
    ),
    (
        "index signature and namespace of types",
        "namespace Shapes { export type Kind = \"a\" }\nconst byName: { [name: string]: number } = {};\nreturn byName;",
        ";                                          \nconst byName                             = {};\nreturn byName;",
    ),
];

/// The lines of `text`, each as its characters.
fn lines(text: &str) -> Vec<Vec<char>> {
    text.split('\n')
        .map(|line| line.chars().collect())
        .collect()
}

/// Every character of `output` at the line and column of `input`'s: the
/// same character, white space where a type was, or one of the characters
/// swc puts in a type's place to keep the JavaScript around it parsing
/// (`;` for a removed statement, `(` and `)` for a moved parenthesis).
fn assert_in_place(kind: &str, input: &str, output: &str) {
    let (input_lines, output_lines) = (lines(input), lines(output));
    assert_eq!(
        input_lines.len(),
        output_lines.len(),
        "{kind}: the lines moved"
    );
    for (number, (was, now)) in input_lines.iter().zip(&output_lines).enumerate() {
        assert_eq!(
            was.len(),
            now.len(),
            "{kind}: line {} changed length",
            number + 1
        );
        for (column, (a, b)) in was.iter().zip(now).enumerate() {
            assert!(
                a == b || (!a.is_whitespace() && (b.is_whitespace() || ";()".contains(*b))),
                "{kind}: line {}, column {}: {a:?} became {b:?}",
                number + 1,
                column + 1
            );
        }
    }
}

#[test]
fn each_kind_of_annotation_strips_to_its_javascript_in_place() {
    for (kind, typescript, javascript) in STRIPPED {
        assert_eq!(
            strip(typescript),
            Ok(Some((*javascript).to_owned())),
            "{kind}"
        );
        assert_in_place(kind, typescript, javascript);
    }
}

#[test]
fn plain_javascript_is_left_alone() {
    for javascript in [
        "",
        "return 1;",
        "let a = 1;\nreturn a;",
        "import { parse } from \"kiln:csv\";\nimport * as html from \"kiln:html\";\nreturn parse(await tools.read({ path: \"a.csv\" }));",
        "const r = /a<b>c/g; const s = `x ${1 < 2} y`; return a < b && c > d;",
        "for (let i = 0; i < 3; i++) { if (i % 2) continue; }\nreturn new.target;",
        "// a comment: string\n/* type T = 1 */\nreturn typeof x === \"number\" ? x : null;",
        // JavaScript that TypeScript's grammar refuses.
        "with (Math) { return max(1, 2); }",
        "label: for (;;) break label;\nreturn void 0;",
        "const o = { async *gen() { yield 1; }, get a() { return 1; } };\nreturn o;",
    ] {
        assert_eq!(strip(javascript), Ok(None), "{javascript}");
    }
}

#[test]
fn typescript_that_makes_code_is_refused_by_name_where_it_is() {
    let refused = |source: &str| match strip(source) {
        Err(StripError::Unsupported {
            feature,
            line,
            column,
        }) => (feature, line, column),
        other => panic!("{source}: {other:?}"),
    };
    assert_eq!(
        refused("enum Color { Red, Green }"),
        (Unsupported::Enum, 1, 1)
    );
    assert_eq!(
        refused("const a = 1;\n  namespace N { export const x = 1 }"),
        (Unsupported::Namespace, 2, 3)
    );
    assert_eq!(
        refused("class P {\n  constructor(private x: number) {}\n}"),
        (Unsupported::ParameterProperty, 2, 23)
    );
    assert_eq!(
        refused("import { parse } from \"kiln:csv\"; const n = <number>x;"),
        (Unsupported::AngleBracketAssertion, 1, 45)
    );
    assert_eq!(
        refused("import fs = require(\"fs\");"),
        (Unsupported::ImportEquals, 1, 1)
    );
    let error = strip("enum E { A }").unwrap_err();
    assert_eq!(
        error.with_hint().to_string(),
        "TypeScript's `enum` at line 1, column 1 cannot be stripped: it makes JavaScript of its own\n\
         hint: write plain JavaScript instead: an object of constants, `const Color = { Red: \"Red\", Green: \"Green\" };`"
    );
}

#[test]
fn syntax_that_is_neither_typescript_nor_javascript_is_named_where_it_is() {
    assert_eq!(
        strip("const a = 1;\nlet b: = 2;"),
        Err(StripError::Syntax {
            message: "Unexpected token `=`. Expected an identifier, void, yield, null, await, break, a string literal, a numeric literal, true, false, `, -, import, this, typeof, {, [, (".to_owned(),
            line: 2,
            column: 8,
        })
    );
    // On the first line, past the wrapper the body is parsed in.
    let Err(StripError::Syntax { line, column, .. }) = strip("let x: number = ;") else {
        panic!("not a syntax error");
    };
    assert_eq!((line, column), (1, 17));
    // Past the end: where the program ends.
    let Err(StripError::Syntax { line, column, .. }) = strip("let x: number = (1\n") else {
        panic!("not a syntax error");
    };
    assert_eq!((line, column), (2, 1));
    // An export of a value: a program exports nothing.
    assert!(matches!(
        strip("export const a: number = 1;"),
        Err(StripError::Syntax {
            line: 1,
            column: 1,
            ..
        })
    ));
}

#[test]
fn a_typescript_programs_syntax_error_is_named_where_it_is_not_at_its_first_annotation() {
    // JavaScript's parser stops at the annotation on line 1; the mistake is on line 3.
    let error = javascript_of("const a: number = 1;\nconst b = a + 1;\nconst c = ;\nreturn c;")
        .expect_err("a syntax error past the annotation");
    assert!(error.starts_with("SyntaxError: "), "{error}");
    assert!(error.ends_with("at line 3, column 11"), "{error}");
    // Past a generic function and an interface.
    let error = javascript_of(
        "interface Row { a: number }\nfunction first<T>(items: T[]): T { return items[0]; }\nreturn first<Row>([{ a: 1 }]).a +;",
    )
    .expect_err("a syntax error past the generics");
    assert!(error.contains("at line 3, column "), "{error}");
    // A JavaScript program's syntax error stays the engine's to report.
    assert_eq!(javascript_of("const a = 1;\nconst = 2;"), Ok(None));
    // As does one that comes before any TypeScript.
    assert_eq!(javascript_of("const = 2;\nlet a: number = 1;"), Ok(None));
}

#[test]
fn a_source_too_long_or_too_deep_is_refused_by_name() {
    let long = "x".repeat(MAX_SOURCE_CHARS + 1);
    assert_eq!(
        strip(&long),
        Err(StripError::TooLong {
            chars: MAX_SOURCE_CHARS + 1
        })
    );
    let deep = format!("let a: {}number{} = 1;", "A<".repeat(129), ">".repeat(129));
    assert!(
        matches!(&strip(&deep), Err(StripError::TooDeep { message }) if message.contains("type arguments")),
        "{:?}",
        strip(&deep)
    );
    let parens = format!("let a: number = {}1{};", "(".repeat(200), ")".repeat(200));
    assert!(matches!(strip(&parens), Err(StripError::TooDeep { .. })));
}

#[test]
fn nesting_at_the_bound_strips_within_a_test_thread() {
    let source = format!(
        "let a: {}number{} = {}1{};",
        "A<".repeat(120),
        ">".repeat(120),
        "(".repeat(120),
        ")".repeat(120)
    );
    let stripped = std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(move || strip(&source).map(|stripped| stripped.is_some()))
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(stripped, Ok(true));
}

fn corpus() -> Vec<PathBuf> {
    // The workspace sits beside `shared/` (as in CI): crates/ts -> ../../../shared.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/testdata/escape-corpus");
    assert!(
        dir.is_dir(),
        "the escape corpus is missing at {}",
        dir.display()
    );
    let mut found = Vec::new();
    let mut stack = vec![dir];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|extension| extension == "js") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// `strip` on `source` answers without panicking and without a fault of
/// its own.
fn assert_answers(name: &str, source: &str) {
    let answer = std::panic::catch_unwind(|| strip(source));
    match answer {
        Ok(Err(StripError::Internal { message })) => panic!("{name}: a fault: {message}"),
        Ok(Ok(Some(stripped))) => assert_in_place(name, source, &stripped),
        Ok(_) => {}
        Err(_) => panic!("{name}: panicked"),
    }
}

#[test]
fn no_hostile_program_or_truncation_makes_it_panic() {
    let programs = corpus();
    assert!(programs.len() > 200, "{} programs", programs.len());
    // A fixed linear congruential sequence: the same cuts every run.
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move |bound: usize| {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        usize::try_from(seed >> 33).unwrap() % bound.max(1)
    };
    let run = move || {
        for path in &programs {
            let source = std::fs::read_to_string(path).unwrap();
            let name = path.display().to_string();
            assert_answers(&name, &source);
            for _ in 0..8 {
                let cut = source.floor_char_boundary(next(source.len() + 1));
                assert_answers(&format!("{name} cut at {cut}"), &source[..cut]);
            }
        }
        for (kind, typescript, _) in STRIPPED {
            for (cut, _) in typescript.char_indices() {
                assert_answers(&format!("{kind} cut at {cut}"), &typescript[..cut]);
            }
        }
    };
    // The bound on nesting is sized for the workers' stacks in release;
    // a debug build's frames are larger.
    std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(run)
        .unwrap()
        .join()
        .unwrap();
}
