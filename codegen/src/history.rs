//! The protocol's history: versions, the frozen bundles in `schema/history/<version>/`, the
//! gate that checks the schema against them (and each frozen bundle against its
//! `schema/CHANGELOG.md` entry), and `freeze`, which writes a new one. The gate's verdicts come
//! from the compatibility checker ([`crate::compat`]).

use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::Config;
use crate::compat::{Verdict, compare};
use crate::error::SchemaError;
use crate::model::TypeSpace;

/// A protocol version, `MAJOR.MINOR.PATCH`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    /// Bumped for any breaking change, in either direction.
    pub major: u64,
    /// Bumped for compatible additions (methods, optional fields, event kinds, error codes).
    pub minor: u64,
    /// Bumped for changes no reader or writer can tell (descriptions).
    pub patch: u64,
}

impl Version {
    /// Parses `MAJOR.MINOR.PATCH` (digits only).
    pub fn parse(s: &str) -> Option<Version> {
        let mut parts = s.split('.');
        let mut num = || -> Option<u64> {
            let p = parts.next()?;
            if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) || (p.len() > 1 && p.starts_with('0')) {
                return None;
            }
            p.parse().ok()
        };
        let v = Version { major: num()?, minor: num()?, patch: num()? };
        parts.next().is_none().then_some(v)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// The constant that names the protocol version (declared in `x-constants`).
pub const VERSION_CONSTANT: &str = "PROTOCOL_VERSION";

/// The protocol version a schema declares with `x-constants: PROTOCOL_VERSION`.
pub fn declared_version(space: &TypeSpace) -> Option<Version> {
    space.constants.get(VERSION_CONSTANT).and_then(|c| c.value.as_str()).and_then(Version::parse)
}

/// One frozen protocol version: `schema/history/<version>/bundle.json`.
#[derive(Debug, Clone)]
pub struct Frozen {
    /// Its version (the folder's name).
    pub version: Version,
    /// The bundle file.
    pub bundle: PathBuf,
}

/// Every frozen version under `history_dir`, oldest first.
///
/// # Errors
///
/// A message naming a folder that is not a version or holds no `bundle.json`.
pub fn frozen_versions(history_dir: &Path) -> Result<Vec<Frozen>, String> {
    let entries = match std::fs::read_dir(history_dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("cannot read {}: {e}", history_dir.display())),
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if !path.is_dir() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        let version = Version::parse(&name).ok_or_else(|| format!("{}: folder names in the history are versions, MAJOR.MINOR.PATCH", path.display()))?;
        let bundle = path.join("bundle.json");
        if !bundle.is_file() {
            return Err(format!("{}: no bundle.json; freeze it with `cargo run -p openagents-codegen -- freeze {version}`", path.display()));
        }
        out.push(Frozen { version, bundle });
    }
    out.sort_by_key(|f| f.version);
    Ok(out)
}

/// The outcome of checking the current schema against its history.
#[derive(Debug, Clone)]
pub struct GateOutcome {
    /// Whether the gate passes.
    pub ok: bool,
    /// What was checked and, on failure, what breaks whom and what to do.
    pub text: String,
}

/// Checks the schema folder against every frozen version in `schema/history/`, and every frozen
/// bundle against its `schema/CHANGELOG.md` entry.
///
/// - `PROTOCOL_VERSION` (in `x-constants`) is `MAJOR.MINOR.PATCH`, not older than any frozen
///   version, and its major version has been frozen;
/// - every frozen bundle's digest is the one its CHANGELOG entry records (frozen means frozen);
/// - the current schema has no breaking change against any frozen version of the same major.
///
/// # Errors
///
/// A [`SchemaError`] when the current schema or a frozen bundle does not load.
pub fn gate(schema_dir: &Path) -> Result<GateOutcome, SchemaError> {
    let history_dir = schema_dir.join("history");
    let changelog_path = schema_dir.join("CHANGELOG.md");
    let (docs, current) = Config::new().schema_dir(schema_dir).load().map_err(crate::Refusals::into_first)?;
    let current_digest = crate::digest::digest(&docs.bundle());
    let mut problems: Vec<String> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    let Some(version) = declared_version(&current) else {
        return Ok(GateOutcome {
            ok: false,
            text: format!("{}: declare the protocol version as `x-constants: {{\"{VERSION_CONSTANT}\": {{\"value\": \"MAJOR.MINOR.PATCH\", ...}}}}` (in RpcRequest.json)\n", schema_dir.display()),
        });
    };
    let frozen = frozen_versions(&history_dir).map_err(|m| SchemaError::new(history_dir.display().to_string(), "", "", m))?;
    let changelog = std::fs::read_to_string(&changelog_path).unwrap_or_default();
    let freeze_hint = |v: Version| {
        format!(
            "freeze it: `cargo run -p openagents-codegen -- freeze {v}` (writes schema/history/{v}/bundle.json), then add a `## {v}` entry with its digest to schema/CHANGELOG.md"
        )
    };
    if frozen.is_empty() {
        problems.push(format!("schema/history/ holds no frozen version; {}", freeze_hint(version)));
    }
    if let Some(newest) = frozen.last()
        && newest.version > version
    {
        problems.push(format!("PROTOCOL_VERSION is {version}, older than the frozen {}; a protocol version only moves forward", newest.version));
    }
    if !frozen.is_empty() && !frozen.iter().any(|f| f.version.major == version.major && f.version <= version) {
        problems.push(format!("major version {} has no frozen bundle; {}", version.major, freeze_hint(version)));
    }
    let mut text = String::new();
    for f in &frozen {
        let (fdocs, old) = Config::new().schema_dir(&f.bundle).load().map_err(crate::Refusals::into_first)?;
        let digest = crate::digest::digest(&fdocs.bundle());
        let file_digest = std::fs::read_to_string(&f.bundle).ok().and_then(|t| serde_json::from_str::<Value>(&t).ok()).map(|v| crate::digest::digest(&v));
        match changelog_digest(&changelog, f.version) {
            None => problems.push(format!(
                "schema/CHANGELOG.md has no `## {}` entry recording `Digest: {}`; add one saying what changed in {}",
                f.version,
                file_digest.clone().unwrap_or_default(),
                f.version
            )),
            Some(recorded) if Some(&recorded) != file_digest.as_ref() => problems.push(format!(
                "schema/history/{v}/bundle.json has digest {}, but schema/CHANGELOG.md records {recorded} for {v}: a frozen bundle never changes; restore it (or, for a version never released, re-freeze with --force and update the entry)",
                file_digest.clone().unwrap_or_default(),
                v = f.version
            )),
            Some(_) => {}
        }
        let report = compare(&old, &current);
        let same_major = f.version.major == version.major;
        text.push_str(&format!("schema/ against {v} (schema/history/{v}/bundle.json): {}\n", report.summary(), v = f.version));
        if same_major && report.is_breaking() {
            let mut list = String::new();
            for b in report.breaking() {
                list.push_str(&format!("  {b}\n"));
            }
            let next = Version { major: version.major + 1, minor: 0, patch: 0 };
            problems.push(format!(
                "{count} breaking change(s) against protocol {v}, which PROTOCOL_VERSION {version} promises to stay compatible with:\n{list}\
                 Each line says who breaks: `output` lines break old clients and hosts reading what the new version sends; \
                 `input` lines break old clients and hosts whose requests the new version refuses.\n\
                 What to do: make the change compatible (add instead of change: a new optional field, a new method, a new value in an \
                 `x-extensible` enum or union), or, if the break is intended, release a new major protocol version:\n  \
                 1. set PROTOCOL_VERSION to \"{next}\" in schema/RpcRequest.json (`x-constants`)\n  \
                 2. {hint}\n  \
                 3. list these breaking changes in that CHANGELOG entry",
                count = report.count(Verdict::Breaking),
                v = f.version,
                hint = freeze_hint(next),
            ));
        }
        if f.version == version && digest != current_digest && !report.is_breaking() {
            notes.push(format!(
                "schema/ has changed since {version} was frozen ({}); when these changes are released, bump PROTOCOL_VERSION (minor for additions) and freeze the new version",
                report.summary()
            ));
        }
    }
    for n in &notes {
        text.push_str(&format!("note: {n}\n"));
    }
    let ok = problems.is_empty();
    for p in &problems {
        text.push_str(&format!("FAIL: {p}\n"));
    }
    if ok {
        text.push_str(&format!("ok: protocol {version} (digest {current_digest}) is compatible with every frozen version of major {}\n", version.major));
    }
    Ok(GateOutcome { ok, text })
}

/// The digest the CHANGELOG records for `version`: the first `Digest: <hex>` line (backticks
/// allowed) after its `## <version>` heading and before the next heading.
pub fn changelog_digest(changelog: &str, version: Version) -> Option<String> {
    let heading = format!("## {version}");
    let mut in_section = false;
    for line in changelog.lines() {
        let t = line.trim();
        if t.starts_with("## ") {
            in_section = t == heading || t.starts_with(&format!("{heading} "));
            continue;
        }
        if in_section && let Some(rest) = t.strip_prefix("Digest:") {
            return Some(rest.trim().trim_matches('`').to_owned());
        }
    }
    None
}

/// Writes `schema/history/<version>/bundle.json` from the schema folder. Refuses to overwrite a
/// frozen version unless `force` (for a version never released), and refuses a version other
/// than the schema's `PROTOCOL_VERSION`.
///
/// # Errors
///
/// A message saying what is wrong and what to do.
pub fn freeze(schema_dir: &Path, version: &str, force: bool) -> Result<(PathBuf, String), String> {
    let v = Version::parse(version).ok_or_else(|| format!("`{version}` is not a version: MAJOR.MINOR.PATCH"))?;
    let (docs, space) = Config::new().schema_dir(schema_dir).load().map_err(|e| e.to_string())?;
    match declared_version(&space) {
        Some(d) if d == v => {}
        Some(d) => return Err(format!("schema/ declares PROTOCOL_VERSION {d}; set it to {v} in schema/RpcRequest.json before freezing {v}")),
        None => return Err(format!("schema/ declares no {VERSION_CONSTANT} in `x-constants`")),
    }
    let dir = schema_dir.join("history").join(v.to_string());
    let file = dir.join("bundle.json");
    if file.exists() && !force {
        return Err(format!("{} exists; a frozen version never changes (use --force only for a version never released)", file.display()));
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let bundle = docs.bundle();
    let text = serde_json::to_string_pretty(&bundle).map_err(|e| e.to_string())? + "\n";
    std::fs::write(&file, text).map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    Ok((file, crate::digest::digest(&bundle)))
}
