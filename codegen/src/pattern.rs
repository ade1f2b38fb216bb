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
    fn from_ranges(mut ranges: Vec<(u32, u32)>) -> CharSet {
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

    fn single(c: u32) -> CharSet {
        CharSet { ranges: vec![(c, c)] }
    }

    fn complement(&self) -> CharSet {
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

    /// An escape after `\`, as a set. `in_class` allows `\-` and makes `\b` a backspace.
    fn escape(&mut self, in_class: bool) -> Option<CharSet> {
        let c = self.bump()?;
        let set = match c {
            'd' => digit(),
            'D' => digit().complement(),
            'w' => word(),
            'W' => word().complement(),
            's' => space(),
            'S' => space().complement(),
            't' => CharSet::single(9),
            'n' => CharSet::single(10),
            'v' => CharSet::single(11),
            'f' => CharSet::single(12),
            'r' => CharSet::single(13),
            'b' if in_class => CharSet::single(8),
            '-' if in_class => CharSet::single('-' as u32),
            '0' if !self.peek().is_some_and(|c| c.is_ascii_digit()) => CharSet::single(0),
            'c' => {
                let l = self.bump()?;
                if !l.is_ascii_alphabetic() {
                    return None;
                }
                CharSet::single(l as u32 % 32)
            }
            'x' => CharSet::single(self.hex(2)?),
            'u' => {
                let v = if self.eat('{') {
                    let start = self.pos;
                    while self.peek().is_some_and(|c| c.is_ascii_hexdigit()) {
                        self.pos += 1;
                    }
                    let text: String = self.chars[start..self.pos].iter().collect();
                    if !self.eat('}') {
                        return None;
                    }
                    u32::from_str_radix(&text, 16).ok()?
                } else {
                    self.hex(4)?
                };
                // Surrogates (and pairs of them) are left to the engine.
                if (0xD800..=0xDFFF).contains(&v) || v > MAX_CHAR {
                    return None;
                }
                CharSet::single(v)
            }
            c if SYNTAX.contains(c) => CharSet::single(c as u32),
            _ => return None,
        };
        Some(set)
    }

    fn class(&mut self) -> Option<CharSet> {
        let negated = self.eat('^');
        let mut ranges = Vec::new();
        let mut first = true;
        loop {
            let c = self.bump()?;
            if c == ']' && !first {
                break;
            }
            if c == ']' {
                // `[]` matches nothing and `[^]` everything; leave both to the engine.
                return None;
            }
            first = false;
            let lo = if c == '\\' {
                self.escape(true)?
            } else if c == '[' {
                return None;
            } else {
                CharSet::single(c as u32)
            };
            if self.peek() == Some('-') && self.chars.get(self.pos + 1).is_some_and(|&n| n != ']') {
                self.pos += 1;
                let c2 = self.bump()?;
                let hi = if c2 == '\\' {
                    self.escape(true)?
                } else {
                    CharSet::single(c2 as u32)
                };
                // A range needs single characters at both ends.
                let (a, b) = match (lo.ranges.as_slice(), hi.ranges.as_slice()) {
                    ([(a, a2)], [(b, b2)]) if a == a2 && b == b2 => (*a, *b),
                    _ => return None,
                };
                if a > b {
                    return None;
                }
                ranges.push((a, b));
            } else {
                ranges.extend(lo.ranges);
            }
        }
        let set = CharSet::from_ranges(ranges);
        Some(if negated { set.complement() } else { set })
    }

    fn quantifier(&mut self) -> Option<(u32, Option<u32>)> {
        let q = match self.peek() {
            Some('*') => {
                self.pos += 1;
                (0, None)
            }
            Some('+') => {
                self.pos += 1;
                (1, None)
            }
            Some('?') => {
                self.pos += 1;
                (0, Some(1))
            }
            Some('{') => {
                self.pos += 1;
                let min = self.number()?;
                let max = if self.eat(',') {
                    if self.peek() == Some('}') { None } else { Some(self.number()?) }
                } else {
                    Some(min)
                };
                if !self.eat('}') || max.is_some_and(|m| m < min) {
                    return None;
                }
                (min, max)
            }
            _ => (1, Some(1)),
        };
        // A lazy quantifier is left to the engine.
        if q != (1, Some(1)) && self.peek() == Some('?') {
            return None;
        }
        Some(q)
    }
}

fn parse_simple(source: &str) -> Option<Simple> {
    let mut p = Parser { chars: source.chars().collect(), pos: 0, _src: source };
    let anchored_start = p.eat('^');
    let mut atoms = Vec::new();
    let mut anchored_end = false;
    while let Some(c) = p.bump() {
        let set = match c {
            '$' if p.peek().is_none() => {
                anchored_end = true;
                break;
            }
            '.' => dot(),
            '\\' => p.escape(false)?,
            '[' => p.class()?,
            c if "^$*+?()]{}|".contains(c) => return None,
            c => CharSet::single(c as u32),
        };
        let (min, max) = p.quantifier()?;
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
    fn invalid_patterns_are_refused() {
        assert!(analyze("^(a$").is_err());
        assert!(analyze("[z-a]").is_err());
    }
}
