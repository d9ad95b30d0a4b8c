//! What a program has at its top level that an async function's body
//! cannot hold, found by parsing it once as a TypeScript module: the import
//! declarations that open it (stripped apart, as a module; an
//! `import x = require(…)` among them too, for the strip to name) and the
//! type-only exports among its statements (`export interface`,
//! `export type T = …`, `export type { T }`), whose `export` is blanked
//! before the body is stripped. Any other export is left for the parse of
//! the body to refuse, as the sandbox would.

use swc_common::{BytePos, Spanned};
use swc_ecma_ast::{Decl, DefaultDecl, ExportSpecifier, Module, ModuleDecl, ModuleItem};
use swc_ecma_parser::{Parser, StringInput, Syntax, TsSyntax};

/// The top level of a program.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Outline {
    /// Where its opening import declarations end (a byte offset; 0 when it
    /// opens with none).
    pub(crate) imports_end: usize,
    /// The byte ranges to blank for its type-only exports, in order.
    pub(crate) exports: Vec<Blank>,
}

/// A byte range of the program to blank before its body is stripped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Blank {
    pub(crate) start: usize,
    pub(crate) end: usize,
    /// Whether its first character becomes `;`: a whole statement removed
    /// leaves an empty one, so the lines around it cannot run together.
    pub(crate) semicolon: bool,
}

/// Where the source map of the parse places the program: swc keeps 0 for
/// "no position".
const START: u32 = 1;

/// The outline of `source`; empty when `source` names neither `import` nor
/// `export`, or does not parse as a module (the body's parse then says
/// why).
pub(crate) fn read(source: &str) -> Outline {
    if !source.contains("import") && !source.contains("export") {
        return Outline::default();
    }
    let Ok(end) = u32::try_from(source.len()) else {
        return Outline::default();
    };
    let input = StringInput::new(source, BytePos(START), BytePos(START + end));
    let mut parser = Parser::new(Syntax::Typescript(TsSyntax::default()), input, None);
    // Errors the parse recovers from (a `return` outside a function, which
    // a program may have) leave the items it read.
    match parser.parse_module() {
        Ok(module) => of_module(&module),
        Err(_) => Outline::default(),
    }
}

/// The outline of a parsed program.
fn of_module(module: &Module) -> Outline {
    let offset = |position: BytePos| position.0.saturating_sub(START) as usize;
    let mut outline = Outline::default();
    let mut opening = true;
    for item in &module.body {
        let ModuleItem::ModuleDecl(declaration) = item else {
            opening = false;
            continue;
        };
        let (start, end) = (offset(declaration.span().lo), offset(declaration.span().hi));
        match declaration {
            ModuleDecl::Import(import) if opening => outline.imports_end = offset(import.span.hi),
            // Read with the imports, so that the head's strip refuses it by
            // name rather than the body's parse as a stray `import`.
            ModuleDecl::TsImportEquals(import) if opening => {
                outline.imports_end = offset(import.span.hi);
            }
            ModuleDecl::ExportDecl(export) if is_type_only(&export.decl) => {
                outline.exports.push(Blank {
                    start,
                    end: offset(export.decl.span().lo),
                    semicolon: false,
                });
            }
            ModuleDecl::ExportDefaultDecl(export) => {
                if let DefaultDecl::TsInterfaceDecl(interface) = &export.decl {
                    outline.exports.push(Blank {
                        start,
                        end: offset(interface.span.lo),
                        semicolon: false,
                    });
                }
            }
            ModuleDecl::ExportNamed(export)
                if export.type_only
                    || (!export.specifiers.is_empty()
                        && export.specifiers.iter().all(|specifier| {
                            matches!(specifier, ExportSpecifier::Named(named) if named.is_type_only)
                        })) =>
            {
                outline.exports.push(Blank {
                    start,
                    end,
                    semicolon: true,
                });
            }
            ModuleDecl::ExportAll(export) if export.type_only => {
                outline.exports.push(Blank {
                    start,
                    end,
                    semicolon: true,
                });
            }
            _ => {}
        }
        opening &= matches!(
            declaration,
            ModuleDecl::Import(_) | ModuleDecl::TsImportEquals(_)
        );
    }
    outline
}

/// Whether a declaration is types only (or TypeScript the body's strip
/// refuses by name, such as an `enum`), so `export` before it can go.
fn is_type_only(declaration: &Decl) -> bool {
    match declaration {
        Decl::TsInterface(_) | Decl::TsTypeAlias(_) | Decl::TsEnum(_) | Decl::TsModule(_) => true,
        Decl::Var(variable) => variable.declare,
        Decl::Fn(function) => function.declare || function.function.body.is_none(),
        Decl::Class(class) => class.declare,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::{Blank, Outline, read};

    #[test]
    fn opening_imports_and_type_only_exports_are_found() {
        let source = "import { parse } from \"kiln:csv\";\nimport type { Row } from \"kiln:csv\";\nexport interface A { a: number }\nexport type { A };\nexport const b = 1;\nreturn 2;\n";
        let interface = source.find("export interface").unwrap_or_default();
        let named = source.find("export type {").unwrap_or_default();
        assert_eq!(
            read(source),
            Outline {
                imports_end: source.find("\nexport").unwrap_or_default(),
                exports: vec![
                    Blank {
                        start: interface,
                        end: interface + "export ".len(),
                        semicolon: false,
                    },
                    Blank {
                        start: named,
                        end: named + "export type { A };".len(),
                        semicolon: true,
                    },
                ],
            }
        );
    }

    #[test]
    fn an_import_after_a_statement_does_not_open_the_program() {
        assert_eq!(
            read("let a = 1;\nimport { parse } from \"kiln:csv\";"),
            Outline::default()
        );
        assert_eq!(read("return 1"), Outline::default());
    }
}
