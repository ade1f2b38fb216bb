//! ECMA-262 `pattern`s: checked with `regress` (an ECMA engine) at generation time, and compiled
//! to plain loops over bytes or chars when they are a simple sequence of character classes.
//!
//! A pattern is *simple* when it is an optional `^`, a sequence of atoms (a literal, an escape,
//! `.`, or a bracket class) each with an optional greedy quantifier, and an optional `$`, and
//! when a greedy scan without backtracking is exact for it: every atom whose count may vary
//! shares no character with the atoms that could take the next character. Everything else runs
//! on `regress` at run time.

/// A `pattern` and, when possible, its compiled form.
#[derive(Debug, Clone, PartialEq)]
pub struct Pattern {
    /// The ECMA-262 source, as written in the schema.
    pub source: String,
    /// The compiled form, when the pattern is simple.
    pub simple: Option<Simple>,
}

/// A simple pattern: a greedy sequence of character-class atoms.
#[derive(Debug, Clone, PartialEq)]
pub struct Simple {
    /// Starts with `^`.
    pub anchored_start: bool,
    /// Ends with `$`.
    pub anchored_end: bool,
    /// The atoms in order.
    pub atoms: Vec<Atom>,
}

/// One character class with a repetition count.
#[derive(Debug, Clone, PartialEq)]
pub struct Atom {
    /// The characters the atom takes.
    pub set: CharSet,
    /// The fewest repetitions.
    pub min: u32,
    /// The most repetitions; `None` for no limit.
    pub max: Option<u32>,
}

/// A set of Unicode scalar values, as sorted, disjoint, non-adjacent inclusive ranges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CharSet {
    /// The ranges.
    pub ranges: Vec<(u32, u32)>,
}

const MAX_CHAR: u32 = 0x10FFFF;

impl CharSet {
    /// The set of the given ranges (in any order, overlapping or not).
    pub fn from_ranges(mut ranges: Vec<(u32, u32)>) -> CharSet {
        ranges.sort_unstable();
        let mut out: Vec<(u32, u32)> = Vec::with_capacity(ranges.len());
        for (lo, hi) in ranges {
            match out.last_mut() {
                Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
                _ => out.push((lo, hi)),
            }
        }
        CharSet { ranges: out }
    }

    /// The set of one character.
    pub fn single(c: u32) -> CharSet {
        CharSet { ranges: vec![(c, c)] }
    }

    /// Every character not in the set.
    pub fn complement(&self) -> CharSet {
        let mut out = Vec::new();
        let mut next = 0u32;
        for &(lo, hi) in &self.ranges {
            if lo > next {
                out.push((next, lo - 1));
            }
            next = hi + 1;
        }
        if next <= MAX_CHAR {
            out.push((next, MAX_CHAR));
        }
        CharSet { ranges: out }
    }

    /// Whether every character of the set is ASCII.
    pub fn is_ascii(&self) -> bool {
        self.ranges.last().is_none_or(|&(_, hi)| hi < 0x80)
    }

    /// Whether the two sets share a character.
    pub fn intersects(&self, other: &CharSet) -> bool {
        let (mut i, mut j) = (0, 0);
        while i < self.ranges.len() && j < other.ranges.len() {
            let (a, b) = (self.ranges[i], other.ranges[j]);
            if a.1 < b.0 {
                i += 1;
            } else if b.1 < a.0 {
                j += 1;
            } else {
                return true;
            }
        }
        false
    }

    /// Whether `c` is in the set.
    pub fn contains(&self, c: u32) -> bool {
        self.ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi)
    }
}

/// Checks `source` with `regress` in Unicode mode and compiles it when it is simple.
///
/// # Errors
///
/// The engine's message when the pattern is not a valid ECMA-262 regular expression.
pub fn analyze(source: &str) -> Result<Pattern, String> {
    regress::Regex::with_flags(source, "u").map_err(|e| e.to_string())?;
    Ok(Pattern {
        source: source.to_owned(),
        simple: parse_simple(source).filter(greedy_is_exact),
    })
}

fn greedy_is_exact(p: &Simple) -> bool {
    for (i, atom) in p.atoms.iter().enumerate() {
        if atom.max == Some(atom.min) {
            continue;
        }
        for next in &p.atoms[i + 1..] {
            if atom.set.intersects(&next.set) {
                return false;
            }
            if next.min >= 1 {
                break;
            }
        }
    }
    true
}

fn digit() -> CharSet {
    CharSet::from_ranges(vec![(0x30, 0x39)])
}

fn word() -> CharSet {
    CharSet::from_ranges(vec![(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)])
}

/// ECMA-262 WhiteSpace and LineTerminator.
fn space() -> CharSet {
    CharSet::from_ranges(vec![
        (0x09, 0x0D),
        (0x20, 0x20),
        (0xA0, 0xA0),
        (0x1680, 0x1680),
        (0x2000, 0x200A),
        (0x2028, 0x2029),
        (0x202F, 0x202F),
        (0x205F, 0x205F),
        (0x3000, 0x3000),
        (0xFEFF, 0xFEFF),
    ])
}

fn dot() -> CharSet {
    CharSet::from_ranges(vec![(0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)]).complement()
}

const SYNTAX: &str = "^$\\.*+?()[]{}|/";

/// A property escape, `\p{name}` or `\P{name}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Property {
    /// `\P`: every character without the property.
    pub negated: bool,
    /// What is between the braces (`Letter`, `Script=Greek`, ...).
    pub name: String,
}

/// What a group opened with `(` is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Group {
    /// `(`…`)`.
    Capture,
    /// `(?<name>`…`)`.
    Named(String),
    /// `(?:`…`)`.
    NonCapture,
    /// `(?=`…`)`.
    Lookahead,
    /// `(?!`…`)`.
    NegativeLookahead,
    /// `(?<=`…`)`.
    Lookbehind,
    /// `(?<!`…`)`.
    NegativeLookbehind,
}

/// One piece of an ECMA-262 pattern (Unicode mode, no flags), as [`tokens`] reads it. This is
/// the one parser of patterns: the simple-pattern compiler here and the Python emitter's
/// translation to `re` both read these tokens.
#[derive(Debug, Clone, PartialEq)]
pub enum Token {
    /// One character (written as itself or as an escape), a class escape (`\d`, `\W`, …) or `.`.
    Set(CharSet),
    /// One code point written as a `\uXXXX\uXXXX` surrogate pair.
    SurrogatePair(u32),
    /// A `\u` escape for a lone surrogate, which is no Unicode scalar value.
    LoneSurrogate(u32),
    /// A bracket class: its items' characters (before `^` negates them) and its property escapes.
    Class {
        /// `[^`…`]`.
        negated: bool,
        /// The characters the items name (property escapes aside), before negation.
        set: CharSet,
        /// The property escapes among the items, in order.
        properties: Vec<Property>,
        /// Whether an item is a surrogate escape (a pair or a lone one).
        surrogates: bool,
        /// Whether an item is a lone surrogate escape.
        lone_surrogate: bool,
    },
    /// A property escape outside a class.
    Property(Property),
    /// `\b` (false) or `\B` (true).
    WordBoundary(bool),
    /// `^`.
    Start,
    /// `$`.
    End,
    /// `(`, `(?:`, `(?=`, `(?!`, `(?<=`, `(?<!` or `(?<name>`.
    Open(Group),
    /// `)`.
    Close,
    /// `|`.
    Or,
    /// `*`, `+`, `?`, `{n}`, `{n,}` or `{n,m}`, perhaps lazy (`?` after it).
    Quantifier {
        /// The fewest repetitions.
        min: u32,
        /// The most repetitions; `None` for no limit.
        max: Option<u32>,
        /// Followed by `?`.
        lazy: bool,
        /// The quantifier as written (`{2,5}?`).
        source: String,
    },
    /// `\1`…`\9…` or `\k<name>`.
    Backreference(Reference),
}

/// The group a backreference names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reference {
    /// `\1`…: the group of that number (capturing groups, named ones included, counted by
    /// their opening parenthesis).
    Number(u32),
    /// `\k<name>` (an empty name for a `\k` without one).
    Name(String),
}

/// What one escape (after `\`) stands for.
enum Escape {
    Set(CharSet),
    Pair(u32),
    Lone(u32),
    Property(Property),
    Boundary(bool),
    Backreference(Reference),
}

struct Parser<'a> {
    chars: Vec<char>,
    pos: usize,
    _src: &'a str,
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }
    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += 1;
        Some(c)
    }
    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn number(&mut self) -> Option<u32> {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        if self.pos == start {
            return None;
        }
        self.chars[start..self.pos].iter().collect::<String>().parse().ok()
    }

    fn hex(&mut self, n: usize) -> Option<u32> {
        let mut v = 0u32;
        for _ in 0..n {
            v = v * 16 + self.bump()?.to_digit(16)?;
        }
        Some(v)
    }

    /// Text up to (not including) `end`, which is consumed.
    fn until(&mut self, end: char) -> Option<String> {
        let start = self.pos;
        while self.peek()? != end {
            self.pos += 1;
        }
        let text = self.chars[start..self.pos].iter().collect();
        self.pos += 1;
        Some(text)
    }

    /// An escape after `\`. `in_class` allows `\-` and makes `\b` a backspace.
    fn escape(&mut self, in_class: bool) -> Result<Escape, String> {
        let c = self.bump().ok_or("a pattern cannot end with `\\`")?;
        let single = |v: u32| Escape::Set(CharSet::single(v));
        Ok(match c {
            'd' => Escape::Set(digit()),
            'D' => Escape::Set(digit().complement()),
            'w' => Escape::Set(word()),
            'W' => Escape::Set(word().complement()),
            's' => Escape::Set(space()),
            'S' => Escape::Set(space().complement()),
            't' => single(9),
            'n' => single(10),
            'v' => single(11),
            'f' => single(12),
            'r' => single(13),
            '0' => single(0),
            'b' if in_class => single(8),
            'b' => Escape::Boundary(false),
            'B' if !in_class => Escape::Boundary(true),
            '-' if in_class => single('-' as u32),
            'c' => {
                let l = self.bump().filter(char::is_ascii_alphabetic).ok_or("`\\c` needs a letter")?;
                single(l as u32 % 32)
            }
            'x' => single(self.hex(2).ok_or("`\\x` needs two hex digits")?),
            'u' => {
                if self.eat('{') {
                    let text = self.until('}').ok_or("unclosed `\\u{`")?;
                    let v = u32::from_str_radix(&text, 16).ok().filter(|v| *v <= MAX_CHAR).ok_or("bad `\\u{...}`")?;
                    return Ok(if (0xD800..0xE000).contains(&v) { Escape::Lone(v) } else { single(v) });
                }
                let v = self.hex(4).ok_or("`\\u` needs four hex digits")?;
                if (0xD800..0xDC00).contains(&v) && self.chars.get(self.pos) == Some(&'\\') && self.chars.get(self.pos + 1) == Some(&'u') {
                    let save = self.pos;
                    self.pos += 2;
                    match self.hex(4).filter(|lo| (0xDC00..0xE000).contains(lo)) {
                        Some(lo) => return Ok(Escape::Pair(0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00))),
                        None => self.pos = save,
                    }
                }
                if (0xD800..0xE000).contains(&v) { Escape::Lone(v) } else { single(v) }
            }
            'p' | 'P' => {
                if !self.eat('{') {
                    return Err("`\\p` needs `{...}`".into());
                }
                let name = self.until('}').ok_or("unclosed `\\p{`")?;
                Escape::Property(Property { negated: c == 'P', name })
            }
            'k' => {
                let name = if self.eat('<') { self.until('>').ok_or("unclosed `\\k<`")? } else { String::new() };
                Escape::Backreference(Reference::Name(name))
            }
            '1'..='9' => {
                let mut n = c.to_digit(10).unwrap_or_default();
                while let Some(d) = self.peek().and_then(|c| c.to_digit(10)) {
                    n = n.saturating_mul(10).saturating_add(d);
                    self.pos += 1;
                }
                Escape::Backreference(Reference::Number(n))
            }
            c if SYNTAX.contains(c) => single(c as u32),
            c => return Err(format!("`\\{c}` is not a valid escape in Unicode mode")),
        })
    }

    /// One class item's characters (after its first character `c`), and whether it is a
    /// surrogate escape (and a lone one).
    fn class_atom(&mut self, c: char, properties: &mut Vec<Property>) -> Result<Option<(CharSet, bool, bool)>, String> {
        if c != '\\' {
            return Ok(Some((CharSet::single(c as u32), false, false)));
        }
        Ok(Some(match self.escape(true)? {
            Escape::Set(s) => (s, false, false),
            Escape::Pair(v) => (CharSet::single(v), true, false),
            Escape::Lone(v) => (CharSet::single(v), true, true),
            Escape::Property(p) => {
                properties.push(p);
                return Ok(None);
            }
            Escape::Boundary(_) | Escape::Backreference(_) => return Err("unsupported escape in a class".into()),
        }))
    }

    /// A bracket class, after `[`.
    fn class(&mut self) -> Result<Token, String> {
        let negated = self.eat('^');
        let (mut ranges, mut properties) = (Vec::new(), Vec::new());
        let (mut surrogates, mut lone_surrogate) = (false, false);
        loop {
            let c = self.bump().ok_or("unclosed `[`")?;
            if c == ']' {
                break;
            }
            let Some((lo, s1, l1)) = self.class_atom(c, &mut properties)? else { continue };
            if self.peek() == Some('-') && self.chars.get(self.pos + 1).is_some_and(|&n| n != ']') {
                self.pos += 1;
                let c2 = self.bump().ok_or("unclosed `[`")?;
                let Some((hi, s2, l2)) = self.class_atom(c2, &mut Vec::new())? else { return Err("a class range needs single characters at both ends".into()) };
                let (a, b) = match (lo.ranges.as_slice(), hi.ranges.as_slice()) {
                    ([(a, a2)], [(b, b2)]) if a == a2 && b == b2 && a <= b => (*a, *b),
                    _ => return Err("a class range needs single characters at both ends".into()),
                };
                ranges.push((a, b));
                surrogates |= s1 || s2;
                lone_surrogate |= l1 || l2;
            } else {
                ranges.extend(lo.ranges);
                surrogates |= s1;
                lone_surrogate |= l1;
            }
        }
        Ok(Token::Class { negated, set: CharSet::from_ranges(ranges), properties, surrogates, lone_surrogate })
    }

    /// A quantifier starting with `c` (already read).
    fn quantifier(&mut self, c: char) -> Result<Token, String> {
        let start = self.pos - 1;
        let (min, max) = match c {
            '*' => (0, None),
            '+' => (1, None),
            '?' => (0, Some(1)),
            _ => {
                let bad = "a `{` that is not a quantifier `{n}`, `{n,}` or `{n,m}`";
                let min = self.number().ok_or(bad)?;
                let max = if self.eat(',') {
                    if self.peek() == Some('}') { None } else { Some(self.number().ok_or(bad)?) }
                } else {
                    Some(min)
                };
                if !self.eat('}') || max.is_some_and(|m| m < min) {
                    return Err(bad.into());
                }
                (min, max)
            }
        };
        let lazy = self.eat('?');
        Ok(Token::Quantifier { min, max, lazy, source: self.chars[start..self.pos].iter().collect() })
    }

    fn group(&mut self) -> Result<Group, String> {
        if !self.eat('?') {
            return Ok(Group::Capture);
        }
        Ok(match self.bump() {
            Some(':') => Group::NonCapture,
            Some('=') => Group::Lookahead,
            Some('!') => Group::NegativeLookahead,
            Some('<') if self.eat('=') => Group::Lookbehind,
            Some('<') if self.eat('!') => Group::NegativeLookbehind,
            Some('<') => Group::Named(self.until('>').ok_or("unclosed group name")?),
            _ => return Err("unknown group syntax".into()),
        })
    }
}

/// Reads an ECMA-262 pattern (Unicode mode) into tokens.
///
/// # Errors
///
/// What cannot be read; [`analyze`] checks a pattern with `regress` first, so a pattern it
/// accepts reads.
pub fn tokens(source: &str) -> Result<Vec<Token>, String> {
    let mut p = Parser { chars: source.chars().collect(), pos: 0, _src: source };
    let mut out = Vec::new();
    while let Some(c) = p.bump() {
        out.push(match c {
            '\\' => match p.escape(false)? {
                Escape::Set(s) => Token::Set(s),
                Escape::Pair(v) => Token::SurrogatePair(v),
                Escape::Lone(v) => Token::LoneSurrogate(v),
                Escape::Property(prop) => Token::Property(prop),
                Escape::Boundary(negated) => Token::WordBoundary(negated),
                Escape::Backreference(r) => Token::Backreference(r),
            },
            '^' => Token::Start,
            '$' => Token::End,
            '.' => Token::Set(dot()),
            '(' => Token::Open(p.group()?),
            ')' => Token::Close,
            '|' => Token::Or,
            '*' | '+' | '?' | '{' => p.quantifier(c)?,
            '[' => p.class()?,
            c => Token::Set(CharSet::single(c as u32)),
        });
    }
    Ok(out)
}

/// The simple form of a pattern's tokens: an optional `^`, atoms (a character, a class escape,
/// `.`, or a bracket class without property or surrogate escapes, never `[]` or `[^]`) each with
/// an optional greedy quantifier, and an optional `$` at the end.
fn parse_simple(source: &str) -> Option<Simple> {
    let toks = tokens(source).ok()?;
    let mut it = toks.into_iter().peekable();
    let anchored_start = it.next_if_eq(&Token::Start).is_some();
    let mut atoms = Vec::new();
    let mut anchored_end = false;
    while let Some(t) = it.next() {
        let set = match t {
            Token::End if it.peek().is_none() => {
                anchored_end = true;
                break;
            }
            Token::Set(s) => s,
            Token::Class { negated, set, properties, surrogates: false, .. } if properties.is_empty() && !set.ranges.is_empty() => {
                if negated { set.complement() } else { set }
            }
            _ => return None,
        };
        let (min, max) = match it.peek() {
            Some(Token::Quantifier { lazy: true, .. }) => return None,
            Some(&Token::Quantifier { min, max, .. }) => {
                it.next();
                (min, max)
            }
            _ => (1, Some(1)),
        };
        atoms.push(Atom { set, min, max });
    }
    Some(Simple { anchored_start, anchored_end, atoms })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(src: &str, simple: bool) {
        let p = analyze(src).unwrap();
        assert_eq!(p.simple.is_some(), simple, "{src}: {:?}", p.simple);
    }

    #[test]
    fn which_patterns_compile() {
        check("^[A-Za-z0-9][A-Za-z0-9._:-]*$", true);
        check("^/[^\\u0000]*$", true);
        check("^a*$", true);
        check("a+", true);
        check("^\\d{3}-\\d{4}$", true);
        check("^a*a$", false);
        check("^(a|b)$", false);
        check("^\\p{Letter}+$", false);
        check("^a*?$", false);
        check("^\\ud83d\\udc32*$", false);
    }

    #[test]
    fn more_simple_and_general_patterns() {
        check("^[[]*$", true);
        check("^[]$", false);
        check("^[^]$", false);
        check("^[\\p{Lu}a]$", false);
        check("^a{2,}b$", true);
        check("^a{2,}?$", false);
        check("a$b", false);
    }

    #[test]
    fn one_parser_reads_every_construct() {
        let t = tokens("^(?<n>a|\\ud83d\\ude00)(?:[^\\p{Lu}b-d]\\b){2,3}?\\1$").unwrap();
        assert_eq!(t[0], Token::Start);
        assert_eq!(t[1], Token::Open(Group::Named("n".into())));
        assert_eq!(t[2], Token::Set(CharSet::single('a' as u32)));
        assert_eq!(t[3], Token::Or);
        assert_eq!(t[4], Token::SurrogatePair(0x1F600));
        assert_eq!(t[5], Token::Close);
        assert_eq!(t[6], Token::Open(Group::NonCapture));
        let Token::Class { negated: true, set, properties, surrogates: false, lone_surrogate: false } = &t[7] else { panic!("{:?}", t[7]) };
        assert_eq!(set.ranges, vec![(0x62, 0x64)]);
        assert_eq!(properties, &vec![Property { negated: false, name: "Lu".into() }]);
        assert_eq!(t[8], Token::WordBoundary(false));
        assert_eq!(t[9], Token::Close);
        assert_eq!(t[10], Token::Quantifier { min: 2, max: Some(3), lazy: true, source: "{2,3}?".into() });
        assert_eq!(t[11], Token::Backreference(Reference::Number(1)));
        assert_eq!(t[12], Token::End);
        assert_eq!(t.len(), 13);
        assert_eq!(tokens("\\ud800").unwrap(), vec![Token::LoneSurrogate(0xD800)]);
        assert_eq!(tokens("(?<!a)").unwrap()[0], Token::Open(Group::NegativeLookbehind));
    }

    #[test]
    fn invalid_patterns_are_refused() {
        assert!(analyze("^(a$").is_err());
        assert!(analyze("[z-a]").is_err());
    }
}
