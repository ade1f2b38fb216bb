//! `openagents_rt::utf8` gives the standard library's verdict and offset on every input: valid
//! text in every script, and each way bytes fail to be UTF-8, at every position and across the
//! block boundaries a vectorised check works in.

use openagents_rt::utf8;

fn std_verdict(b: &[u8]) -> Result<&str, usize> {
    std::str::from_utf8(b).map_err(|e| e.valid_up_to())
}

/// Bytes that are not UTF-8 between two characters: a stray continuation byte, a
/// lead byte cut short, an overlong encoding, a surrogate, a code point past U+10FFFF, bytes
/// that never occur.
const BROKEN: &[&[u8]] = &[
    b"\x80",
    b"\xbf",
    b"\xc3",
    b"\xe2\x82",
    b"\xf0\x9f\x98",
    b"\xc0\xaf",
    b"\xe0\x80\xaf",
    b"\xf0\x80\x80\xaf",
    b"\xed\xa0\x80",
    b"\xed\xbf\xbf",
    b"\xf4\x90\x80\x80",
    b"\xf5\x80\x80\x80",
    b"\xfe",
    b"\xff",
];

#[test]
fn valid_text_in_every_script_is_text() {
    let pieces = ["plain ascii ", "ñandú ", "Ελληνικά ", "кириллица ", "中文字符 ", "日本語 ", "한국어 ", "עברית ", "عربى ", "emoji 🦀🎉 ", "\u{7f}\u{80}\u{7ff}\u{800}\u{ffff}\u{10000}\u{10ffff}"];
    let mut text = String::new();
    for round in 0..40 {
        text.push_str(pieces[round % pieces.len()]);
        for cut in 0..=text.len() {
            if let Some(prefix) = text.get(..cut) {
                assert_eq!(utf8(prefix.as_bytes()), Ok(prefix));
            }
        }
    }
    assert!(text.len() > 512, "the text spans several blocks");
}

#[test]
fn each_break_is_found_where_the_standard_library_finds_it() {
    let base = "ab ñ 中 🦀 ".repeat(20);
    let mut checked = 0;
    for broken in BROKEN {
        for at in (0..=base.len()).filter(|&at| base.is_char_boundary(at)) {
            let mut bytes = base.as_bytes()[..at].to_vec();
            bytes.extend_from_slice(broken);
            bytes.extend_from_slice(base.as_bytes());
            let expected = std_verdict(&bytes);
            assert!(expected.is_err(), "{broken:?} at {at} is broken");
            assert_eq!(utf8(&bytes), expected, "{broken:?} inserted at byte {at}");
            checked += 1;
        }
    }
    assert_eq!(checked, BROKEN.len() * (base.chars().count() + 1));
}

#[test]
fn pseudo_random_bytes_get_the_same_verdict() {
    // A fixed xorshift sequence: mostly bytes that UTF-8 allows, so that breaks land at every
    // depth of long inputs, not only at their start.
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let (mut valid, mut invalid) = (0, 0);
    for _ in 0..4000 {
        let len = (next() % 300) as usize;
        let mut bytes = Vec::with_capacity(len);
        while bytes.len() < len {
            let r = next();
            match r % 16 {
                0 => bytes.push((r >> 8) as u8),
                1..=3 => bytes.extend_from_slice("é中🦀".as_bytes().get(((r >> 8) % 9) as usize..).unwrap_or_default()),
                _ => bytes.push(b'a' + ((r >> 8) % 26) as u8),
            }
        }
        let expected = std_verdict(&bytes);
        if expected.is_ok() {
            valid += 1;
        } else {
            invalid += 1;
        }
        assert_eq!(utf8(&bytes), expected, "{bytes:?}");
    }
    assert!(valid > 100 && invalid > 100, "both verdicts are exercised: {valid} valid, {invalid} invalid");
}
