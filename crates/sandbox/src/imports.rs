//! A program's imports (reference/000, "Libraries are imports, never
//! globals"), rewritten for the engine: each declaration that opens a program
//! (read by `kiln_jscheck::imports`) becomes, in place, a `const` over the
//! run's importer, keeping the program's line numbers. A module or export
//! Kiln does not have, and any specifier that is not `kiln:`, is refused by
//! name before anything runs (`kiln_types::guest::check_import`).

use kiln_jscheck::imports::{Binding, leading};

/// The wrapper's parameter the rewritten imports call.
pub(crate) const IMPORTER: &str = "__kiln_import";

/// `code` with its leading import declarations rewritten, or the first
/// problem, naming its line.
pub(crate) fn rewrite(code: &str) -> Result<String, String> {
    let imports = leading(code)?;
    if imports.is_empty() {
        return Ok(code.to_owned());
    }
    let mut out = String::with_capacity(code.len() + 64);
    let mut copied = 0;
    for import in &imports {
        kiln_types::guest::check_import(&import.specifier, &import.names())
            .map_err(|why| format!("{why} (line {})", import.line))?;
        out.push_str(&code[copied..import.start]);
        out.push_str(&statement(&import.bindings, &import.specifier));
        // The same line breaks as the declaration, so later lines keep their numbers.
        out.push_str(&"\n".repeat(code[import.start..import.end].matches('\n').count()));
        copied = import.end;
    }
    out.push_str(&code[copied..]);
    Ok(out)
}

/// The `const` statements an import declaration becomes, on one line.
fn statement(bindings: &[Binding], specifier: &str) -> String {
    let source = format!("{IMPORTER}({specifier:?})");
    let mut text = String::new();
    for binding in bindings {
        match binding {
            Binding::None => {}
            Binding::Namespace(local) => text.push_str(&format!("const {local} = {source}; ")),
            Binding::Named(names) => {
                let names: Vec<String> = names
                    .iter()
                    .map(|(export, local)| {
                        if export == local {
                            export.clone()
                        } else {
                            format!("{export}: {local}")
                        }
                    })
                    .collect();
                text.push_str(&format!("const {{ {} }} = {source}; ", names.join(", ")));
            }
        }
    }
    if text.is_empty() {
        text = format!("{source}; ");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imports_become_consts_on_the_same_lines() {
        let code = "// parse a file\nimport { parse, stringify as write } from \"kiln:csv\";\nimport * as html from 'kiln:html'\nimport md, { toHtml } from \"kiln:markdown\";\nreturn parse('a')";
        let rewritten = rewrite(code).unwrap();
        assert_eq!(
            rewritten,
            "// parse a file\nconst { parse, stringify: write } = __kiln_import(\"kiln:csv\"); \nconst html = __kiln_import(\"kiln:html\"); \nconst md = __kiln_import(\"kiln:markdown\"); const { toHtml } = __kiln_import(\"kiln:markdown\"); \nreturn parse('a')"
        );
        assert_eq!(rewritten.lines().count(), code.lines().count());
        let spread = "import {\n  parse,\n} from \"kiln:csv\";\nreturn 1";
        assert_eq!(
            rewrite(spread).unwrap().lines().count(),
            spread.lines().count()
        );
        assert_eq!(rewrite("return 1").unwrap(), "return 1");
        assert_eq!(
            rewrite("const importer = 1; import('kiln:csv')").unwrap(),
            "const importer = 1; import('kiln:csv')",
            "not a declaration: the engine refuses it"
        );
    }

    #[test]
    fn what_kiln_does_not_have_is_refused_by_name() {
        let packages = rewrite("import _ from \"lodash\";").unwrap_err();
        assert!(
            packages.contains("`lodash` cannot be imported") && packages.contains("`kiln:csv`"),
            "{packages}"
        );
        let unknown = rewrite("\n\nimport { x } from \"kiln:nope\"").unwrap_err();
        assert!(
            unknown.contains("no module `kiln:nope`") && unknown.ends_with("(line 3)"),
            "{unknown}"
        );
        let export = rewrite("import { parsee } from \"kiln:csv\"").unwrap_err();
        assert!(
            export.contains("`kiln:csv` has no export `parsee`; it has `parse`, `stringify`"),
            "{export}"
        );
        let broken = rewrite("import { parse from \"kiln:csv\"").unwrap_err();
        assert!(broken.starts_with("SyntaxError: "), "{broken}");
    }
}
