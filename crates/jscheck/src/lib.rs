//! Static checks of a program's source, before anything runs it: the import
//! declarations that open it ([`imports`]), how deep it nests
//! ([`source_depth`]), whether it parses as the body of an async
//! function ([`parse_body`]), and whether a code node's body gives every
//! declared output on every return path it shows ([`output_paths`]).
//!
//! Boa's parser and AST only, never its engine: the nodes layer (which runs
//! where no sandbox is, in the runtime worker) checks `submit_code` and
//! `kiln node check` with it, and the sandbox checks the depth with it before
//! its own parse.

pub mod imports;
pub mod source_depth;

use boa_ast::expression::literal::{ObjectLiteral, PropertyDefinition};
use boa_ast::function::FunctionBody;
use boa_ast::property::PropertyName;
use boa_ast::statement::{LabelledItem, Statement};
use boa_ast::{Expression, Spanned as _, StatementList, StatementListItem};
use boa_interner::Interner;
use boa_parser::{Parser, Source};

/// A body parsed: what [`output_paths`] walks.
pub struct Body {
    body: FunctionBody,
    interner: Interner,
}

/// Parses `code` as the body of an async function (top-level `await` and
/// `return` allowed), after the depth check. The whole of `code` must be
/// the body: a `}` that closes no block is refused, not taken as its end.
///
/// # Errors
///
/// The first syntax error, as one line naming where it is.
pub fn parse_body(code: &str) -> Result<Body, String> {
    source_depth::check(code)?;
    // The import declarations that open it are read apart; the rest is the body.
    let code = &imports::blanked(code, &imports::leading(code)?);
    let (body, interner) = parse_function_body(code)?;
    // Boa's parser ends a function body at the first `}` it cannot match
    // (the one that would close the function) and leaves the rest unread.
    // The same text with a `}` of ours on a line after it shows where that
    // was: at our `}` when `code` is all body, at the same place when a `}`
    // of `code` closed it first.
    let (closed, _) = parse_function_body(&format!("{code}\n}}"))?;
    let end = body.span().end();
    if closed.span().end() == end {
        return Err(format!(
            "unexpected `}}` at line {}, column {}: it closes no block, so the body would end there \
             and the code after it would not be part of it (remove it, or the `{{` it was meant to close is missing)",
            end.line_number(),
            end.column_number().saturating_sub(1)
        ));
    }
    Ok(Body { body, interner })
}

/// Boa's parse of `code` as an async function's body, up to where the
/// parser stops.
fn parse_function_body(code: &str) -> Result<(FunctionBody, Interner), String> {
    let mut interner = Interner::default();
    let mut parser = Parser::new(Source::from_bytes(code));
    match parser.parse_function_body(&mut interner, false, true) {
        Ok(body) => Ok((body, interner)),
        Err(boa_parser::Error::AbruptEnd) => Err(format!(
            "the code ends at line {} before it is complete (an unclosed bracket, brace, string or comment?)",
            code.lines().count().max(1)
        )),
        Err(error) => Err(error.to_string()),
    }
}

/// One way a body can end without all of its outputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathIssue {
    /// Where (`line 4`), when the AST knows.
    pub line: Option<u32>,
    /// The outputs that path does not give; empty when it gives no object.
    pub missing: Vec<String>,
    /// The sentence: what the path does.
    pub message: String,
}

/// Every visible way `body` ends (each `return`, each `finish(…)`, and
/// falling off its end) that does not give every name of `outputs`. A
/// return of an object literal names its keys; a conditional is checked on
/// both sides; a value the AST cannot see into (a variable, a call, a spread
/// or computed key) is taken as giving them, since only running it could
/// tell.
#[must_use]
pub fn output_paths(body: &Body, outputs: &[&str]) -> Vec<PathIssue> {
    let mut walk = Walk {
        interner: &body.interner,
        outputs,
        issues: Vec::new(),
    };
    let list = body.body.statement_list();
    walk.list(list);
    if !list_ends(list, &body.interner) {
        walk.issues.push(PathIssue {
            line: None,
            missing: outputs.iter().map(|name| (*name).to_owned()).collect(),
            message: "the body can reach its end without a `return`, which gives no outputs"
                .to_owned(),
        });
    }
    walk.issues
}

struct Walk<'a> {
    interner: &'a Interner,
    outputs: &'a [&'a str],
    issues: Vec<PathIssue>,
}

impl Walk<'_> {
    fn list(&mut self, list: &StatementList) {
        for item in list.statements() {
            match item {
                StatementListItem::Statement(statement) => self.statement(statement),
                // Functions and classes are other bodies: their returns are
                // not the node's.
                StatementListItem::Declaration(_) => {}
            }
        }
    }

    fn statement(&mut self, statement: &Statement) {
        match statement {
            Statement::Return(ret) => match ret.target() {
                Some(value) => self.value(value, "`return`"),
                None => self.issues.push(PathIssue {
                    line: None,
                    missing: self.outputs.iter().map(|name| (*name).to_owned()).collect(),
                    message: "a bare `return` gives no outputs".to_owned(),
                }),
            },
            Statement::Expression(expression) => {
                if let Some(value) = finish_argument(expression, self.interner) {
                    self.value(value, "`finish(…)`");
                }
            }
            Statement::Block(block) => self.list(block.statement_list()),
            Statement::If(branch) => {
                self.statement(branch.body());
                if let Some(other) = branch.else_node() {
                    self.statement(other);
                }
            }
            Statement::Switch(switch) => {
                for case in switch.cases() {
                    self.list(case.body());
                }
            }
            Statement::Try(attempt) => {
                self.list(attempt.block().statement_list());
                if let Some(catch) = attempt.catch() {
                    self.list(catch.block().statement_list());
                }
                if let Some(finally) = attempt.finally() {
                    self.list(finally.block().statement_list());
                }
            }
            Statement::Labelled(labelled) => {
                if let LabelledItem::Statement(inner) = labelled.item() {
                    self.statement(inner);
                }
            }
            Statement::WhileLoop(each) => self.statement(each.body()),
            Statement::DoWhileLoop(each) => self.statement(each.body()),
            Statement::ForLoop(each) => self.statement(each.body()),
            Statement::ForInLoop(each) => self.statement(each.body()),
            Statement::ForOfLoop(each) => self.statement(each.body()),
            Statement::With(with) => self.statement(with.statement()),
            Statement::Var(_)
            | Statement::Empty
            | Statement::Continue(_)
            | Statement::Break(_)
            | Statement::Throw(_)
            | Statement::Debugger => {}
        }
    }

    /// A value a path ends with.
    fn value(&mut self, value: &Expression, how: &str) {
        let line = value.span().start().line_number();
        match value {
            Expression::Parenthesized(inner) => self.value(inner.expression(), how),
            Expression::Await(inner) => self.value(inner.target(), how),
            Expression::Conditional(choice) => {
                self.value(choice.if_true(), how);
                self.value(choice.if_false(), how);
            }
            Expression::ObjectLiteral(object) => {
                if let Some(keys) = literal_keys(object, self.interner) {
                    let missing: Vec<String> = self
                        .outputs
                        .iter()
                        .filter(|name| !keys.iter().any(|key| key == *name))
                        .map(|name| (*name).to_owned())
                        .collect();
                    if !missing.is_empty() {
                        let named: Vec<String> =
                            missing.iter().map(|name| format!("`{name}`")).collect();
                        self.issues.push(PathIssue {
                            line: Some(line),
                            message: format!(
                                "the {how} at line {line} gives no {}",
                                named.join(", ")
                            ),
                            missing,
                        });
                    }
                }
            }
            Expression::Literal(_)
            | Expression::ArrayLiteral(_)
            | Expression::TemplateLiteral(_)
            | Expression::ArrowFunction(_)
            | Expression::AsyncArrowFunction(_)
            | Expression::FunctionExpression(_)
            | Expression::AsyncFunctionExpression(_) => {
                self.issues.push(PathIssue {
                    line: Some(line),
                    missing: self.outputs.iter().map(|name| (*name).to_owned()).collect(),
                    message: format!(
                        "the {how} at line {line} gives {}, not an object of outputs",
                        shape(value)
                    ),
                });
            }
            Expression::Identifier(name)
                if self.interner.resolve_expect(name.sym()).to_string() == "undefined" =>
            {
                self.issues.push(PathIssue {
                    line: Some(line),
                    missing: self.outputs.iter().map(|name| (*name).to_owned()).collect(),
                    message: format!(
                        "the {how} at line {line} gives `undefined`, not an object of outputs"
                    ),
                });
            }
            // A variable, a call, a member: what it holds shows only when it runs.
            _ => {}
        }
    }
}

fn shape(value: &Expression) -> &'static str {
    match value {
        Expression::ArrayLiteral(_) => "an array",
        Expression::TemplateLiteral(_) => "a string",
        Expression::Literal(literal) => {
            use boa_ast::expression::literal::LiteralKind as K;
            match literal.kind() {
                K::String(_) => "a string",
                K::Num(_) | K::Int(_) | K::BigInt(_) => "a number",
                K::Bool(_) => "a boolean",
                K::Null => "`null`",
                K::Undefined => "`undefined`",
            }
        }
        _ => "a function",
    }
}

/// The keys an object literal certainly has, or `None` when a spread or a
/// computed key could add any.
fn literal_keys(object: &ObjectLiteral, interner: &Interner) -> Option<Vec<String>> {
    let mut keys = Vec::new();
    for property in object.properties() {
        let name = match property {
            PropertyDefinition::IdentifierReference(name)
            | PropertyDefinition::CoverInitializedName(name, _) => name.sym(),
            PropertyDefinition::Property(PropertyName::Literal(name), _) => name.sym(),
            PropertyDefinition::MethodDefinition(method) => match method.name() {
                PropertyName::Literal(name) => name.sym(),
                PropertyName::Computed(_) => return None,
            },
            PropertyDefinition::Property(PropertyName::Computed(_), _)
            | PropertyDefinition::SpreadObject(_) => return None,
        };
        keys.push(interner.resolve_expect(name).to_string());
    }
    Some(keys)
}

/// The argument of `finish(x)` or `await finish(x)` as a statement.
fn finish_argument<'e>(expression: &'e Expression, interner: &Interner) -> Option<&'e Expression> {
    let expression = match expression {
        Expression::Await(inner) => inner.target(),
        other => other,
    };
    let Expression::Call(call) = expression else {
        return None;
    };
    let Expression::Identifier(callee) = call.function() else {
        return None;
    };
    match call.args() {
        [value] if interner.resolve_expect(callee.sym()).to_string() == "finish" => Some(value),
        _ => None,
    }
}

/// Whether running `list` can never reach its end: some statement of it
/// always returns, throws or finishes (what follows it never runs).
fn list_ends(list: &StatementList, interner: &Interner) -> bool {
    list.statements().iter().any(|item| match item {
        StatementListItem::Statement(statement) => ends(statement, interner),
        StatementListItem::Declaration(_) => false,
    })
}

/// Whether `statement` never completes normally. Loops are taken as able
/// to complete (whether one ends only shows when it runs), so a body that
/// returns only from inside a loop must also end after it.
fn ends(statement: &Statement, interner: &Interner) -> bool {
    match statement {
        Statement::Return(_) | Statement::Throw(_) => true,
        Statement::Expression(expression) => finish_argument(expression, interner).is_some(),
        Statement::Block(block) => list_ends(block.statement_list(), interner),
        Statement::If(branch) => branch
            .else_node()
            .is_some_and(|other| ends(branch.body(), interner) && ends(other, interner)),
        Statement::Switch(switch) => {
            switch.default().is_some()
                && switch
                    .cases()
                    .last()
                    .is_some_and(|last| list_ends(last.body(), interner))
                && !switch.cases().iter().any(|case| breaks_out(case.body()))
        }
        Statement::Try(attempt) => {
            attempt
                .finally()
                .is_some_and(|finally| list_ends(finally.block().statement_list(), interner))
                || (list_ends(attempt.block().statement_list(), interner)
                    && attempt
                        .catch()
                        .is_none_or(|catch| list_ends(catch.block().statement_list(), interner)))
        }
        Statement::Labelled(labelled) => match labelled.item() {
            // A labelled statement a `break label` could leave is taken as
            // able to complete.
            LabelledItem::Statement(inner) => ends(inner, interner) && !statement_breaks_any(inner),
            LabelledItem::FunctionDeclaration(_) => false,
        },
        _ => false,
    }
}

/// Whether any `break` (labelled or not) is in `statement` outside nested
/// functions: the conservative reading for a labelled statement.
fn statement_breaks_any(statement: &Statement) -> bool {
    let text_free = |list: &StatementList| {
        list.statements().iter().any(|item| match item {
            StatementListItem::Statement(statement) => statement_breaks_any(statement),
            StatementListItem::Declaration(_) => false,
        })
    };
    match statement {
        Statement::Break(_) => true,
        Statement::Block(block) => text_free(block.statement_list()),
        Statement::If(branch) => {
            statement_breaks_any(branch.body())
                || branch.else_node().is_some_and(statement_breaks_any)
        }
        Statement::Try(attempt) => {
            text_free(attempt.block().statement_list())
                || attempt
                    .catch()
                    .is_some_and(|catch| text_free(catch.block().statement_list()))
                || attempt
                    .finally()
                    .is_some_and(|finally| text_free(finally.block().statement_list()))
        }
        Statement::Switch(switch) => switch.cases().iter().any(|case| text_free(case.body())),
        Statement::WhileLoop(each) => statement_breaks_any(each.body()),
        Statement::DoWhileLoop(each) => statement_breaks_any(each.body()),
        Statement::ForLoop(each) => statement_breaks_any(each.body()),
        Statement::ForInLoop(each) => statement_breaks_any(each.body()),
        Statement::ForOfLoop(each) => statement_breaks_any(each.body()),
        Statement::Labelled(labelled) => match labelled.item() {
            LabelledItem::Statement(inner) => statement_breaks_any(inner),
            LabelledItem::FunctionDeclaration(_) => false,
        },
        _ => false,
    }
}

/// Whether an unlabelled `break` in `list` (outside any loop or switch
/// nested in it) leaves the statement around it.
fn breaks_out(list: &StatementList) -> bool {
    list.statements().iter().any(|item| match item {
        StatementListItem::Statement(statement) => statement_breaks(statement),
        StatementListItem::Declaration(_) => false,
    })
}

fn statement_breaks(statement: &Statement) -> bool {
    match statement {
        Statement::Break(target) => target.label().is_none(),
        Statement::Block(block) => breaks_out(block.statement_list()),
        Statement::If(branch) => {
            statement_breaks(branch.body()) || branch.else_node().is_some_and(statement_breaks)
        }
        Statement::Try(attempt) => {
            breaks_out(attempt.block().statement_list())
                || attempt
                    .catch()
                    .is_some_and(|catch| breaks_out(catch.block().statement_list()))
                || attempt
                    .finally()
                    .is_some_and(|finally| breaks_out(finally.block().statement_list()))
        }
        Statement::Labelled(labelled) => match labelled.item() {
            LabelledItem::Statement(inner) => statement_breaks(inner),
            LabelledItem::FunctionDeclaration(_) => false,
        },
        // A loop or a switch inside takes its own unlabelled breaks.
        _ => false,
    }
}
