//! The parser of client-go's JSONPath templates.
//!
//! It scans the way upstream's parser does (same terminators, same handling of quotes inside
//! filters, unions and dictionary keys re-parsed as sub-templates) so that an expression
//! upstream accepts parses here to the same steps, and one it rejects is rejected.

use super::{Node, Param};

/// Parses a template (`text{action}text...`) and returns the steps of its first part: the
/// action's nodes, or a text literal when the template starts with text.
pub(super) fn parse_template(text: &str) -> Result<Vec<Node>, String> {
    parse_nested(text, 0)
}

/// Sub-expressions (filter sides, union members) nest no deeper than this; a deeper
/// expression could only be an attempt to exhaust the stack.
const MAX_DEPTH: usize = 32;

fn parse_nested(text: &str, depth: usize) -> Result<Vec<Node>, String> {
    if depth > MAX_DEPTH {
        return Err("expression nested too deeply".to_string());
    }
    let mut p = Parser {
        input: text.chars().collect(),
        pos: 0,
        start: 0,
        parts: Vec::new(),
        depth,
    };
    p.parse_text()?;
    Ok(p.parts.into_iter().next().unwrap_or_default())
}

struct Parser {
    input: Vec<char>,
    pos: usize,
    start: usize,
    /// The template's parts: each text run or action, in order.
    parts: Vec<Vec<Node>>,
    /// How many sub-expressions enclose this one.
    depth: usize,
}

fn is_terminator(c: Option<char>) -> bool {
    match c {
        None => true,
        Some(c) => matches!(
            c,
            ' ' | '\t' | '\r' | '\n' | '.' | ',' | '[' | ']' | '$' | '@' | '{' | '}'
        ),
    }
}

fn is_alphanumeric(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

impl Parser {
    /// Parses `{text}` and returns its action, as upstream's `parseAction`.
    fn parse_action(&self, text: &str) -> Result<Vec<Node>, String> {
        parse_nested(&format!("{{{text}}}"), self.depth + 1)
    }

    fn next(&mut self) -> Option<char> {
        let c = self.input.get(self.pos).copied();
        if c.is_some() {
            self.pos += 1;
        }
        c
    }

    fn backup(&mut self, c: Option<char>) {
        if c.is_some() {
            self.pos -= 1;
        }
    }

    fn peek(&self) -> Option<char> {
        self.input.get(self.pos).copied()
    }

    fn at(&self, back: usize) -> Option<char> {
        self.pos
            .checked_sub(back)
            .and_then(|i| self.input.get(i).copied())
    }

    fn starts_with(&self, prefix: &str) -> bool {
        let mut rest = self.input.get(self.pos..).unwrap_or(&[]).iter();
        prefix.chars().all(|c| rest.next() == Some(&c))
    }

    fn consume(&mut self) -> String {
        let s: String = self.input[self.start..self.pos].iter().collect();
        self.start = self.pos;
        s
    }

    fn parse_text(&mut self) -> Result<(), String> {
        loop {
            if self.starts_with("{") {
                if self.pos > self.start {
                    let text = self.consume();
                    self.parts.push(vec![Node::Text(text)]);
                }
                self.pos += 1;
                self.consume();
                let mut action = Vec::new();
                self.parse_inside_action(&mut action)?;
                self.parts.push(action);
                continue;
            }
            if self.next().is_none() {
                break;
            }
        }
        if self.pos > self.start {
            let text = self.consume();
            self.parts.push(vec![Node::Text(text)]);
        }
        Ok(())
    }

    fn parse_inside_action(&mut self, cur: &mut Vec<Node>) -> Result<(), String> {
        loop {
            if self.starts_with("}") {
                self.pos += 1;
                self.consume();
                return Ok(());
            }
            if self.starts_with("[?(") {
                self.parse_filter(cur)?;
                continue;
            }
            if self.starts_with("..") {
                self.parse_recursive(cur)?;
                continue;
            }
            match self.next() {
                None | Some('\r' | '\n') => return Err("unclosed action".to_string()),
                Some(' ' | '@' | '$') => {
                    self.consume();
                }
                Some('[') => self.parse_array(cur)?,
                Some(q @ ('"' | '\'')) => self.parse_quote(cur, q)?,
                Some('.') => self.parse_field(cur),
                Some(c) if c == '+' || c == '-' || c.is_numeric() => {
                    self.backup(Some(c));
                    self.parse_number(cur)?;
                }
                Some(c) if is_alphanumeric(c) => {
                    self.backup(Some(c));
                    self.parse_identifier(cur);
                }
                Some(c) => return Err(format!("unrecognized character in action: {c:?}")),
            }
        }
    }

    fn parse_identifier(&mut self, cur: &mut Vec<Node>) {
        loop {
            let c = self.next();
            if is_terminator(c) {
                self.backup(c);
                break;
            }
        }
        let value = self.consume();
        cur.push(match value.as_str() {
            "true" => Node::Bool(true),
            "false" => Node::Bool(false),
            _ => Node::Identifier(value),
        });
    }

    fn parse_recursive(&mut self, cur: &mut Vec<Node>) -> Result<(), String> {
        if matches!(cur.last(), Some(Node::Recursive)) {
            return Err("invalid multiple recursive descent".to_string());
        }
        self.pos += 2;
        self.consume();
        cur.push(Node::Recursive);
        if self.peek().is_some_and(is_alphanumeric) {
            self.parse_field(cur);
        }
        Ok(())
    }

    fn parse_number(&mut self, cur: &mut Vec<Node>) -> Result<(), String> {
        if matches!(self.peek(), Some('+' | '-')) {
            self.next();
        }
        loop {
            let c = self.next();
            if !matches!(c, Some(c) if c == '.' || c.is_numeric()) {
                self.backup(c);
                break;
            }
        }
        let value = self.consume();
        if let Ok(i) = value.parse::<i64>() {
            cur.push(Node::Int(i));
        } else if let Ok(f) = value.parse::<f64>() {
            cur.push(Node::Float(f));
        } else {
            return Err(format!("cannot parse number {value}"));
        }
        Ok(())
    }

    fn parse_array(&mut self, cur: &mut Vec<Node>) -> Result<(), String> {
        loop {
            match self.next() {
                None | Some('\n') => return Err("unterminated array".to_string()),
                Some(']') => break,
                Some(_) => {}
            }
        }
        let text = self.consume();
        let inner: String = {
            let chars: Vec<char> = text.chars().collect();
            chars[1..chars.len() - 1].iter().collect()
        };
        let inner = if inner == "*" { ":".to_string() } else { inner };

        let parts: Vec<&str> = inner.split(',').collect();
        if parts.len() > 1 {
            let union = parts
                .iter()
                .map(|p| self.parse_action(&format!("[{}]", p.trim_matches(' '))))
                .collect::<Result<Vec<_>, _>>()?;
            cur.push(Node::Union(union));
            return Ok(());
        }

        if inner.len() >= 2 && inner.starts_with('\'') && inner.ends_with('\'') {
            let key = &inner[1..inner.len() - 1];
            if !key.contains('\'') {
                cur.extend(self.parse_action(&format!(".{key}"))?);
                return Ok(());
            }
        }

        cur.push(Node::Array(slice_params(&inner)?));
        Ok(())
    }

    fn parse_filter(&mut self, cur: &mut Vec<Node>) -> Result<(), String> {
        self.pos += 3;
        self.consume();
        let (mut begin, mut end) = (false, false);
        let mut pair = '"';
        loop {
            match self.next() {
                None | Some('\n') => return Err("unterminated filter".to_string()),
                Some(q @ ('"' | '\'')) => {
                    if !begin {
                        begin = true;
                        pair = q;
                        continue;
                    }
                    if self.at(2) != Some('\\') && q == pair {
                        end = true;
                    }
                }
                Some(')') if begin == end => break,
                Some(_) => {}
            }
        }
        if self.next() != Some(']') {
            return Err("unclosed array expect ]".to_string());
        }
        let text = self.consume();
        let text: String = {
            let chars: Vec<char> = text.chars().collect();
            chars[..chars.len() - 2].iter().collect()
        };
        match split_comparison(&text) {
            Some((left, op, right)) => cur.push(Node::Filter {
                left: self.parse_action(left)?,
                op: op.to_string(),
                right: self.parse_action(right)?,
            }),
            None => cur.push(Node::Filter {
                left: self.parse_action(&text)?,
                op: "exists".to_string(),
                right: Vec::new(),
            }),
        }
        Ok(())
    }

    fn parse_quote(&mut self, cur: &mut Vec<Node>, quote: char) -> Result<(), String> {
        loop {
            match self.next() {
                None | Some('\n') => return Err("unterminated quoted string".to_string()),
                Some(c) if c == quote && self.at(2) != Some('\\') => break,
                Some(_) => {}
            }
        }
        let value = self.consume();
        let text = unquote(&value).ok_or_else(|| format!("unquote string {value} error"))?;
        cur.push(Node::Text(text));
        Ok(())
    }

    fn parse_field(&mut self, cur: &mut Vec<Node>) {
        self.consume();
        loop {
            let c = self.next();
            if c == Some('\\') {
                self.next();
            } else if is_terminator(c) {
                self.backup(c);
                break;
            }
        }
        let value = self.consume();
        cur.push(if value == "*" {
            Node::Wildcard
        } else {
            Node::Field(value.replace('\\', ""))
        });
    }
}

/// Splits a filter `left op right` as upstream's `^([^!<>=]+)([!<>=]+)(.+?)$`.
fn split_comparison(text: &str) -> Option<(&str, &str, &str)> {
    let is_op = |c: char| matches!(c, '!' | '<' | '>' | '=');
    let i = text.find(is_op)?;
    if i == 0 {
        return None;
    }
    let run = text[i..].chars().take_while(|c| is_op(*c)).count();
    let mut op_end = i + run;
    if op_end == text.len() {
        // The right side needs at least one character: the regex backtracks one operator char.
        if run < 2 {
            return None;
        }
        op_end -= 1;
    }
    Some((&text[..i], &text[i..op_end], &text[op_end..]))
}

/// Slice parameters from `start:end:step` (each part `-?digits`, possibly empty).
fn slice_params(text: &str) -> Result<[Param; 3], String> {
    let parts: Vec<&str> = text.split(':').collect();
    let valid = |p: &str| {
        let digits = p.strip_prefix('-').unwrap_or(p);
        digits.chars().all(|c| c.is_ascii_digit())
    };
    if parts.len() > 3 || !parts.iter().all(|p| valid(p)) {
        return Err(format!("invalid array index {text}"));
    }
    let mut params = [Param::default(); 3];
    for i in 0..3 {
        match parts.get(i) {
            Some(p) if i == 0 && p.is_empty() => {}
            Some(p) if i > 0 && p.is_empty() => params[i].known = false,
            Some(p) => {
                params[i].known = true;
                params[i].value = p
                    .parse()
                    .map_err(|_| format!("array index {p} is not a number"))?;
            }
            None if i == 1 => {
                params[1] = Param {
                    value: params[0].value.saturating_add(1),
                    known: true,
                    derived: true,
                };
            }
            None => {}
        }
    }
    Ok(params)
}

/// Go's `strconv.Unquote`, extended to single-quoted strings (upstream's `UnquoteExtend`).
fn unquote(s: &str) -> Option<String> {
    let chars: Vec<char> = s.chars().collect();
    let quote = *chars.first()?;
    if chars.len() < 2 || chars[chars.len() - 1] != quote || !matches!(quote, '"' | '\'') {
        return None;
    }
    let body = &chars[1..chars.len() - 1];
    let mut out = String::new();
    let mut i = 0;
    while i < body.len() {
        let c = body[i];
        i += 1;
        if c == quote {
            return None;
        }
        if c != '\\' {
            out.push(c);
            continue;
        }
        let e = *body.get(i)?;
        i += 1;
        let hex = |n: usize, i: &mut usize| -> Option<char> {
            let digits: String = body.get(*i..*i + n)?.iter().collect();
            *i += n;
            char::from_u32(u32::from_str_radix(&digits, 16).ok()?)
        };
        match e {
            'a' => out.push('\u{7}'),
            'b' => out.push('\u{8}'),
            'f' => out.push('\u{c}'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            't' => out.push('\t'),
            'v' => out.push('\u{b}'),
            '\\' => out.push('\\'),
            '\'' | '"' if e == quote => out.push(e),
            'x' => out.push(hex(2, &mut i)?),
            'u' => out.push(hex(4, &mut i)?),
            'U' => out.push(hex(8, &mut i)?),
            '0'..='7' => {
                let digits: String = body.get(i - 1..i + 2)?.iter().collect();
                i += 2;
                let v = u32::from_str_radix(&digits, 8).ok().filter(|v| *v <= 255)?;
                out.push(char::from_u32(v)?);
            }
            _ => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
