//! The `runner` feature alone brings no HTTP stack: a runner author who depends on
//! `openagents-sdk` with `default-features = false, features = ["runner"]` compiles neither axum
//! nor hyper. Read from cargo's own dependency graph of this workspace (`cargo tree`, offline).

use std::process::Command;

fn normal_dependencies(features: &[&str]) -> String {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut args = vec!["tree", "--offline", "--locked", "-p", "openagents-sdk", "-e", "normal", "--prefix", "none", "--no-default-features"];
    if !features.is_empty() {
        args.push("--features");
        args.push(features[0]);
    }
    let out = Command::new(cargo).args(&args).current_dir(env!("CARGO_MANIFEST_DIR")).output().expect("cargo tree runs");
    assert!(out.status.success(), "cargo tree failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn has(tree: &str, krate: &str) -> bool {
    tree.lines().any(|l| l.split_whitespace().next() == Some(krate))
}

#[test]
fn the_runner_feature_alone_brings_no_http_stack() {
    let runner = normal_dependencies(&["runner"]);
    assert!(has(&runner, "openagents-runner"), "the runner contract is there:\n{runner}");
    for http in ["axum", "hyper", "hyper-util", "tower", "openagents-server"] {
        assert!(!has(&runner, http), "`--features runner` brings {http}:\n{runner}");
    }
    // The check can see them: the default features do bring the server and its HTTP stack.
    let all = normal_dependencies(&[]);
    let default = {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let out = Command::new(cargo).args(["tree", "--offline", "--locked", "-p", "openagents-sdk", "-e", "normal", "--prefix", "none"]).current_dir(env!("CARGO_MANIFEST_DIR")).output().expect("cargo tree runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(!has(&all, "axum"), "no features, no axum:\n{all}");
    assert!(has(&default, "axum") && has(&default, "hyper"), "the default features bring the server:\n{default}");
}
