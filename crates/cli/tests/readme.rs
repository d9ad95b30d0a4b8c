//! The README's examples run where it says they run. A fenced block whose
//! info string is `js program` is a guest program the README shows; `kiln
//! run` runs it (over the `tools=CATALOG` the info string gives, as `--tools`
//! would serve it), and it must complete. The blocks are read from the
//! README itself, so the docs cannot drift from the code again.

mod common;

use common::kiln_with;

/// One `js program` block: where it starts, its catalog, its code.
#[derive(Debug)]
struct Example {
    line: usize,
    tools: Option<String>,
    code: String,
}

/// The `js program` blocks of a Markdown text, or what is wrong with one.
fn examples(markdown: &str) -> Result<Vec<Example>, String> {
    let mut found = Vec::new();
    let mut lines = markdown.lines().enumerate();
    while let Some((index, line)) = lines.next() {
        let Some(info) = line.trim_start().strip_prefix("```") else {
            continue;
        };
        let mut words = info.split_whitespace();
        let (Some("js"), Some("program")) = (words.next(), words.next()) else {
            // Skip to the block's end, so its body is never read as a fence.
            for (_, inner) in lines.by_ref() {
                if inner.trim_start().starts_with("```") {
                    break;
                }
            }
            continue;
        };
        let mut tools = None;
        for word in words {
            match word.strip_prefix("tools=") {
                Some(catalog) => tools = Some(catalog.to_owned()),
                None => {
                    return Err(format!(
                        "README.md line {}: `{word}` is not `tools=CATALOG`",
                        index + 1
                    ));
                }
            }
        }
        let mut code = Vec::new();
        let mut closed = false;
        for (_, inner) in lines.by_ref() {
            if inner.trim_start().starts_with("```") {
                closed = true;
                break;
            }
            code.push(inner);
        }
        if !closed {
            return Err(format!(
                "README.md line {}: the block is not closed",
                index + 1
            ));
        }
        found.push(Example {
            line: index + 1,
            tools,
            code: code.join("\n"),
        });
    }
    Ok(found)
}

#[test]
fn blocks_are_read_with_their_catalogs_and_other_blocks_are_passed_over() {
    let text = "```sh\necho hi\n```\n\n```js program tools=[{\"name\":\"add\"}]\nreturn 1\n```\n```js\nreturn 2\n```\n";
    let found = examples(text).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].line, 5);
    assert_eq!(found[0].tools.as_deref(), Some("[{\"name\":\"add\"}]"));
    assert_eq!(found[0].code, "return 1");
    assert!(examples("```js program stray\nreturn 1\n```\n").is_err());
    assert!(examples("```js program\nreturn 1\n").is_err());
}

#[test]
fn every_program_the_readme_shows_runs_in_kiln_run() {
    let readme = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    let text = std::fs::read_to_string(&readme)
        .unwrap_or_else(|error| panic!("{}: {error}", readme.display()));
    let found = examples(&text).unwrap_or_else(|error| panic!("{error}"));
    assert!(
        !found.is_empty(),
        "README.md marks no block `js program`: nothing would hold its examples to the code"
    );
    let dir = std::env::temp_dir().join(format!("kiln-readme-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|error| panic!("{error}"));
    for example in &found {
        let catalog = dir.join(format!("tools-{}.json", example.line));
        let mut args = vec!["run".to_owned(), "-".to_owned()];
        if let Some(tools) = &example.tools {
            std::fs::write(&catalog, tools).unwrap_or_else(|error| panic!("{error}"));
            args.extend(["--tools".to_owned(), catalog.to_string_lossy().into_owned()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let output = kiln_with(&args, &[], &example.code);
        let result = output.json();
        assert_eq!(
            (output.code, &result["structuredContent"]["status"]),
            (0, &serde_json::json!("completed")),
            "README.md line {}: the example does not complete in `kiln run`:\n{}\n{}",
            example.line,
            output.stdout,
            output.stderr
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
