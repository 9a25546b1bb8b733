//! Patterns a backtracking regex engine could take exponential (or high-polynomial) time on.
//!
//! The host checks arguments with the `regex` crate, which runs in linear time whatever the
//! pattern. But a tool's input schema is also served to MCP clients, and many validate
//! arguments against it before they call, with a backtracking engine (ECMAScript's, Python's
//! `re`): a pattern such as `^(a+)+$` makes such an engine take time exponential in the length
//! of what it checks. A schema is the tool's to write, the client's machine is not: a pattern
//! a backtracking engine cannot run safely refuses its tool at load, as every other schema
//! limit does (`tool/schema.rs`).
//!
//! Telling safe from unsafe exactly means deciding whether an automaton is ambiguous; this is
//! a conservative check of the shapes that cause it, on the pattern's syntax tree
//! as written (`regex-syntax`'s, the parser the `regex` crate itself uses; not its simplified
//! form, in which `a|a` is `a`: a backtracking engine runs what is written):
//!
//! - **Iterations that can be split more than one way.** Inside a repetition without a small
//!   bound (`*`, `+`, `{n,}`, or more than [`MAX_SAFE_REPEAT`] times), an inner unbounded
//!   repetition whose characters can also be consumed by what follows it in the same
//!   iteration, or, at the end of the iteration, by the start of the next: `(a+)+`,
//!   `(\w+\s?)*`, `(.*a){20}`. (`(\.\d+)*` is safe: a digit never starts an iteration.)
//! - **Alternatives that overlap.** Inside such a repetition, an alternation two of whose
//!   branches can each match the same single character: `(a|a)*`, `(\w|\d)+`, `(.|\s)*`.
//!
//! What it lets through, on purpose: adjacent repetitions outside any repetition (`\s*\s*$`:
//! polynomial, of low degree), and ambiguity that shows only over several characters
//! (`(a|aa)*`). Patterns that `regex-syntax` cannot parse are left to the schema compiler,
//! which refuses them.

use regex_syntax::ast::{self, Ast};
use regex_syntax::hir::{Class, HirKind};

/// The most iterations a bounded repetition may have and still count as small: `\d{4}` and
/// `[a-f0-9]{1,16}` are fixed-width fields, not loops a backtracking engine can split many
/// ways.
pub const MAX_SAFE_REPEAT: u32 = 16;

/// A set of characters, as inclusive ranges of scalar values.
#[derive(Debug, Clone, Default)]
struct Chars(Vec<(u32, u32)>);

impl Chars {
    fn one(c: char) -> Chars {
        Chars(vec![(u32::from(c), u32::from(c))])
    }

    fn of(class: &Class) -> Chars {
        match class {
            Class::Unicode(class) => Chars(
                class
                    .ranges()
                    .iter()
                    .map(|range| (u32::from(range.start()), u32::from(range.end())))
                    .collect(),
            ),
            Class::Bytes(class) => Chars(
                class
                    .ranges()
                    .iter()
                    .map(|range| (u32::from(range.start()), u32::from(range.end())))
                    .collect(),
            ),
        }
    }

    fn add(&mut self, other: &Chars) {
        self.0.extend_from_slice(&other.0);
    }

    fn meets(&self, other: &Chars) -> bool {
        self.0
            .iter()
            .any(|(a, b)| other.0.iter().any(|(c, d)| a <= d && c <= b))
    }
}

/// A pattern as it was written (groups and alternatives as the author wrote them: a
/// backtracking engine runs what is written, not a simplified form), with each character
/// class as the set it matches.
enum Node {
    /// Matches the empty string only: empty, flags, an assertion.
    Empty,
    /// One character of a set.
    Char(Chars),
    Repeat {
        min: u32,
        max: Option<u32>,
        sub: Box<Node>,
    },
    Concat(Vec<Node>),
    Alternation(Vec<Node>),
}

/// The pattern `ast` (from `pattern`) as a [`Node`]; `None` if a class cannot be translated.
fn node(pattern: &str, ast: &Ast) -> Option<Node> {
    let class = |ast: &Ast| -> Option<Node> {
        let hir = regex_syntax::hir::translate::Translator::new()
            .translate(pattern, ast)
            .ok()?;
        match hir.kind() {
            HirKind::Class(class) => Some(Node::Char(Chars::of(class))),
            HirKind::Literal(literal) => Some(Node::Char(
                String::from_utf8_lossy(&literal.0)
                    .chars()
                    .next()
                    .map(Chars::one)
                    .unwrap_or_default(),
            )),
            _ => Some(Node::Empty),
        }
    };
    Some(match ast {
        Ast::Empty(_) | Ast::Flags(_) | Ast::Assertion(_) => Node::Empty,
        Ast::Literal(literal) => Node::Char(Chars::one(literal.c)),
        Ast::Dot(_) | Ast::ClassUnicode(_) | Ast::ClassPerl(_) | Ast::ClassBracketed(_) => {
            class(ast)?
        }
        Ast::Repetition(repetition) => {
            let (min, max) = match &repetition.op.kind {
                ast::RepetitionKind::ZeroOrOne => (0, Some(1)),
                ast::RepetitionKind::ZeroOrMore => (0, None),
                ast::RepetitionKind::OneOrMore => (1, None),
                ast::RepetitionKind::Range(ast::RepetitionRange::Exactly(n)) => (*n, Some(*n)),
                ast::RepetitionKind::Range(ast::RepetitionRange::AtLeast(n)) => (*n, None),
                ast::RepetitionKind::Range(ast::RepetitionRange::Bounded(m, n)) => (*m, Some(*n)),
            };
            Node::Repeat {
                min,
                max,
                sub: Box::new(node(pattern, &repetition.ast)?),
            }
        }
        Ast::Group(group) => node(pattern, &group.ast)?,
        Ast::Concat(concat) => Node::Concat(
            concat
                .asts
                .iter()
                .map(|ast| node(pattern, ast))
                .collect::<Option<_>>()?,
        ),
        Ast::Alternation(alternation) => Node::Alternation(
            alternation
                .asts
                .iter()
                .map(|ast| node(pattern, ast))
                .collect::<Option<_>>()?,
        ),
    })
}

impl Node {
    /// Whether it can match the empty string.
    fn nullable(&self) -> bool {
        match self {
            Node::Empty => true,
            Node::Char(_) => false,
            Node::Repeat { min, sub, .. } => *min == 0 || sub.nullable(),
            Node::Concat(items) => items.iter().all(Node::nullable),
            Node::Alternation(branches) => branches.iter().any(Node::nullable),
        }
    }

    /// Whether it can match nothing but the empty string (a repetition of it is no loop).
    fn empty_only(&self) -> bool {
        match self {
            Node::Empty => true,
            Node::Char(_) => false,
            Node::Repeat { sub, .. } => sub.empty_only(),
            Node::Concat(items) | Node::Alternation(items) => items.iter().all(Node::empty_only),
        }
    }

    /// The characters a match can start with.
    fn first(&self) -> Chars {
        match self {
            Node::Empty => Chars::default(),
            Node::Char(chars) => chars.clone(),
            Node::Repeat { sub, .. } => sub.first(),
            Node::Concat(items) => {
                let mut chars = Chars::default();
                for item in items {
                    chars.add(&item.first());
                    if !item.nullable() {
                        break;
                    }
                }
                chars
            }
            Node::Alternation(branches) => {
                let mut chars = Chars::default();
                for branch in branches {
                    chars.add(&branch.first());
                }
                chars
            }
        }
    }

    /// Every character a match can consume.
    fn all(&self) -> Chars {
        match self {
            Node::Empty => Chars::default(),
            Node::Char(chars) => chars.clone(),
            Node::Repeat { sub, .. } => sub.all(),
            Node::Concat(items) | Node::Alternation(items) => {
                let mut chars = Chars::default();
                for item in items {
                    chars.add(&item.all());
                }
                chars
            }
        }
    }

    /// The characters it can match as a whole one-character string.
    fn single(&self) -> Chars {
        match self {
            Node::Empty => Chars::default(),
            Node::Char(chars) => chars.clone(),
            Node::Repeat { min, max, sub } if *min <= 1 && max.is_none_or(|max| max >= 1) => {
                sub.single()
            }
            Node::Repeat { .. } => Chars::default(),
            Node::Alternation(branches) => {
                let mut chars = Chars::default();
                for branch in branches {
                    chars.add(&branch.single());
                }
                chars
            }
            Node::Concat(items) => {
                // One item matches the character, and every other one can match nothing.
                let mut chars = Chars::default();
                for (at, item) in items.iter().enumerate() {
                    if items
                        .iter()
                        .enumerate()
                        .all(|(other, item)| other == at || item.nullable())
                    {
                        chars.add(&item.single());
                    }
                }
                chars
            }
        }
    }
}

/// Whether a repetition has no small bound (see [`MAX_SAFE_REPEAT`]).
fn unbounded(min: u32, max: Option<u32>) -> bool {
    max.is_none_or(|max| max > MAX_SAFE_REPEAT || max.saturating_sub(min) > MAX_SAFE_REPEAT)
}

/// Why `pattern` is unsafe for a backtracking engine, if it is; `None` if it looks safe or
/// cannot be parsed (the schema compiler judges that).
pub(crate) fn risk(pattern: &str) -> Option<&'static str> {
    let ast = ast::parse::Parser::new().parse(pattern).ok()?;
    find(&node(pattern, &ast)?)
}

/// The first risk anywhere in `node`.
fn find(node: &Node) -> Option<&'static str> {
    match node {
        Node::Repeat { min, max, sub } => {
            if unbounded(*min, *max)
                && !sub.empty_only()
                && let Some(why) = body_risk(sub, &sub.first())
            {
                return Some(why);
            }
            find(sub)
        }
        Node::Concat(items) | Node::Alternation(items) => items.iter().find_map(find),
        Node::Empty | Node::Char(_) => None,
    }
}

/// A risk inside the body of an unbounded repetition, `next` being what can follow `body`
/// (at the body's end: the start of the next iteration).
fn body_risk(body: &Node, next: &Chars) -> Option<&'static str> {
    match body {
        Node::Repeat { min, max, sub } => {
            if unbounded(*min, *max) && !sub.empty_only() && sub.all().meets(next) {
                return Some(
                    "a repetition inside a repetition, whose iterations can be split more than \
                     one way (as in `(a+)+`)",
                );
            }
            // Inside the inner loop, its own next iteration or what follows it come next.
            let mut after = sub.first();
            after.add(next);
            body_risk(sub, &after)
        }
        Node::Concat(items) => {
            for (at, item) in items.iter().enumerate() {
                // What can follow this item: the first characters of the items after it, up to
                // one that cannot be empty; past the end, `next`.
                let mut after = Chars::default();
                let mut open = true;
                for later in &items[at + 1..] {
                    after.add(&later.first());
                    if !later.nullable() {
                        open = false;
                        break;
                    }
                }
                if open {
                    after.add(next);
                }
                if let Some(why) = body_risk(item, &after) {
                    return Some(why);
                }
            }
            None
        }
        Node::Alternation(branches) => {
            for (at, branch) in branches.iter().enumerate() {
                let one = branch.single();
                if branches[at + 1..]
                    .iter()
                    .any(|other| one.meets(&other.single()))
                {
                    return Some(
                        "alternatives inside a repetition that can match the same character \
                         (as in `(a|a)*`)",
                    );
                }
                if let Some(why) = body_risk(branch, next) {
                    return Some(why);
                }
            }
            None
        }
        Node::Empty | Node::Char(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_classic_catastrophic_patterns_are_refused() {
        for pattern in [
            "^(a+)+$",
            "^(a*)*$",
            "(a|a)*b",
            r"^(\w+\s?)*$",
            r"^(\d+)*x$",
            "^(.*a){20}$",
            r"^(\w|\d)+$",
            r"(.|\s)*",
            r"^([a-z0-9]+)+@",
            r"^(x+x+)+y$",
            r"^((ab)*)+$",
        ] {
            assert!(risk(pattern).is_some(), "not refused: {pattern}");
        }
    }

    #[test]
    fn what_real_schemas_use_is_accepted() {
        for pattern in [
            r"^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}$",
            r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$",
            r"^\d{4}-\d{2}-\d{2}$",
            r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$",
            r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$",
            r"^([a-z0-9]+\.)+[a-z]{2,}$",
            r"^https?://[^\s/$.?#].[^\s]*$",
            r"^[A-Z][a-z]+( [A-Z][a-z]+)*$",
            r"^(\.\d+)*$",
            r"^[a-f0-9]{64}$",
            r"^\s*\S.*$",
            "",
        ] {
            assert_eq!(risk(pattern), None, "refused: {pattern}");
        }
    }
}
