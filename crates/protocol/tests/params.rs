//! `rt::parse_params`, what a generated service's `decode` reads a call's params with: a small
//! document that breaks its schema gets every violation, a large one (over `EXPLAIN_MAX_BYTES`)
//! the decoder's first problem only, and text the parser cannot read is not JSON.

use openagents_protocol::SubmitParams;
use openagents_protocol::rt::{self, DocumentError};

fn unknown_members(n: usize) -> String {
    let members: Vec<String> = (0..n).map(|i| format!(r#""unknown_{i}":0"#)).collect();
    format!(r#"{{"task":"x",{}}}"#, members.join(","))
}

#[test]
fn small_bad_params_get_every_violation() {
    match rt::parse_params::<SubmitParams>(&unknown_members(3)) {
        Err(DocumentError::Invalid(v)) => {
            assert_eq!(v.len(), 3, "{v:?}");
            assert!(v.iter().all(|v| v.pointer.starts_with("/unknown_")), "{v:?}");
        }
        other => panic!("expected three violations, got {other:?}"),
    }
}

#[test]
fn large_bad_params_get_their_first_problem_only() {
    let large = unknown_members(10_000);
    assert!(large.len() > rt::EXPLAIN_MAX_BYTES);
    match rt::parse_params::<SubmitParams>(&large) {
        Err(DocumentError::Invalid(v)) => {
            assert_eq!(v.len(), 1, "{v:?}");
            assert!(v[0].message.contains("first problem") && v[0].message.contains("unknown_0"), "{v:?}");
        }
        other => panic!("expected one violation, got {other:?}"),
    }
    // A large document that decodes but breaks a value rule gets the checks' own violations.
    let long_task = format!(r#"{{"task":"{}"}}"#, "t".repeat(100_000));
    match rt::parse_params::<SubmitParams>(&long_task) {
        Err(DocumentError::Invalid(v)) => assert!(v.iter().any(|v| v.pointer == "/task" && v.keyword == "maxLength"), "{v:?}"),
        other => panic!("expected a maxLength violation, got {other:?}"),
    }
    // And a valid large one decodes.
    let task = "t".repeat(90_000);
    let ok = rt::parse_params::<SubmitParams>(&format!(r#"{{"task":"{task}"}}"#)).expect("valid");
    assert_eq!(ok.task, task);
}

#[test]
fn params_the_parser_cannot_read_are_not_json() {
    for text in [r#"{"task":"\ud800"}"#.to_owned(), format!(r#"{{"task":"\ud800","pad":"{}"}}"#, "p".repeat(70_000))] {
        assert!(matches!(rt::parse_params::<SubmitParams>(&text), Err(DocumentError::NotJson(_))), "{}", &text[..40]);
    }
}
