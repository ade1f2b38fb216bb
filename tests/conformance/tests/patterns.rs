//! Differential test of the simple patterns the generator compiles to loops (`pattern.rs`,
//! emitted by `rust.rs` `compile_simple`) against `regress`, the ECMA-262 engine: for many
//! deterministic pseudo-random strings over an alphabet of boundary characters, the generated
//! validator of `{"type": "string", "pattern": P}` must agree with
//! `Regex::with_flags(P, "u").find(s).is_some()`, on both the typed and the untyped path.

use openagents_conformance::SimplePattern;
use patterns::PATTERNS;

/// The simple patterns and their generated modules, written by the build script.
mod patterns {
    use openagents_conformance::{Entry, PatternAtom, SimplePattern};
    include!(concat!(env!("OUT_DIR"), "/patterns.rs"));
}

/// Characters at the edges of the classes the patterns use: ASCII letters, digits and
/// punctuation, whitespace and line terminators, and non-ASCII of 2, 3 and 4 UTF-8 bytes.
const ALPHABET: &[char] = &[
    'a', 'b', 'c', 'x', 'z', 'A', 'Z', '0', '5', '9', '_', '-', '.', ':', '/', '@', '[', '`', '{', ' ', '\t', '\n', '\r', '\0', '\u{7f}',
    '\u{80}', '\u{a0}', 'é', 'à', 'ÿ', '€', '\u{2028}', '\u{2029}', '\u{feff}', '😀', '😂', '😃',
];

/// SplitMix64: a small deterministic generator, so every run checks the same strings.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A character of one of `ranges`: an end of a range, its neighbour, or any character in it.
fn class_char(rng: &mut Rng, ranges: &[(u32, u32)]) -> Option<char> {
    let (lo, hi) = *ranges.get(rng.below(ranges.len().max(1)))?;
    let c = match rng.below(5) {
        0 => lo,
        1 => hi,
        2 => lo.saturating_add(1).min(hi),
        3 => hi.saturating_sub(1).max(lo),
        _ => lo + (rng.next() % u64::from(hi - lo + 1)) as u32,
    };
    char::from_u32(c).or_else(|| char::from_u32(lo)).or_else(|| char::from_u32(hi))
}

/// Test strings for a pattern: the empty string; random strings of 0 to 8 characters over the
/// alphabet and the pattern's own characters; and strings built to match the compiled atoms,
/// some then mutated (a character inserted, removed or replaced) or padded on either side.
fn strings(seed: u64, p: &SimplePattern, count: usize) -> Vec<String> {
    let mut rng = Rng(seed);
    let own: Vec<char> = p.source.chars().filter(|c| !"^$\\[]{}()*+?|".contains(*c)).collect();
    let mut out = vec![String::new()];
    while out.len() < count {
        let pick = |rng: &mut Rng| {
            if !own.is_empty() && rng.below(3) == 0 { own[rng.below(own.len())] } else { ALPHABET[rng.below(ALPHABET.len())] }
        };
        if rng.below(3) == 0 {
            let len = rng.below(9);
            out.push((0..len).map(|_| pick(&mut rng)).collect());
            continue;
        }
        let mut chars: Vec<char> = Vec::new();
        for a in p.atoms {
            let spread = a.max.map_or(3, |m| (m - a.min).min(3));
            let n = a.min + rng.below(spread as usize + 1) as u32;
            for _ in 0..n {
                chars.extend(class_char(&mut rng, a.ranges));
            }
        }
        for _ in 0..rng.below(4).saturating_sub(1) {
            let at = rng.below(chars.len() + 1);
            match rng.below(3) {
                0 => chars.insert(at, pick(&mut rng)),
                1 if at < chars.len() => {
                    chars.remove(at);
                }
                _ if at < chars.len() => chars[at] = pick(&mut rng),
                _ => {}
            }
        }
        if rng.below(4) == 0 {
            chars.insert(0, pick(&mut rng));
        }
        if rng.below(4) == 0 {
            chars.push(pick(&mut rng));
        }
        out.push(chars.into_iter().collect());
    }
    out
}

#[test]
fn compiled_simple_patterns_agree_with_regress() {
    assert!(PATTERNS.len() >= 10, "the differential test needs a set of patterns");
    let mut checked = 0;
    let mut matched = 0;
    let mut disagreements = Vec::new();
    for (i, p) in PATTERNS.iter().enumerate() {
        let re = regress::Regex::with_flags(p.source, "u").expect("the pattern is valid");
        let mut seen_match = false;
        let mut seen_miss = false;
        for s in strings(0x5EED + i as u64, p, 4000) {
            let expected = re.find(&s).is_some();
            let doc = serde_json::to_string(&s).expect("a string serializes");
            let typed = (p.entry.typed)(doc.as_bytes()).is_ok();
            let dynamic = (p.entry.dynamic)(&serde_json::Value::String(s.clone())).is_empty();
            if typed != expected || dynamic != expected {
                disagreements.push(format!("pattern {:?} on {s:?}: regress {expected}, typed {typed}, untyped {dynamic}", p.source));
            }
            seen_match |= expected;
            seen_miss |= !expected;
            matched += usize::from(expected);
            checked += 1;
        }
        assert!(seen_match && seen_miss, "pattern {:?}: the strings must include matches and misses", p.source);
    }
    println!("{} patterns, {checked} strings, {matched} matches", PATTERNS.len());
    assert!(
        disagreements.is_empty(),
        "{} disagreement(s):\n{}",
        disagreements.len(),
        disagreements.iter().take(40).cloned().collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn the_generated_validators_reject_non_strings() {
    for p in PATTERNS {
        assert!((p.entry.typed)(b"1").is_err(), "{}", p.source);
        assert!(!(p.entry.dynamic)(&serde_json::json!(null)).is_empty(), "{}", p.source);
    }
}
