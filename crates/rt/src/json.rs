//! The JSON reader of the decoding fast path: serde's [`Deserializer`] over text already known to
//! be UTF-8, for [`crate::parse_validated`].
//!
//! It accepts a subset of what serde_json accepts and decodes what it accepts to the same values
//! (the same numbers, bit for bit, each the nearest double to its text; the same strings; the same
//! nesting limit of 127). Anything it does not read the quick way, it refuses: a number too long
//! to read here, every number when this build's serde_json does not read it as the nearest double
//! ([`rounding`]), a `\u` escape of a lone surrogate, a value asked for as a raw value, an enum,
//! bytes or a 128-bit integer, and anything that is not JSON. The caller then reads the document
//! again with serde_json, whose verdict and error messages are the ones reported. So this
//! reader's errors are never shown, and carry no position.
//!
//! A free-form object kept as text ([`crate::RawObject`]) asks by a private name ([`TEXT`]): the
//! reader checks the value as building the map would and hands over its text, building nothing.
//!
//! What it does faster than serde_json: strings. The end of a run of plain text is found eight
//! bytes at a time, a run is copied in one piece, an escape right after an escape is taken
//! without a search, a long escaped string is handed to the visitor in the buffer it was built
//! in, and no string's UTF-8 is checked again.

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::forward_to_deserialize_any;

/// The reader's error: serde_json's, so the generated decoders' errors pass through unchanged.
type Error = serde_json::Error;
type Result<T> = std::result::Result<T, Error>;

/// How deep arrays and objects may nest: serde_json's limit (it refuses the 128th level).
const DEPTH: u8 = 128;

/// How many keys of one object a value kept as text compares one by one before it keeps them
/// in a set.
const KEYS_IN_A_ROW: usize = 16;

/// The powers of ten a float's value is computed with: each exactly an `f64`.
const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// The longest number text, in bytes, read with the standard library's correct rounding.
const MAX_DIGITS: usize = 256;

/// The most an escaped string reserves at once before it knows its length.
const MAX_RESERVE: usize = 1 << 16;
/// The spare room an escaped string handed over may keep.
const SLACK: usize = 256;
/// How long an escaped string is before its buffer is handed over to the visitor rather than
/// copied.
const HAND_OVER: usize = 4096;

/// `significand` times ten to `exponent`, whose power of ten is `pow`: the nearest double when
/// both are exact doubles (at most 2^53, at most 10^22), rounded once.
#[inline]
fn times(significand: u64, exponent: i64, pow: f64) -> f64 {
    let f = significand as f64;
    if exponent >= 0 { f * pow } else { f / pow }
}

/// How the serde_json of this build turns a number's digits into a float. This crate turns on
/// its `float_roundtrip` (the nearest double, every time) for every build it is part of; without
/// it serde_json would use its own arithmetic (the significand as an `f64`, times or over a power
/// of ten), which rounds twice and can land one double away: `100.00000000000001` on 100. Feature
/// unification can also turn on `arbitrary_precision` (numbers kept as text, handed to visitors
/// otherwise), so it is asked once, by reading a number its own arithmetic gets wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rounding {
    /// The nearest double (`float_roundtrip`): the reader reads every number so too.
    Correct,
    /// Anything else (`arbitrary_precision`, or a serde_json that stopped rounding correctly):
    /// the fast reader is not used at all, and serde_json's verdict stands.
    Other,
}

/// [`Rounding`] for this build, found once.
pub(crate) fn rounding() -> Rounding {
    static FOUND: std::sync::OnceLock<Rounding> = std::sync::OnceLock::new();
    *FOUND.get_or_init(|| {
        const PROBE: &str = "9007199254740993e-7";
        let zero = serde_json::from_str::<serde_json::Value>("-0");
        let probe = serde_json::from_str::<serde_json::Value>(PROBE);
        let parts = times(9_007_199_254_740_993, -7, 1e7);
        let correct = PROBE.parse::<f64>().unwrap_or(0.0);
        match (zero, probe.ok().and_then(|v| v.as_f64())) {
            (Ok(z), Some(f)) if z.is_f64() && parts != correct && f.to_bits() == correct.to_bits() => {
                Rounding::Correct
            }
            _ => Rounding::Other,
        }
    })
}

/// A reader over one document.
pub(crate) struct Reader<'de> {
    text: &'de str,
    pos: usize,
    depth: u8,
    /// Where escaped strings are built.
    scratch: String,
}

/// A number as serde_json's parser classifies it.
enum Number {
    U64(u64),
    I64(i64),
    F64(f64),
}

/// The refusal that sends the document to serde_json. Its words are never shown.
#[cold]
fn refuse() -> Error {
    de::Error::custom("not read by the fast path")
}

/// The position of the first `"`, `\` or control character at or after `i`, or `b.len()`.
#[inline]
fn special(b: &[u8], mut i: usize) -> usize {
    while let Some(chunk) = b.get(i..i + 16) {
        let (lo, hi) = chunk.split_at(8);
        let (lo, hi) = (found(lo), found(hi));
        if lo != 0 {
            return i + (lo.trailing_zeros() / 8) as usize;
        }
        if hi != 0 {
            return i + 8 + (hi.trailing_zeros() / 8) as usize;
        }
        i += 16;
    }
    while let Some(&c) = b.get(i) {
        if c == b'"' || c == b'\\' || c < 0x20 {
            return i;
        }
        i += 1;
    }
    i
}

/// The high bit of the first byte of `chunk` (eight bytes) that is `"`, `\` or a control
/// character, with perhaps bits above it: a byte's high bit is set in each term only for the
/// lowest byte that matches or for a byte above one that does.
#[inline(always)]
fn found(chunk: &[u8]) -> u64 {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    let mut word = [0u8; 8];
    word.copy_from_slice(chunk);
    let x = u64::from_le_bytes(word);
    // Flipping bit 1 turns `"` (0x22) into 0x20 and keeps every control character below 0x20
    // (and every other byte at or above 0x21): one "below 0x21" test finds both.
    let quote_or_control = x ^ (LO * 0x02);
    let backslash = x ^ (LO * u64::from(b'\\'));
    ((quote_or_control.wrapping_sub(LO * 0x21) & !quote_or_control)
        | (backslash.wrapping_sub(LO) & !backslash))
        & HI
}

impl<'de> Reader<'de> {
    pub(crate) fn new(text: &'de str) -> Self {
        Reader {
            text,
            pos: 0,
            depth: DEPTH,
            scratch: String::new(),
        }
    }

    /// Nothing but whitespace may follow the value.
    pub(crate) fn end(&mut self) -> Result<()> {
        match self.peek() {
            None => Ok(()),
            Some(_) => Err(refuse()),
        }
    }

    #[inline]
    fn bytes(&self) -> &'de [u8] {
        self.text.as_bytes()
    }

    /// The next byte that is not whitespace, not consumed.
    #[inline]
    fn peek(&mut self) -> Option<u8> {
        let b = self.bytes();
        while let Some(&c) = b.get(self.pos) {
            match c {
                b' ' | b'\n' | b'\t' | b'\r' => self.pos += 1,
                _ => return Some(c),
            }
        }
        None
    }

    /// Consumes `word` (the rest of `null`, `true` or `false`).
    #[inline]
    fn literal(&mut self, word: &[u8]) -> Result<()> {
        let end = self.pos + word.len();
        if self.bytes().get(self.pos..end) == Some(word) {
            self.pos = end;
            Ok(())
        } else {
            Err(refuse())
        }
    }

    #[inline]
    fn enter(&mut self) -> Result<()> {
        self.depth = self.depth.saturating_sub(1);
        if self.depth == 0 {
            Err(refuse())
        } else {
            Ok(())
        }
    }

    #[inline]
    fn leave(&mut self) {
        self.depth += 1;
    }

    /// Reads a number, at its first byte.
    fn number(&mut self) -> Result<Number> {
        let b = self.bytes();
        let start = self.pos;
        let mut i = start;
        let negative = b.get(i) == Some(&b'-');
        if negative {
            i += 1;
        }
        let mut significand: u64 = 0;
        let mut overflow = false;
        let mut digit = |significand: &mut u64, c: u8| match significand
            .checked_mul(10)
            .and_then(|s| s.checked_add(u64::from(c - b'0')))
        {
            Some(s) => *significand = s,
            None => overflow = true,
        };
        match b.get(i) {
            Some(b'0') => {
                i += 1;
                if matches!(b.get(i), Some(b'0'..=b'9')) {
                    return Err(refuse());
                }
            }
            Some(&c @ b'1'..=b'9') => {
                digit(&mut significand, c);
                i += 1;
                while let Some(&c @ b'0'..=b'9') = b.get(i) {
                    digit(&mut significand, c);
                    i += 1;
                }
            }
            _ => return Err(refuse()),
        }
        let mut exponent: i64 = 0;
        let mut float = false;
        if b.get(i) == Some(&b'.') {
            float = true;
            i += 1;
            let first = i;
            while let Some(&c @ b'0'..=b'9') = b.get(i) {
                digit(&mut significand, c);
                exponent -= 1;
                i += 1;
            }
            if i == first {
                return Err(refuse());
            }
        }
        if matches!(b.get(i), Some(b'e' | b'E')) {
            float = true;
            i += 1;
            let minus = match b.get(i) {
                Some(b'-') => {
                    i += 1;
                    true
                }
                Some(b'+') => {
                    i += 1;
                    false
                }
                _ => false,
            };
            let first = i;
            let mut e: i64 = 0;
            while let Some(&c @ b'0'..=b'9') = b.get(i) {
                e = (e * 10 + i64::from(c - b'0')).min(1 << 40);
                i += 1;
            }
            if i == first {
                return Err(refuse());
            }
            exponent += if minus { -e } else { e };
        }
        self.pos = i;
        if !float && !overflow {
            if !negative {
                return Ok(Number::U64(significand));
            }
            // serde_json's rule: what does not fit an i64 once negated, and `-0`, is a float.
            let neg = (significand as i64).wrapping_neg();
            return Ok(if neg >= 0 {
                Number::F64(-(significand as f64))
            } else {
                Number::I64(neg)
            });
        }
        let pow = usize::try_from(exponent.unsigned_abs())
            .ok()
            .and_then(|e| POW10.get(e));
        let f = match (pow, overflow, rounding()) {
            // An exact significand times or over an exact power of ten, rounded once: the
            // nearest double, quickly.
            (Some(&pow), false, Rounding::Correct) if significand <= 1 << 53 => times(significand, exponent, pow),
            // The nearest double, as serde_json with `float_roundtrip` reads every number: more
            // digits than a double holds, or a power of ten past 10^22. (serde_json's correct
            // rounding looks at 768 digits at most: a longer number is left to it.)
            (_, _, Rounding::Correct) if i - start <= MAX_DIGITS => {
                match self.text[start..i].parse::<f64>() {
                    Ok(f) if f.is_finite() => f.abs(),
                    _ => return Err(refuse()),
                }
            }
            _ => return Err(refuse()),
        };
        Ok(Number::F64(if negative { -f } else { f }))
    }

    /// Reads a string, just past its opening quote: borrowed from the text when it has no escape.
    #[inline]
    fn string<V: Visitor<'de>>(&mut self, visitor: V) -> Result<V::Value> {
        let b = self.bytes();
        let start = self.pos;
        let at = special(b, start);
        match b.get(at) {
            Some(b'"') => {
                self.pos = at + 1;
                visitor.visit_borrowed_str(&self.text[start..at])
            }
            Some(b'\\') => {
                // Built in the reader's own buffer, kept from string to string; a long string
                // is handed over whole, a short one copied out as a visitor keeps it.
                let mut text = std::mem::take(&mut self.scratch);
                text.clear();
                self.escaped(start, at, &mut text)?;
                if text.len() >= HAND_OVER {
                    if text.capacity() - text.len() > SLACK {
                        text.shrink_to_fit();
                    }
                    visitor.visit_string(text)
                } else {
                    let value = visitor.visit_str(&text);
                    self.scratch = text;
                    value
                }
            }
            _ => Err(refuse()),
        }
    }

    /// Skips a string, just past its opening quote, checking its escapes.
    fn skip_string(&mut self) -> Result<()> {
        let b = self.bytes();
        let start = self.pos;
        let at = special(b, start);
        match b.get(at) {
            Some(b'"') => {
                self.pos = at + 1;
                Ok(())
            }
            Some(b'\\') => self.escaped(start, at, &mut ()),
            _ => Err(refuse()),
        }
    }

    /// Reads a string whose text starts at `start` and whose first escape is at `at` into `out`.
    #[inline(never)]
    fn escaped<O: Unescaped>(&mut self, start: usize, at: usize, out: &mut O) -> Result<()> {
        let b = self.bytes();
        let mut rest = self.text.get(start..).ok_or_else(refuse)?;
        let mut at = at - start;
        loop {
            let (run, tail) = rest.split_at_checked(at).ok_or_else(refuse)?;
            // What is left of the text bounds what is left of the string (unescaping only
            // shortens).
            out.run(run, tail.len());
            let t = tail.as_bytes();
            // Each escape's character pushed where it is known, so that pushing it is one byte.
            let len = match t.first() {
                Some(b'"') => {
                    self.pos = b.len() - t.len() + 1;
                    return Ok(());
                }
                Some(b'\\') => match t.get(1) {
                    Some(b'n') => out.char('\n', 2),
                    Some(b'"') => out.char('"', 2),
                    Some(b'\\') => out.char('\\', 2),
                    Some(b'/') => out.char('/', 2),
                    Some(b't') => out.char('\t', 2),
                    Some(b'r') => out.char('\r', 2),
                    Some(b'b') => out.char('\u{8}', 2),
                    Some(b'f') => out.char('\u{c}', 2),
                    Some(b'u') => {
                        let (c, len) = unicode(t)?;
                        out.char(c, len)
                    }
                    _ => return Err(refuse()),
                },
                _ => return Err(refuse()),
            };
            rest = tail.get(len..).ok_or_else(refuse)?;
            // Escapes come in runs (`\n\n`, `\\\\`): the next one is taken without a search.
            at = if rest.as_bytes().first() == Some(&b'\\') {
                0
            } else {
                special(rest.as_bytes(), 0)
            };
        }
    }

    /// Skips one value, refusing what serde_json would refuse.
    fn skip(&mut self) -> Result<()> {
        match self.peek() {
            Some(b'n') => self.literal(b"null"),
            Some(b't') => self.literal(b"true"),
            Some(b'f') => self.literal(b"false"),
            Some(b'-' | b'0'..=b'9') => self.number().map(drop),
            Some(b'"') => {
                self.pos += 1;
                self.skip_string()
            }
            Some(b'[') => self.seq(de::IgnoredAny).map(drop),
            Some(b'{') => self.map(de::IgnoredAny).map(drop),
            _ => Err(refuse()),
        }
    }

    #[inline]
    fn close(&mut self, c: u8) -> Result<()> {
        if self.peek() == Some(c) {
            self.pos += 1;
            Ok(())
        } else {
            Err(refuse())
        }
    }

    /// Reads an array or object, at its opening bracket, one level deeper: `read` reads what is
    /// inside, then `close` must follow.
    fn nested<T>(&mut self, close: u8, read: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        self.pos += 1;
        self.enter()?;
        let value = read(self);
        self.leave();
        let value = value?;
        self.close(close)?;
        Ok(value)
    }

    fn seq<V: Visitor<'de>>(&mut self, visitor: V) -> Result<V::Value> {
        self.nested(b']', |r| visitor.visit_seq(Items { r, first: true }))
    }

    fn map<V: Visitor<'de>>(&mut self, visitor: V) -> Result<V::Value> {
        self.nested(b'}', |r| visitor.visit_map(Items { r, first: true }))
    }

    /// A value read as [`Deserializer::deserialize_any`] reads it, when its first byte is one
    /// `first` allows: what a visitor asking for one kind of value gets (serde_json refuses the
    /// other kinds for it too).
    #[inline]
    fn only<V: Visitor<'de>>(
        &mut self,
        first: impl Fn(u8) -> bool,
        visitor: V,
    ) -> Result<V::Value> {
        match self.peek() {
            Some(c) if first(c) => self.deserialize_any(visitor),
            _ => Err(refuse()),
        }
    }

    /// The text of the next value, checked as building it would check it: JSON, no key given
    /// twice in any object, within the document's nesting limit.
    fn text_of_value(&mut self) -> Result<&'de str> {
        self.peek();
        let start = self.pos;
        self.skip_unique(&mut Vec::new())?;
        self.text.get(start..self.pos).ok_or_else(refuse)
    }

    /// Skips one value, refusing what [`crate::Skip`] refuses (a key given twice in any object)
    /// without building its strings. `keys` holds the keys of the objects being read, innermost
    /// last.
    fn skip_unique(&mut self, keys: &mut Vec<crate::Key<'de>>) -> Result<()> {
        match self.peek() {
            Some(b'[') => self.nested(b']', |r| {
                let mut items = Items { r, first: true };
                while items.more(b']')? {
                    items.r.skip_unique(keys)?;
                }
                Ok(())
            }),
            Some(b'{') => self.nested(b'}', |r| {
                let base = keys.len();
                let read = r.skip_members(keys, base);
                keys.truncate(base);
                read
            }),
            _ => self.skip(),
        }
    }

    /// An object's members for [`Reader::skip_unique`], past its `{`: its keys are compared one
    /// by one, above `base` in `keys`, until there are more than [`KEYS_IN_A_ROW`], then through
    /// a set.
    fn skip_members(&mut self, keys: &mut Vec<crate::Key<'de>>, base: usize) -> Result<()> {
        let mut items = Items { r: self, first: true };
        let mut set: Option<std::collections::HashSet<std::borrow::Cow<'de, str>>> = None;
        while items.more(b'}')? {
            let key = <crate::Key<'de> as serde::Deserialize>::deserialize(KeyReader(&mut *items.r))?;
            let twice = match &mut set {
                Some(set) => !set.insert(key.0),
                None if keys[base..].iter().any(|k| k.as_str() == key.as_str()) => true,
                None => {
                    keys.push(key);
                    if keys.len() - base > KEYS_IN_A_ROW {
                        set = Some(keys.drain(base..).map(|k| k.0).collect());
                    }
                    false
                }
            };
            if twice {
                return Err(refuse());
            }
            items.colon()?;
            items.r.skip_unique(keys)?;
        }
        Ok(())
    }

    fn visit_number<V: Visitor<'de>>(&mut self, visitor: V) -> Result<V::Value> {
        match self.number()? {
            Number::U64(n) => visitor.visit_u64(n),
            Number::I64(n) => visitor.visit_i64(n),
            Number::F64(n) => visitor.visit_f64(n),
        }
    }
}

/// A `\u` escape at the start of `t`, with the low half of a surrogate pair after it: the
/// character and how many bytes it took.
fn unicode(t: &[u8]) -> Result<(char, usize)> {
    let unit = hex4(t, 2)?;
    match unit {
        0xD800..=0xDBFF => {
            if t.get(6..8) != Some(b"\\u") {
                return Err(refuse());
            }
            let low = hex4(t, 8)?;
            if !(0xDC00..=0xDFFF).contains(&low) {
                return Err(refuse());
            }
            let c = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
            Ok((char::from_u32(c).ok_or_else(refuse)?, 12))
        }
        _ => Ok((char::from_u32(unit).ok_or_else(refuse)?, 6)),
    }
}

/// Where an escaped string's text goes: a `String`, or nowhere when the string is skipped.
trait Unescaped {
    /// A run of plain text, with at most `left` bytes of the string's text after it.
    fn run(&mut self, run: &str, left: usize);
    /// The character an escape of `len` bytes stands for; returns `len`.
    fn char(&mut self, c: char, len: usize) -> usize;
}

impl Unescaped for String {
    #[inline]
    fn run(&mut self, run: &str, left: usize) {
        if self.capacity() - self.len() < run.len() + 4 {
            // A string already long is likely longer still: room for the rest of the text at
            // once. A short one grows fourfold, so that a short string reserves little.
            let more = if self.len() >= 1024 {
                left.min(MAX_RESERVE)
            } else {
                (3 * self.capacity()).max(256)
            };
            self.reserve(run.len() + more);
        }
        self.push_str(run);
    }
    #[inline(always)]
    fn char(&mut self, c: char, len: usize) -> usize {
        self.push(c);
        len
    }
}

impl Unescaped for () {
    #[inline]
    fn run(&mut self, _run: &str, _left: usize) {}
    #[inline(always)]
    fn char(&mut self, _c: char, len: usize) -> usize {
        len
    }
}

/// Four hex digits at `at`, as a UTF-16 code unit.
#[inline]
fn hex4(b: &[u8], at: usize) -> Result<u32> {
    let digits = b.get(at..at + 4).ok_or_else(refuse)?;
    let mut n = 0u32;
    for &d in digits {
        let v = match d {
            b'0'..=b'9' => d - b'0',
            b'a'..=b'f' => d - b'a' + 10,
            b'A'..=b'F' => d - b'A' + 10,
            _ => return Err(refuse()),
        };
        n = n * 16 + u32::from(v);
    }
    Ok(n)
}

/// The name a value kept as text ([`crate::RawObject`]) asks a deserializer by. This reader
/// answers with a map of one entry, this name to the value's text ([`RawText`]), checked; any
/// other deserializer with a newtype struct, as for any name it does not know.
pub(crate) const TEXT: &str = "$openagents_rt::private::Text";

/// The name serde_json's `RawValue` asks a deserializer by, and answers as [`TEXT`] is answered:
/// how a `Box<RawValue>` is made of text already checked without serde_json reading it again.
/// Should a later serde_json ask otherwise, the value is refused here and read by serde_json.
const SERDE_RAW: &str = "$serde_json::private::RawValue";

/// A map of one entry, from a private name to the value `value` deserializes.
struct Entry<D> {
    key: &'static str,
    value: Option<D>,
}

impl<'de, D: Deserializer<'de, Error = Error>> MapAccess<'de> for Entry<D> {
    type Error = Error;
    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>> {
        if self.value.is_none() {
            return Ok(None);
        }
        seed.deserialize(de::value::BorrowedStrDeserializer::new(self.key))
            .map(Some)
    }
    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value> {
        match self.value.take() {
            Some(value) => seed.deserialize(value),
            None => Err(refuse()),
        }
    }
}

/// A value's text, already checked, as serde_json's `RawValue` asks for it.
struct RawText<'de>(&'de str);

impl<'de> Deserializer<'de> for RawText<'de> {
    type Error = Error;
    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value> {
        Err(refuse())
    }
    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        if name != SERDE_RAW {
            return Err(refuse());
        }
        visitor.visit_map(Entry {
            key: SERDE_RAW,
            value: Some(de::value::BorrowedStrDeserializer::new(self.0)),
        })
    }
    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option
        unit unit_struct seq tuple tuple_struct map struct enum identifier ignored_any
    }
}

/// Deserializer methods that read as another one does.
macro_rules! forward {
    ($to:ident => $($name:ident)*) => {
        $(
            #[inline]
            fn $name<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
                self.$to(visitor)
            }
        )*
    };
}

/// Deserializer methods left to serde_json.
macro_rules! refused {
    ($($name:ident)*) => {
        $(
            fn $name<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value> {
                Err(refuse())
            }
        )*
    };
}

impl<'de> Deserializer<'de> for &mut Reader<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.peek() {
            Some(b'n') => {
                self.literal(b"null")?;
                visitor.visit_unit()
            }
            Some(b't') => {
                self.literal(b"true")?;
                visitor.visit_bool(true)
            }
            Some(b'f') => {
                self.literal(b"false")?;
                visitor.visit_bool(false)
            }
            Some(b'-' | b'0'..=b'9') => self.visit_number(visitor),
            Some(b'"') => {
                self.pos += 1;
                self.string(visitor)
            }
            Some(b'[') => self.seq(visitor),
            Some(b'{') => self.map(visitor),
            _ => Err(refuse()),
        }
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.only(|c| matches!(c, b't' | b'f'), visitor)
    }

    fn deserialize_i64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.only(|c| matches!(c, b'-' | b'0'..=b'9'), visitor)
    }

    // Every number is read as serde_json reads it, whatever the visitor asked for: the visitor
    // checks the range. An `f32` serde_json reads at single precision, not as an `f64` rounded
    // again: left to it, as are 128-bit integers and bytes.
    forward! { deserialize_i64 => deserialize_i8 deserialize_i16 deserialize_i32 deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64 deserialize_f64 }
    refused! { deserialize_f32 deserialize_i128 deserialize_u128 deserialize_bytes deserialize_byte_buf }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.only(|c| c == b'"', visitor)
    }
    forward! { deserialize_str => deserialize_string deserialize_char deserialize_identifier }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.peek() {
            Some(b'n') => {
                self.literal(b"null")?;
                visitor.visit_none()
            }
            _ => visitor.visit_some(self),
        }
    }
    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.only(|c| c == b'n', visitor)
    }
    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        self.deserialize_unit(visitor)
    }
    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        if name == TEXT {
            let text = self.text_of_value()?;
            return visitor.visit_map(Entry {
                key: TEXT,
                value: Some(RawText(text)),
            });
        }
        // serde_json's raw values and arbitrary-precision numbers ask by a private name.
        if name.starts_with("$serde_json") {
            return Err(refuse());
        }
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.only(|c| c == b'[', visitor)
    }
    fn deserialize_tuple<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value> {
        self.deserialize_seq(visitor)
    }
    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value> {
        self.deserialize_seq(visitor)
    }
    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.only(|c| c == b'{', visitor)
    }
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        // serde_json also reads a struct from an array; that is left to it.
        self.deserialize_map(visitor)
    }
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value> {
        Err(refuse())
    }
    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.skip()?;
        visitor.visit_unit()
    }
}

/// The elements of an array or the members of an object.
struct Items<'a, 'de> {
    r: &'a mut Reader<'de>,
    first: bool,
}

impl Items<'_, '_> {
    /// Whether another element or member follows, before `close`: past its comma, at its first
    /// byte, which for a member is its key's quote. A comma with nothing after it is refused.
    #[inline]
    fn more(&mut self, close: u8) -> Result<bool> {
        match self.r.peek() {
            Some(c) if c == close => return Ok(false),
            Some(b',') if !self.first => self.r.pos += 1,
            Some(_) if self.first => {}
            _ => return Err(refuse()),
        }
        self.first = false;
        match self.r.peek() {
            None => Err(refuse()),
            Some(c) if c == close => Err(refuse()),
            Some(c) if close == b'}' && c != b'"' => Err(refuse()),
            Some(_) => Ok(true),
        }
    }

    /// The `:` between a member's key and its value.
    #[inline]
    fn colon(&mut self) -> Result<()> {
        if self.r.peek() != Some(b':') {
            return Err(refuse());
        }
        self.r.pos += 1;
        Ok(())
    }
}

impl<'de> SeqAccess<'de> for Items<'_, 'de> {
    type Error = Error;

    #[inline]
    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>> {
        if !self.more(b']')? {
            return Ok(None);
        }
        seed.deserialize(&mut *self.r).map(Some)
    }
}

impl<'de> MapAccess<'de> for Items<'_, 'de> {
    type Error = Error;

    #[inline]
    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>> {
        if !self.more(b'}')? {
            return Ok(None);
        }
        seed.deserialize(KeyReader(&mut *self.r)).map(Some)
    }

    #[inline]
    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value> {
        self.colon()?;
        seed.deserialize(&mut *self.r)
    }
}

/// An object's key, at its opening quote: read only as a string (serde_json also reads numbers
/// and booleans out of keys; a visitor that wants them is refused and left to it).
struct KeyReader<'a, 'de>(&'a mut Reader<'de>);

impl<'de> Deserializer<'de> for KeyReader<'_, 'de> {
    type Error = Error;

    #[inline]
    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.0.pos += 1;
        self.0.string(visitor)
    }

    forward! { deserialize_any => deserialize_str deserialize_string deserialize_identifier }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.0.pos += 1;
        self.0.skip_string()?;
        visitor.visit_unit()
    }

    refused! {
        deserialize_bool deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64 deserialize_u8 deserialize_u16
        deserialize_u32 deserialize_u64 deserialize_f32 deserialize_f64 deserialize_i128 deserialize_u128 deserialize_bytes
        deserialize_byte_buf deserialize_option
    }
    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _visitor: V,
    ) -> Result<V::Value> {
        Err(refuse())
    }
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value> {
        Err(refuse())
    }

    forward_to_deserialize_any! {
        char unit unit_struct seq tuple tuple_struct map struct
    }
}

#[cfg(test)]
mod tests {
    //! The reader against serde_json: on every input it accepts, serde_json accepts the same
    //! value (numbers bit for bit); and it accepts the ordinary inputs, not just a few.

    use super::Reader;
    use crate::Wire;
    use serde_json::Value;

    /// What the fast reader makes of `text`, through the generated decoders' own `Value`.
    fn ours(text: &str) -> Option<Value> {
        let mut r = Reader::new(text);
        let v = Value::decode(&mut r);
        assert!(r.pos <= text.len(), "read past the end of {text:?}");
        r.end().ok().and(v.ok())
    }

    /// What serde_json makes of it, through the same visitor.
    fn theirs(text: &str) -> Option<Value> {
        let mut de = serde_json::Deserializer::from_str(text);
        let v = Value::decode(&mut de).ok()?;
        de.end().ok().map(|()| v)
    }

    /// Asserts the reader never accepts what serde_json refuses, nor reads a value differently;
    /// returns whether it accepted.
    fn agrees(text: &str) -> bool {
        match (ours(text), theirs(text)) {
            (Some(a), Some(b)) => {
                // The text form tells -0.0 from 0.0 and every float bit for bit.
                assert_eq!(a.to_string(), b.to_string(), "read differently: {text:?}");
                true
            }
            (Some(a), None) => panic!("accepted {text:?} as {a}, which serde_json refuses"),
            (None, _) => false,
        }
    }

    #[test]
    fn numbers_read_as_serde_json_reads_them() {
        let accepted = [
            "0",
            "-0",
            "-0.0",
            "0.0",
            "1",
            "-1",
            "7e0",
            "1e22",
            "1E+2",
            "1e-7",
            "0.1",
            "4.35",
            "61.147",
            "-2.5e-3",
            "123456789012345678",
            "9007199254740993",
            "18446744073709551615",
            "-9223372036854775808",
            "-9223372036854775807",
            "1.5e-21",
            "9007199254740992e-7",
            "0e5",
            "0.000001",
            "4503599627370497e-22",
        ];
        for n in accepted {
            assert!(agrees(n), "{n} is read the quick way");
            // The correctly rounded value, whichever way serde_json was built to round.
            let float = ours(n).and_then(|v| v.as_f64());
            assert_eq!(
                float.map(f64::to_bits),
                n.parse::<f64>().ok().map(f64::to_bits),
                "{n}"
            );
            assert!(agrees(&format!("[{n}, {n}]")), "{n} in an array");
        }
        // Refused, or read as serde_json reads them: never read wrong.
        for n in [
            "01",
            "-01",
            "1.",
            ".5",
            "-",
            "1e",
            "1e+",
            "--1",
            "+1",
            "0x10",
            "1.e5",
            "NaN",
            "Infinity",
            "-Infinity",
            "18446744073709551616",
            "-9223372036854775809",
            "1e23",
            "1.0e-22",
            "1234567890123456789e-22",
            "9007199254740993e-7",
            "-9007199254740993E-7",
            "0.9007199254740993",
            "1e400",
            "-1e400",
            "5e-324",
            "1.7976931348623157e308",
            "123456789012345678901234567890",
            "0.123456789012345678901234",
            "1e99999999999",
            "0e99999999999",
            "1 2",
        ] {
            agrees(n);
        }
        assert!(!agrees("01") && !agrees("1.") && !agrees("+1"));
        // This crate turns on serde_json's `float_roundtrip`: it reads every number as the
        // nearest double, here too, where nothing else in the build asks for the feature.
        assert_eq!(
            super::rounding(),
            super::Rounding::Correct,
            "serde_json reads numbers as the nearest double"
        );
        // The probe is a number serde_json's own arithmetic (without the feature) gets wrong.
        assert_ne!(
            super::times(9_007_199_254_740_993, -7, 1e7).to_bits(),
            "9007199254740993e-7".parse::<f64>().map(f64::to_bits).ok().unwrap_or(0)
        );
        // Past 2^53 digits, past 64 bits of digits, past 10^22: read the quick way, each as the
        // nearest double. (Without `float_roundtrip`, the first ones and the bound-crossing ones
        // read as a neighbour: `100.00000000000001` as 100, `0.9999999999999999` as 1.)
        for n in [
            "0.30000000000000004",
            "9007199254740993e-7",
            "-9007199254740993E-7",
            "0.9007199254740993",
            "1234567890123456789e-22",
            "100.00000000000001",
            "0.9999999999999999",
            "11757771.948286951",
            "18446744073709551615.5",
            "123456789012345678901234567890",
            "-0.123456789012345678901234e-3",
            "1e23",
            "1.0e-22",
            "5e-324",
            "1.7976931348623157e308",
            "-9223372036854775809",
        ] {
            assert!(agrees(n), "{n} is read the quick way");
            let float = ours(n).and_then(|v| v.as_f64());
            assert_eq!(
                float.map(f64::to_bits),
                n.parse::<f64>().ok().map(f64::to_bits),
                "{n} is the nearest double"
            );
        }
        // A halfway value written with 769 digits, which serde_json's correct rounding cuts and
        // rounds up: left to it, never read otherwise.
        let long = format!("9007199254740993{}e-753", "0".repeat(753));
        assert!(!agrees(&long) || theirs(&long) == ours(&long));
    }

    #[test]
    fn strings_read_as_serde_json_reads_them() {
        let accepted = [
            r#""""#,
            r#""plain""#,
            r#""a\"b\\c\/d\be\ff\ng\rh\ti""#,
            r#""\u0000\u001f\u0020\u00e9\u4e2d\uFFFF""#,
            r#""\uD83E\uDD80 crab""#,
            r#""añb 中 🦀""#,
            r#""long run with no escape at all, longer than sixteen bytes, many times over""#,
            r#""escape at the very end\n""#,
            r#""\\\\\\\\""#,
        ];
        for s in accepted {
            assert!(agrees(s), "{s} is read the quick way");
            assert!(agrees(&format!("{{{s}: {s}}}")), "{s} as a key");
        }
        for s in [
            "\"unterminated",
            "\"raw \u{1} control\"",
            "\"raw\ttab\"",
            "\"raw\nnewline\"",
            r#""\x""#,
            r#""\u12""#,
            r#""\u12G4""#,
            r#""\uD83E""#,
            r#""\uD83E\u0041""#,
            r#""\uDD80""#,
            r#""\uD83E\uD83E""#,
            r#""\"#,
            "\"a\\",
        ] {
            assert!(!agrees(s), "{s:?} is refused");
        }
        // Long strings (handed over whole) and many short ones (built in one buffer in turn).
        let long = format!("\"{}\"", "seventeen bytes \\n".repeat(600));
        assert!(agrees(&long) && agrees(&format!("[{long},{long}]")));
        let late = format!("\"{}\\t\"", "x".repeat(9000));
        assert!(agrees(&late));
        let many = format!(
            "[{}]",
            [r#""a\n""#, r#""\u00e9\"b""#, r#""plain""#]
                .repeat(300)
                .join(",")
        );
        assert!(agrees(&many));
        // A raw control character at every place across the eight-byte words the search reads.
        for at in 0..40 {
            let mut s = "x".repeat(40);
            s.replace_range(at..=at, "\u{1f}");
            assert!(!agrees(&format!("\"{s}\"")));
            let mut e = "\\n".repeat(20);
            e.replace_range(at..=at, "\u{1f}");
            assert!(!agrees(&format!("\"{e}\"")));
        }
    }

    #[test]
    fn structure_reads_as_serde_json_reads_it() {
        for text in [
            "null",
            "true",
            "false",
            " \t\r\n[ 1 , { \"a\" : [ ] , \"b\" : { } } ] \n",
            "[]",
            "{}",
            "[[],[[]]]",
            r#"{"a":1,"b":[true,false,null],"c":{"d":"e"}}"#,
        ] {
            assert!(agrees(text), "{text} is read the quick way");
        }
        for text in [
            "",
            " ",
            "nul",
            "nulll",
            "tru",
            "[1,]",
            "[,1]",
            "[1 2]",
            "{\"a\":1,}",
            "{\"a\" 1}",
            "{1:2}",
            "{\"a\":1 \"b\":2}",
            "[",
            "]",
            "{",
            "}",
            "[1]]",
            "{}x",
            "\"a\" \"b\"",
            "{\"a\":1,\"a\":2}",
        ] {
            assert!(!agrees(text), "{text:?} is refused");
        }
        // serde_json's nesting limit, to the level.
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(agrees(&deep(127)));
        assert!(!agrees(&deep(128)));
        assert!(theirs(&deep(128)).is_none());
        let objects = |n: usize| format!("{}1{}", "{\"k\":".repeat(n), "}".repeat(n));
        assert!(agrees(&objects(127)));
        assert!(!agrees(&objects(128)));
    }

    /// A small deterministic generator (xorshift), so a failure names its seed.
    struct Gen(u64);

    impl Gen {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
        fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
            from[self.below(from.len() as u64) as usize]
        }
        fn value(&mut self, depth: u32, out: &mut String) {
            let space = [" ", "", "", "\n\t"];
            match if depth > 3 {
                self.below(4)
            } else {
                self.below(7)
            } {
                0 => out.push_str(self.pick(&["null", "true", "false"])),
                1 => {
                    let sign = self.pick(&["", "", "-"]);
                    let int = self.pick(&[
                        "0",
                        "1",
                        "42",
                        "9007199254740993",
                        "18446744073709551615",
                        "99999999999999999999",
                    ]);
                    let frac = self.pick(&[
                        "",
                        "",
                        ".5",
                        ".25",
                        ".147",
                        ".000001",
                        ".1234567890123456789",
                    ]);
                    let exp = self.pick(&["", "", "e3", "E-7", "e+22", "e-22", "e23", "e-300"]);
                    out.push_str(&format!("{sign}{int}{frac}{exp}"));
                }
                2 | 3 => self.string(out),
                4 | 5 => {
                    out.push('[');
                    for i in 0..self.below(5) {
                        if i > 0 {
                            out.push(',');
                        }
                        out.push_str(self.pick(&space));
                        self.value(depth + 1, out);
                    }
                    out.push(']');
                }
                _ => {
                    out.push('{');
                    for i in 0..self.below(5) {
                        if i > 0 {
                            out.push(',');
                        }
                        self.string(out);
                        out.push_str(self.pick(&space));
                        out.push(':');
                        self.value(depth + 1, out);
                    }
                    out.push('}');
                }
            }
        }
        fn string(&mut self, out: &mut String) {
            let pieces = [
                "a",
                "key",
                "plain text ",
                "ñ",
                "中文",
                "🦀",
                "\\n",
                "\\\"",
                "\\\\",
                "\\/",
                "\\t",
                "\\u00e9",
                "\\u0000",
                "\\uD83E\\uDD80",
                "0123456789abcdef",
                "x",
            ];
            out.push('"');
            for _ in 0..self.below(12) {
                out.push_str(self.pick(&pieces));
            }
            out.push('"');
        }
    }

    #[test]
    fn generated_documents_and_their_mutations_agree() {
        let bytes = [
            "\"", "\\", "{", "}", "[", "]", ",", ":", "0", "-", ".", "e", "u", "n", " ", "\u{1}",
            "é",
        ];
        let (mut valid, mut read) = (0, 0);
        for seed in 1..=3000u64 {
            let mut g = Gen(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
            let mut text = String::new();
            g.value(0, &mut text);
            if theirs(&text).is_some() {
                valid += 1;
                read += usize::from(agrees(&text));
            }
            for _ in 0..4 {
                let mut m = text.clone();
                let at = g.below(m.len() as u64 + 1) as usize;
                if !m.is_char_boundary(at) {
                    continue;
                }
                match g.below(3) {
                    0 if at < m.len() && m.is_char_boundary(at + 1) => {
                        m.remove(at);
                    }
                    1 => m.insert_str(at, g.pick(&bytes)),
                    _ => m.truncate(at),
                }
                agrees(&m);
            }
        }
        assert!(valid > 2000, "the generator makes JSON ({valid} of 3000)");
        // Every number the generator writes is read the quick way (only one longer than
        // `MAX_DIGITS` is left to serde_json).
        assert_eq!(read, valid, "the reader reads every one of them itself");
    }

    /// `text` decoded as `T` by the reader (`ours`) and by serde_json (`theirs`, with its error).
    fn both<T: Wire>(text: &str) -> (Option<T>, Result<T, String>) {
        let mut r = Reader::new(text);
        let ours = T::decode(&mut r).ok().filter(|_| r.end().is_ok());
        let mut de = serde_json::Deserializer::from_str(text);
        let theirs = T::decode(&mut de).and_then(|v| de.end().map(|()| v));
        (ours, theirs.map_err(|e| e.to_string()))
    }

    /// Asserts an object kept as text is accepted where a map is, by the reader and by
    /// serde_json alike, with the same value, the same error from serde_json and, from the
    /// reader, the very text; returns whether the reader read it.
    fn text_agrees(text: &str) -> bool {
        let (map_ours, map_theirs) = both::<serde_json::Map<String, Value>>(text);
        let (raw_ours, raw_theirs) = both::<crate::RawObject>(text);
        match (&raw_theirs, &map_theirs) {
            // serde_json's path builds the map, and keeps serde_json's writing of it.
            (Ok(raw), Ok(map)) => assert_eq!(raw.get(), Value::Object(map.clone()).to_string(), "{text:?}"),
            (Err(a), Err(b)) => assert_eq!(a, b, "kept as text and as a map, {text:?} is refused otherwise"),
            _ => panic!("kept as text and as a map, {text:?} is judged differently: {raw_theirs:?} {map_theirs:?}"),
        }
        assert!(map_ours.is_none() || raw_ours.is_some(), "the reader reads {text:?} as a map, not as text");
        match raw_ours {
            Some(raw) => {
                // The reader's text is the one that arrived, and reads as serde_json read it.
                assert_eq!(raw.to_map().ok().as_ref(), map_theirs.as_ref().ok(), "{text:?}");
                assert_eq!(raw.get(), text.trim_matches([' ', '\t', '\r', '\n']));
                true
            }
            None => false,
        }
    }

    #[test]
    fn objects_kept_as_text_are_checked_as_maps_are() {
        for text in [
            "{}",
            " { \"a\" : [ 1, {\"b\": null} ] } ",
            r#"{"a":"\u00e9\n","b":{"c":[true,false,-0.5e3]}}"#,
        ] {
            assert!(text_agrees(text), "{text} is read the quick way");
        }
        for text in [
            "[]",
            "1",
            "\"a\"",
            "null",
            r#"{"a":1,"a":2}"#,
            r#"{"a":{"b":1,"b":1}}"#,
            r#"{"a":[{"b":1,"b":1}]}"#,
            r#"{"a":"\ud800"}"#,
            r#"{"a":1e400}"#,
            "{\"a\":1",
            "{\"a\":1}x",
        ] {
            assert!(!text_agrees(text), "{text:?} is refused");
        }
        // Keys are compared within their own object, one by one and then through a set.
        assert!(text_agrees(r#"{"a":{"a":{"a":1},"b":[{"a":2,"b":3}]},"b":{"b":1}}"#));
        let many = |n: usize, again: Option<usize>| {
            let mut members: Vec<String> = (0..n).map(|i| format!("\"k{i}\":{{\"k{i}\":{i}}}")).collect();
            if let Some(i) = again {
                members.push(format!("\"k{i}\":0"));
            }
            format!("{{{}}}", members.join(","))
        };
        for n in [1, 15, 16, 17, 40] {
            assert!(text_agrees(&many(n, None)), "{n} keys");
            for i in [0, n / 2, n - 1] {
                assert!(!text_agrees(&many(n, Some(i))), "{n} keys, the key {i} again");
            }
        }
        let objects = |n: usize| format!("{}1{}", "{\"k\":".repeat(n), "}".repeat(n));
        assert!(text_agrees(&objects(127)));
        assert!(!text_agrees(&objects(128)));
        // Inside an array, the limit counts from the document, on both paths alike.
        let (in_ours, in_theirs) = both::<Vec<crate::RawObject>>(&format!("[{}]", objects(126)));
        assert!(in_ours.is_some() && in_ours.as_ref() == in_theirs.as_ref().ok());
        let (in_ours, in_theirs) = both::<Vec<crate::RawObject>>(&format!("[{}]", objects(127)));
        assert!(in_ours.is_none() && in_theirs.is_err());
        // Generated documents, each under a key, and their mutations.
        let (mut valid, mut read) = (0, 0);
        for seed in 1..=2000u64 {
            let mut g = Gen(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
            let mut value = String::new();
            g.value(0, &mut value);
            let text = format!("{{\"v\":{value},\"w\":[{value}]}}");
            if theirs(&text).is_some() {
                valid += 1;
                read += usize::from(text_agrees(&text));
            }
            let at = g.below(text.len() as u64 + 1) as usize;
            if text.is_char_boundary(at) {
                let mut cut = text.clone();
                cut.truncate(at);
                text_agrees(&cut);
                let mut twice = text.clone();
                twice.insert_str(at, ",\"v\":1");
                text_agrees(&twice);
            }
        }
        assert!(valid > 1000, "the generator makes JSON ({valid} of 2000)");
        assert!(read * 10 > valid * 6, "the reader reads most of them itself ({read} of {valid})");
    }

    #[test]
    fn objects_made_as_text_are_checked_as_decoded_ones_are() {
        use crate::RawObject;
        use serde::de::IntoDeserializer;
        let made = RawObject::try_from(" {\"a\": [1, {\"b\": null}]}\n".to_owned()).expect("an object");
        assert_eq!(made.get(), "{\"a\": [1, {\"b\": null}]}");
        for refused in ["[]", "1", "{\"a\":1,\"a\":2}", "{\"a\":{\"b\":1,\"b\":2}}", "{", "{} {}", "{\"a\":1e400}"] {
            assert!(RawObject::try_from(refused.to_owned()).is_err(), "{refused}");
        }
        let nested = |n: usize| {
            let mut v = Value::Null;
            for _ in 0..n {
                let mut m = serde_json::Map::new();
                m.insert("k".into(), v);
                v = Value::Object(m);
            }
            match v {
                Value::Object(m) => m,
                _ => unreachable!("n > 0"),
            }
        };
        let deepest = RawObject::from_map(&nested(127)).expect("127 levels read back");
        assert_eq!(deepest.to_map().ok(), Some(nested(127)));
        assert!(RawObject::from_map(&nested(128)).is_err());
        assert!(RawObject::try_from(Value::Object(nested(128)).to_string()).is_err());
        // A deserializer that hands a newtype struct its content (serde's value deserializers)
        // gives the members, checked as a map's.
        let members = std::collections::BTreeMap::from([("a", 1), ("b", 2)]);
        let given: Result<RawObject, serde::de::value::Error> = RawObject::decode(members.into_deserializer());
        assert_eq!(given.ok().map(|r| r.get().to_owned()).as_deref(), Some("{\"a\":1,\"b\":2}"));
        let empty = std::collections::BTreeMap::<&str, i32>::new();
        let given: Result<RawObject, serde::de::value::Error> = RawObject::decode(empty.into_deserializer());
        assert_eq!(given.ok().map(|r| r.get().to_owned()).as_deref(), Some("{}"));
    }
}
