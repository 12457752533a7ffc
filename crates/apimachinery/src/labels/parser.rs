//! The label selector lexer and recursive-descent parser.
//!
//! Follows upstream's grammar and, deliberately, its quirks, because the error text is what a
//! client sees in a 400 and what tests compare:
//!
//! ```text
//! <selector>    ::= <requirement> | <requirement> "," <selector>
//! <requirement> ::= [!] KEY [ ("in" | "notin") "(" VALUES ")" | ("=" | "==" | "!=" | ">" | "<") VALUE ]
//! ```
//!
//! Whitespace (space, tab, CR, LF) separates tokens; identifiers are any other bytes up to a
//! special symbol (`= ! ( ) , > <`). `in`/`notin` are keywords only in operator position, so
//! `x in (in)` works. Values of `in`/`notin` are a sorted set; `()` and empty list entries
//! stand for the empty value. Keys are validated while parsing (error path `<nil>`), values
//! afterwards by [`Requirement::new`](super::Requirement::new) (paths `values[i][key]`).
//! The `(a,,)` form is accepted, as in upstream releases after 1.34.

use serde_json::Value;
use std::collections::BTreeSet;

use super::{Operator, Requirement};
use crate::field::{FieldError, Path};
use crate::validation::is_qualified_name;

/// Why a label selector string was refused. `Display` is upstream's exact message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// A requirement is malformed or invalid (bad key, bad value, missing operand):
    /// `unable to parse requirement: <nil>: Invalid value: "a b": ...`.
    #[error("unable to parse requirement: {0}")]
    Requirement(String),
    /// The requirements are not joined properly: `found 'x', expected: ',' or 'end of string'`.
    #[error("{0}")]
    Syntax(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    Error,
    EndOfString,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

fn keyword(s: &[u8]) -> Option<Token> {
    Some(match s {
        b")" => Token::ClosedPar,
        b"," => Token::Comma,
        b"!" => Token::DoesNotExist,
        b"==" => Token::DoubleEquals,
        b"=" => Token::Equals,
        b">" => Token::GreaterThan,
        b"in" => Token::In,
        b"<" => Token::LessThan,
        b"!=" => Token::NotEquals,
        b"notin" => Token::NotIn,
        b"(" => Token::OpenPar,
        _ => return None,
    })
}

fn is_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special(b: u8) -> bool {
    matches!(b, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

struct Lexer<'a> {
    s: &'a [u8],
    pos: usize,
}

impl Lexer<'_> {
    /// The next byte, or 0 at the end (a NUL byte in the input reads the same, as upstream).
    fn read(&mut self) -> u8 {
        match self.s.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                b
            }
            None => 0,
        }
    }

    fn unread(&mut self) {
        self.pos = self.pos.saturating_sub(1);
    }

    fn lex(&mut self) -> (Token, String) {
        let mut ch = self.read();
        while is_whitespace(ch) {
            ch = self.read();
        }
        if ch == 0 {
            return (Token::EndOfString, String::new());
        }
        self.unread();
        if is_special(ch) {
            self.scan_special()
        } else {
            self.scan_identifier()
        }
    }

    fn scan_identifier(&mut self) -> (Token, String) {
        let start = self.pos;
        loop {
            let ch = self.read();
            if ch == 0 {
                break;
            }
            if is_special(ch) || is_whitespace(ch) {
                self.unread();
                break;
            }
        }
        // A NUL byte ends the identifier but is consumed, like upstream.
        let bytes: Vec<u8> = self.s[start..self.pos]
            .iter()
            .copied()
            .filter(|&b| b != 0)
            .collect();
        let lit = String::from_utf8_lossy(&bytes).into_owned();
        match keyword(&bytes) {
            Some(tok) => (tok, lit),
            None => (Token::Identifier, lit),
        }
    }

    /// Longest operator made of special symbols (`!=` rather than `!`).
    fn scan_special(&mut self) -> (Token, String) {
        let mut buf: Vec<u8> = Vec::new();
        let mut last: Option<(Token, usize)> = None;
        loop {
            let ch = self.read();
            if ch == 0 {
                break;
            }
            if !is_special(ch) {
                self.unread();
                break;
            }
            buf.push(ch);
            if let Some(tok) = keyword(&buf) {
                last = Some((tok, buf.len()));
            } else if last.is_some() {
                self.unread();
                break;
            }
        }
        match last {
            Some((tok, len)) => (tok, String::from_utf8_lossy(&buf[..len]).into_owned()),
            None => (
                Token::Error,
                format!(
                    "error expected: keyword found '{}'",
                    String::from_utf8_lossy(&buf)
                ),
            ),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    Values,
}

struct Parser {
    items: Vec<(Token, String)>,
    position: usize,
}

type Res<T> = Result<T, String>;

impl Parser {
    fn item(&self, context: Context) -> (Token, String) {
        let i = self.position.min(self.items.len().saturating_sub(1));
        let (tok, lit) = self
            .items
            .get(i)
            .cloned()
            .unwrap_or((Token::EndOfString, String::new()));
        match (context, tok) {
            (Context::Values, Token::In | Token::NotIn) => (Token::Identifier, lit),
            _ => (tok, lit),
        }
    }

    fn lookahead(&self, context: Context) -> (Token, String) {
        self.item(context)
    }

    fn consume(&mut self, context: Context) -> (Token, String) {
        let item = self.item(context);
        self.position += 1;
        item
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, ParseError> {
        let mut reqs = Vec::new();
        loop {
            let (tok, lit) = self.lookahead(Context::Values);
            match tok {
                Token::Identifier | Token::DoesNotExist => {
                    let r = self.parse_requirement().map_err(ParseError::Requirement)?;
                    reqs.push(r);
                    let (t, l) = self.consume(Context::Values);
                    match t {
                        Token::EndOfString => return Ok(reqs),
                        Token::Comma => {
                            let (t2, l2) = self.lookahead(Context::Values);
                            if t2 != Token::Identifier && t2 != Token::DoesNotExist {
                                return Err(ParseError::Syntax(format!(
                                    "found '{l2}', expected: identifier after ','"
                                )));
                            }
                        }
                        _ => {
                            return Err(ParseError::Syntax(format!(
                                "found '{l}', expected: ',' or 'end of string'"
                            )));
                        }
                    }
                }
                Token::EndOfString => return Ok(reqs),
                _ => {
                    return Err(ParseError::Syntax(format!(
                        "found '{lit}', expected: !, identifier, or 'end of string'"
                    )));
                }
            }
        }
    }

    fn parse_requirement(&mut self) -> Res<Requirement> {
        let (key, op) = self.parse_key_and_infer_operator()?;
        let (op, values) = match op {
            Some(op @ (Operator::Exists | Operator::DoesNotExist)) => (op, Vec::new()),
            _ => {
                let op = self.parse_operator()?;
                let values = match op {
                    Operator::In | Operator::NotIn => self.parse_values()?,
                    _ => self.parse_exact_value()?,
                };
                (op, values.into_iter().collect())
            }
        };
        Requirement::new(&key, op, values, &Path::default()).map_err(|e| e.aggregate_message())
    }

    fn parse_key_and_infer_operator(&mut self) -> Res<(String, Option<Operator>)> {
        let mut op = None;
        let (mut tok, mut lit) = self.consume(Context::Values);
        if tok == Token::DoesNotExist {
            op = Some(Operator::DoesNotExist);
            (tok, lit) = self.consume(Context::Values);
        }
        if tok != Token::Identifier {
            return Err(format!("found '{lit}', expected: identifier"));
        }
        let msgs = is_qualified_name(&lit);
        if !msgs.is_empty() {
            // Upstream validates with a nil path, which prints as `<nil>`.
            return Err(
                FieldError::invalid("<nil>", Value::from(lit.as_str()), msgs.join("; ")).message(),
            );
        }
        let (t, _) = self.lookahead(Context::Values);
        if (t == Token::EndOfString || t == Token::Comma) && op != Some(Operator::DoesNotExist) {
            op = Some(Operator::Exists);
        }
        Ok((lit, op))
    }

    fn parse_operator(&mut self) -> Res<Operator> {
        let (tok, lit) = self.consume(Context::KeyAndOperator);
        Ok(match tok {
            Token::In => Operator::In,
            Token::Equals => Operator::Equals,
            Token::DoubleEquals => Operator::DoubleEquals,
            Token::GreaterThan => Operator::GreaterThan,
            Token::LessThan => Operator::LessThan,
            Token::NotIn => Operator::NotIn,
            Token::NotEquals => Operator::NotEquals,
            _ => {
                return Err(format!(
                    "found '{lit}', expected: in, notin, =, ==, !=, gt, lt"
                ));
            }
        })
    }

    fn parse_values(&mut self) -> Res<BTreeSet<String>> {
        let (tok, lit) = self.consume(Context::Values);
        if tok != Token::OpenPar {
            return Err(format!("found '{lit}' expected: '('"));
        }
        let (tok, lit) = self.lookahead(Context::Values);
        match tok {
            Token::Identifier | Token::Comma => {
                let set = self.parse_identifiers_list()?;
                let (tok, _) = self.consume(Context::Values);
                if tok != Token::ClosedPar {
                    return Err(format!("found '{lit}', expected: ')'"));
                }
                Ok(set)
            }
            Token::ClosedPar => {
                self.consume(Context::Values);
                Ok(BTreeSet::from([String::new()]))
            }
            _ => Err(format!("found '{lit}', expected: ',', ')' or identifier")),
        }
    }

    fn parse_identifiers_list(&mut self) -> Res<BTreeSet<String>> {
        let mut set = BTreeSet::new();
        loop {
            let (tok, lit) = self.consume(Context::Values);
            match tok {
                Token::Identifier => {
                    set.insert(lit);
                    let (tok2, lit2) = self.lookahead(Context::Values);
                    match tok2 {
                        Token::Comma => continue,
                        Token::ClosedPar => return Ok(set),
                        _ => return Err(format!("found '{lit2}', expected: ',' or ')'")),
                    }
                }
                Token::Comma => {
                    if set.is_empty() {
                        set.insert(String::new());
                    }
                    let (tok2, _) = self.lookahead(Context::Values);
                    if tok2 == Token::ClosedPar {
                        set.insert(String::new());
                        return Ok(set);
                    }
                    if tok2 == Token::Comma {
                        set.insert(String::new());
                    }
                }
                _ => return Err(format!("found '{lit}', expected: ',', or identifier")),
            }
        }
    }

    fn parse_exact_value(&mut self) -> Res<BTreeSet<String>> {
        let (tok, _) = self.lookahead(Context::Values);
        if tok == Token::EndOfString || tok == Token::Comma {
            return Ok(BTreeSet::from([String::new()]));
        }
        let (tok, lit) = self.consume(Context::Values);
        if tok == Token::Identifier {
            Ok(BTreeSet::from([lit]))
        } else {
            Err(format!("found '{lit}', expected: identifier"))
        }
    }
}

/// Parses a selector string into its requirements, in source order.
pub(super) fn parse(s: &str) -> Result<Vec<Requirement>, ParseError> {
    let mut lexer = Lexer {
        s: s.as_bytes(),
        pos: 0,
    };
    let mut items = Vec::new();
    loop {
        let item = lexer.lex();
        let end = item.0 == Token::EndOfString;
        items.push(item);
        if end {
            break;
        }
    }
    Parser { items, position: 0 }.parse()
}
