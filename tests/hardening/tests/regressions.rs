//! Every input a fuzz target (tests/fuzz, `make fuzz`) ever crashed with, replayed through the
//! same oracle (`openagents_hardening::oracles`), so each stays fixed. Add a case, with the
//! input bytes inline and a line saying what it found, before fixing what it found.

use openagents_hardening::oracles;

/// `(fuzz target, what it found, input)`.
const CASES: &[(&str, &str, &[u8])] = &[
    (
        "frame",
        "a `\\r` arriving in a read without its `\\n` counted against the limit: the same line was \
         accepted or refused depending on how the bytes were split (limit 8, buffer 1)",
        b"\xc8\x10\x07\"abc\\n\"\r\n\"abc\\2\r",
    ),
    (
        "sse_resume",
        "two `lagged` notices in a row carried the same sequence number, so the second one's \
         count started from before the events the first had already skipped: a silent gap \
         (found first by the stuck-subscriber fault test; capacity 2, bursts of 6 and 6, one \
         event taken between them)",
        b"\x01\x00\x06\x06\x01",
    ),
    (
        "ws_message",
        "a frontend without the approvals grant answering with a 257-character id got an error \
         reply echoing that id, which breaks the RpcResponse schema (ids are at most 256)",
        br#"{"id":"iiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiii","result":1}"#,
    ),
];

fn check(target: &str, input: &[u8]) {
    match target {
        "frame" => oracles::frame(input),
        "validators" => oracles::validators(input),
        "json_reader" => oracles::json_reader(input),
        "rpc_engine" => oracles::rpc_engine(input),
        "runner_events" => oracles::runner_events(input),
        "sse_resume" => oracles::sse_resume(input),
        "ws_message" => oracles::ws_message(input),
        other => panic!("no fuzz target `{other}`"),
    }
}

#[test]
fn every_crash_found_by_fuzzing_stays_fixed() {
    for (target, what, input) in CASES {
        let outcome = std::panic::catch_unwind(|| check(target, input));
        assert!(outcome.is_ok(), "{target}: {what}: input {input:?}");
    }
}

/// The seed corpora's shapes (as tests/fuzz/run.sh builds them) go through every oracle without
/// a crash: a smoke test of the oracles themselves, fast enough for every `make test`.
#[test]
fn the_oracles_accept_well_formed_inputs() {
    let request = br#"{"jsonrpc":"2.0","id":1,"method":"submit","params":{"task":"hello world"}}"#;
    oracles::rpc_engine(request);
    oracles::rpc_engine(br#"{"id":"s","method":"status"}"#);
    oracles::rpc_engine(br#"{"id":2,"method":"shutdown"}"#);
    oracles::rpc_engine(br#"{"id":3,"method":"status"}"#);
    oracles::ws_message(br#"{"jsonrpc":"2.0","id":"approval-1","result":{"approved":true}}"#);
    oracles::ws_message(br#"{"jsonrpc":"2.0","id":4,"method":"subscribe","params":{"since":0}}"#);
    oracles::runner_events(b"{\"type\":\"text\",\"text\":\"a\"}\n{\"type\":\"completed\",\"result\":\"ok\"}\n");
    oracles::runner_events(b"{\"type\":\"completed\",\"result\":\"ok\"}\n{\"type\":\"text\",\"text\":\"late\"}\n");
    oracles::sse_resume(b"\x04\x0a\x03\x02\x01 3 \xffsince=1");
    oracles::frame(b"\x04\x03abcd\r\nabcde\nab\r");
    let turn = openagents_protocol::TYPES.iter().position(|t| t.name == "Turn").expect("Turn") as u8;
    let mut doc = vec![turn];
    doc.extend_from_slice(br#"{"schema":"openagents.agent.runner.v1","assignment":"a","conversation":"c","agent":{"runner":"echo"},"task":"t","cwd":"/"}"#);
    oracles::validators(&doc);
    let mut dup = vec![turn];
    dup.extend_from_slice(br#"{"schema":"openagents.agent.runner.v1","schema":"openagents.agent.runner.v1","assignment":"a","conversation":"c","agent":{"runner":"echo"},"task":"t","cwd":"/"}"#);
    oracles::validators(&dup);
}

/// The runtime's own JSON reader against serde_json on real documents: every vector in
/// tests/vectors and every document of the published-schema corpus (ACP `session/update`
/// notifications, MCP `tools/call` requests, markdown with an escape every few bytes), each whole
/// and cut short and with a byte replaced by one that breaks JSON, at every byte (at about a hundred
/// places in a document over 1 KiB).
#[test]
fn the_json_reader_reads_real_documents_as_serde_json_does() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut docs: Vec<Vec<u8>> = Vec::new();
    for entry in std::fs::read_dir(root.join("tests/vectors")).expect("tests/vectors") {
        let path = entry.expect("an entry").path();
        if path.extension().is_some_and(|e| e == "json") {
            let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).expect("a vector file")).expect("JSON");
            for case in v["valid"].as_array().into_iter().chain(v["invalid"].as_array()).flatten() {
                docs.push(case["document"].to_string().into_bytes());
            }
        }
    }
    let corpus: serde_json::Value = serde_json::from_slice(&std::fs::read(root.join("tests/bench-published/corpus.json")).expect("the corpus")).expect("JSON");
    for set in corpus["sets"].as_array().expect("sets") {
        for doc in set["docs"].as_array().expect("docs") {
            docs.push(doc.as_str().expect("a document's text").as_bytes().to_vec());
        }
    }
    assert!(docs.len() > 200, "{} documents", docs.len());
    let mut read = 0;
    for doc in &docs {
        oracles::json_reader(doc);
        read += usize::from(openagents_protocol::rt::parse_value_exact(doc).is_ok());
        // Cut short and broken, at every byte of the shorter documents and at about a hundred places
        // in the longer ones.
        let step = if doc.len() <= 1024 { 1 } else { doc.len() / 97 };
        for cut in (0..doc.len()).step_by(step) {
            oracles::json_reader(&doc[..cut]);
            for bad in [b'"', b'\\', 0x1f] {
                let mut broken = doc.clone();
                broken[cut] = bad;
                oracles::json_reader(&broken);
            }
        }
    }
    assert!(read * 10 >= docs.len() * 9, "most documents are read ({read} of {})", docs.len());
}
