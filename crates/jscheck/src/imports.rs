//! A program's import declarations (`import { parse } from "kiln:csv"`), read
//! from the top of its source without the engine: a program is the body of an
//! async function, where `import` is not JavaScript, so the declarations that
//! open it are found here, and the sandbox rewrites them, the nodes layer
//! moves a body's to the top of its program, and [`crate::parse_body`] reads
//! the rest. Only the declarations before the first other statement are
//! imports; one later is the engine's syntax error.

/// What one import declaration binds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Binding {
    /// `import "kiln:csv"`: nothing.
    None,
    /// `import csv from` or `import * as csv from`: the module's namespace.
    Namespace(String),
    /// `import { parse, stringify as write } from`: (export, local) pairs.
    Named(Vec<(String, String)>),
}

/// One declaration: where it is and what it asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Import {
    /// Its first line, from 1.
    pub line: usize,
    /// Its byte range in the source, `;` included.
    pub start: usize,
    pub end: usize,
    pub specifier: String,
    pub bindings: Vec<Binding>,
}

impl Import {
    /// The export names it binds by name.
    #[must_use]
    pub fn names(&self) -> Vec<&str> {
        self.bindings
            .iter()
            .flat_map(|binding| match binding {
                Binding::Named(names) => names.iter().map(|(export, _)| export.as_str()).collect(),
                _ => Vec::new(),
            })
            .collect()
    }
}

/// The declarations that open `code`, in order.
///
/// # Errors
///
/// A declaration that is not well formed, as a `SyntaxError: …, at line N`
/// sentence.
pub fn leading(code: &str) -> Result<Vec<Import>, String> {
    let mut scanner = Scanner { code, at: 0 };
    let mut imports = Vec::new();
    loop {
        scanner.skip_blank();
        if !scanner.at_import() {
            return Ok(imports);
        }
        let start = scanner.at;
        let line = code[..start].matches('\n').count() + 1;
        let (bindings, specifier) = scanner
            .declaration()
            .map_err(|why| format!("SyntaxError: {why}, at line {line}"))?;
        imports.push(Import {
            line,
            start,
            end: scanner.at,
            specifier,
            bindings,
        });
    }
}

/// `code` with `imports` made white space (their line breaks kept), so the
/// rest parses as a function body with its positions unchanged.
#[must_use]
pub fn blanked(code: &str, imports: &[Import]) -> String {
    let mut out = code.to_owned();
    for import in imports {
        let blank: String = code[import.start..import.end]
            .chars()
            .map(|c| if c == '\n' { '\n' } else { ' ' })
            .collect();
        out.replace_range(import.start..import.end, &blank);
    }
    out
}

struct Scanner<'a> {
    code: &'a str,
    at: usize,
}

impl<'a> Scanner<'a> {
    fn rest(&self) -> &'a str {
        &self.code[self.at..]
    }

    /// Skips white space and comments.
    fn skip_blank(&mut self) {
        loop {
            let rest = self.rest();
            let trimmed = rest.trim_start();
            self.at += rest.len() - trimmed.len();
            if trimmed.starts_with("//") {
                self.at += trimmed.find('\n').unwrap_or(trimmed.len());
            } else if let Some(comment) = trimmed.strip_prefix("/*") {
                self.at += comment.find("*/").map_or(trimmed.len(), |end| end + 4);
            } else {
                return;
            }
        }
    }

    /// Whether an import declaration starts here (not `import(` or
    /// `import.meta`, which are expressions).
    fn at_import(&self) -> bool {
        let Some(after) = self.rest().strip_prefix("import") else {
            return false;
        };
        after
            .chars()
            .next()
            .is_some_and(|c| c.is_whitespace() || matches!(c, '{' | '*' | '"' | '\''))
    }

    fn eat(&mut self, token: &str) -> bool {
        self.skip_blank();
        if self.rest().starts_with(token) {
            self.at += token.len();
            true
        } else {
            false
        }
    }

    fn identifier(&mut self) -> Option<String> {
        self.skip_blank();
        let rest = self.rest();
        let end = rest
            .char_indices()
            .find(|&(index, c)| {
                !(c == '_' || c == '$' || c.is_alphabetic() || (index > 0 && c.is_alphanumeric()))
            })
            .map_or(rest.len(), |(index, _)| index);
        if end == 0 {
            return None;
        }
        let name = rest[..end].to_owned();
        self.at += end;
        Some(name)
    }

    fn keyword(&mut self, word: &str) -> bool {
        let at = self.at;
        if self.identifier().as_deref() == Some(word) {
            return true;
        }
        self.at = at;
        false
    }

    fn string(&mut self) -> Result<String, String> {
        self.skip_blank();
        let rest = self.rest();
        let quote = rest
            .chars()
            .next()
            .filter(|c| matches!(c, '"' | '\''))
            .ok_or("an import names its module in quotes: `from \"kiln:csv\"`")?;
        let end = rest[1..]
            .find(quote)
            .ok_or("the module's name is not closed")?;
        let text = rest[1..=end].to_owned();
        if text.contains(['\\', '\n']) {
            return Err("a module's name is plain text: `\"kiln:csv\"`".into());
        }
        self.at += end + 2;
        Ok(text)
    }

    /// One declaration, `import` included, to its `;` (or line end).
    fn declaration(&mut self) -> Result<(Vec<Binding>, String), String> {
        self.at += "import".len();
        let mut bindings = Vec::new();
        self.skip_blank();
        if !self.rest().starts_with(['"', '\'']) {
            if let Some(local) = self.identifier() {
                bindings.push(Binding::Namespace(local));
                if !self.eat(",") {
                    return self.from(bindings);
                }
            }
            if self.eat("*") {
                if !self.keyword("as") {
                    return Err("a namespace import is `import * as name from \"kiln:…\"`".into());
                }
                let local = self
                    .identifier()
                    .ok_or("`* as` needs a name for the namespace")?;
                bindings.push(Binding::Namespace(local));
            } else if self.eat("{") {
                let mut names = Vec::new();
                while !self.eat("}") {
                    let export = self
                        .identifier()
                        .ok_or("an import's braces list names: `{ parse, stringify as write }`")?;
                    let local = if self.keyword("as") {
                        self.identifier().ok_or("`as` needs a name")?
                    } else {
                        export.clone()
                    };
                    names.push((export, local));
                    if !self.eat(",") {
                        if !self.eat("}") {
                            return Err("the import's names are not closed with `}`".into());
                        }
                        break;
                    }
                }
                bindings.push(Binding::Named(names));
            } else if bindings.is_empty() {
                return Err("an import is `import { name } from \"kiln:…\"`".into());
            }
            return self.from(bindings);
        }
        let specifier = self.string()?;
        self.eat(";");
        Ok((vec![Binding::None], specifier))
    }

    fn from(&mut self, bindings: Vec<Binding>) -> Result<(Vec<Binding>, String), String> {
        if !self.keyword("from") {
            return Err("an import needs `from \"kiln:…\"`".into());
        }
        let specifier = self.string()?;
        self.eat(";");
        Ok((bindings, specifier))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_declarations_that_open_a_program_are_read_with_their_places() {
        let code = "// parse a file\nimport { parse, stringify as write } from \"kiln:csv\";\nimport * as html from 'kiln:html'\nimport md, { toHtml } from \"kiln:markdown\";\nimport \"kiln:csv\";\nreturn parse('a')";
        let imports = leading(code).unwrap();
        assert_eq!(imports.len(), 4);
        assert_eq!(imports[0].line, 2);
        assert_eq!(
            imports[0].bindings,
            [Binding::Named(vec![
                ("parse".into(), "parse".into()),
                ("stringify".into(), "write".into())
            ])]
        );
        assert_eq!(imports[1].bindings, [Binding::Namespace("html".into())]);
        assert_eq!(imports[2].names(), ["toHtml"]);
        assert_eq!(imports[3].bindings, [Binding::None]);
        let blank = blanked(code, &imports);
        assert_eq!(blank.len(), code.len());
        assert!(blank.ends_with("\nreturn parse('a')") && !blank.contains("import"));
        assert!(
            leading("const x = 1; import('kiln:csv')")
                .unwrap()
                .is_empty()
        );
        assert!(leading("importer()").unwrap().is_empty());
        let broken = leading("\nimport { parse from \"kiln:csv\"").unwrap_err();
        assert!(
            broken.starts_with("SyntaxError: ") && broken.ends_with("at line 2"),
            "{broken}"
        );
    }
}
