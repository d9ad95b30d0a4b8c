//! The case files (`cases/*.json`): each parses, its names are unique and
//! it holds the cases it did when they were Rust literals; a tool carried by
//! several cases is the same tool in each; and a malformed file is an error
//! that names the file and the field, never a panic.

use std::collections::{BTreeMap, BTreeSet};

use kiln_evals::cases::parse;
use kiln_evals::codeact::{Case, EvalTool, cases};
use kiln_evals::codegen::{CodegenCase, codegen_cases};
use kiln_evals::plans::{PlannerCase, planner_cases, subtask_cases};

/// The names in `file`, checked unique.
fn unique_names<'a>(file: &str, names: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let names: Vec<&str> = names.into_iter().collect();
    let distinct: BTreeSet<&str> = names.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        names.len(),
        "{file}: a name twice in {names:?}"
    );
    names
}

#[test]
fn every_case_file_parses_with_unique_names_and_its_cases() {
    let codeact = cases().unwrap();
    let planner = planner_cases().unwrap();
    let subtask = subtask_cases().unwrap();
    let codegen = codegen_cases().unwrap();
    let counts = [
        (
            "cases/codeact.json",
            unique_names("codeact", codeact.iter().map(|case| case.name.as_str())).len(),
            7,
        ),
        (
            "cases/planner.json",
            unique_names("planner", planner.iter().map(|case| case.name.as_str())).len(),
            5,
        ),
        (
            "cases/subtask.json",
            unique_names("subtask", subtask.iter().map(|case| case.name.as_str())).len(),
            3,
        ),
        (
            "cases/codegen.json",
            unique_names("codegen", codegen.iter().map(|case| case.name.as_str())).len(),
            24,
        ),
    ];
    for (file, count, expected) in counts {
        assert_eq!(count, expected, "{file}");
    }
}

/// A tool is written out in full in every case that offers it: the copies
/// must agree (codeact's and subtask's files alike), so that no case
/// answers from a table the others do not have.
#[test]
fn a_tool_is_the_same_wherever_a_case_carries_it() {
    let codeact = cases().unwrap();
    let subtask = subtask_cases().unwrap();
    let carried = codeact
        .iter()
        .map(|case| (case.name.as_str(), &case.tools))
        .chain(subtask.iter().map(|case| (case.name.as_str(), &case.tools)));
    let mut seen: BTreeMap<&str, (&str, &EvalTool)> = BTreeMap::new();
    for (case, tools) in carried {
        for tool in tools {
            let Some((first, earlier)) = seen.get(tool.name.as_str()) else {
                seen.insert(&tool.name, (case, tool));
                continue;
            };
            assert_eq!(
                (&earlier.description, &earlier.key, &earlier.table),
                (&tool.description, &tool.key, &tool.table),
                "`{}` differs between {first} and {case}",
                tool.name
            );
        }
    }
    assert_eq!(
        seen.keys().copied().collect::<Vec<_>>(),
        [
            "get_person",
            "get_price",
            "get_stock",
            "get_temperature",
            "list_team"
        ]
    );
}

#[test]
fn a_malformed_case_file_is_an_error_naming_the_file_and_the_field() {
    let missing = "[\n  {\n    \"name\": \"x\",\n    \"domain\": \"d\",\n    \"objective\": \"o\",\n    \"tools\": []\n  }\n]\n";
    let error = parse::<Case>("cases/codeact.json", missing).unwrap_err();
    assert_eq!(error.file, "cases/codeact.json");
    assert_eq!(
        error.to_string(),
        "cases/codeact.json: missing field `expected` at line 7 column 3"
    );

    let unknown = r#"[{"name": "x", "objective": "o", "tools": [], "min_tasks": 1, "max_tasks": 1, "min_width": 1, "min_depth": 1, "routes": [], "route": []}]"#;
    let error = parse::<PlannerCase>("cases/planner.json", unknown)
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("cases/planner.json: unknown field `route`, expected one of"),
        "{error}"
    );

    let nested = r#"[{"name": "seed-x", "shape": "seed", "instruction": "i", "inputs": [], "outputs": [{"name": "n", "description": ""}], "expected": true, "held_out": [], "reference": "return { n: 1 };"}]"#;
    let error = parse::<CodegenCase>("cases/codegen.json", nested)
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("cases/codegen.json: missing field `type` at line 1 column"),
        "{error}"
    );

    let shape = r#"[{"name": "x", "shape": "reshuffle"}]"#;
    let error = parse::<CodegenCase>("cases/codegen.json", shape)
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("cases/codegen.json: unknown variant `reshuffle`, expected one of"),
        "{error}"
    );

    let error = parse::<Case>("cases/codeact.json", "").unwrap_err();
    assert_eq!(
        error.to_string(),
        "cases/codeact.json: EOF while parsing a value at line 1 column 0"
    );
}
