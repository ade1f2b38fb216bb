//! `openagents history [ID]`: the conversations a running runtime's store keeps, newest first, or
//! one conversation's turns in order, asked of the runtime over HTTP (`conversations`,
//! `conversation`) with a bearer token, as `status` and `submit` do. The runtime holds its store
//! (one runtime per store), applies the credential's grant (history is readable by credentials
//! that may read events) and answers remote callers as well as local ones.

use std::process::ExitCode;

use clap::Args;
use serde_json::{Value, json};

use crate::attach::{json_line, printable};
use crate::client::Target;

/// Arguments of `openagents history`.
#[derive(Args)]
pub struct HistoryArgs {
    /// The runtime's URL, as `serve --http` printed it.
    #[arg(long)]
    url: String,
    /// A file holding the bearer token (of a credential that may read events).
    #[arg(long)]
    token_file: String,
    /// Print the answer as one JSON line (`conversations`, or `conversation` and `turns`).
    #[arg(long)]
    json: bool,
    /// How many conversations to list, the most recently updated first (without ID).
    #[arg(long, default_value_t = openagents_protocol::HISTORY_DEFAULT_PAGE as u32, value_parser = clap::value_parser!(u32).range(1..))]
    limit: u32,
    /// A conversation's id: print its turns, in the order they ran.
    id: Option<String>,
}

fn fail(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("openagents history: {message}");
    ExitCode::from(1)
}

/// One call; its result, or the error as a person reads it.
async fn call(target: &Target, method: &str, params: Value) -> Result<Value, String> {
    let (status, body) = target.call(method, params).await?;
    if let Some(err) = body.get("error") {
        let code = err["data"]["code"].as_str().unwrap_or("error");
        let message = err["data"]["message"].as_str().or_else(|| err["message"].as_str()).unwrap_or("failed");
        return Err(format!("{} ({code}, HTTP {status})", printable(message, false)));
    }
    Ok(body["result"].clone())
}

/// Prints the conversations or one conversation's turns. Exit 0, or 1 with the reason on stderr
/// (an unknown id, a refused credential, no runtime at the URL).
pub fn history(args: HistoryArgs) -> ExitCode {
    let target = match Target::new(&args.url, &args.token_file) {
        Ok(t) => t,
        Err(e) => return fail(e),
    };
    let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return fail("cannot start the client") };
    let answer = match &args.id {
        None => rt.block_on(list(&target, args.limit as usize)),
        Some(id) => rt.block_on(one(&target, id)),
    };
    let answer = match answer {
        Ok(a) => a,
        Err(e) => return fail(e),
    };
    let text = if args.json {
        json_line(&answer)
    } else if args.id.is_some() {
        show_conversation(&answer)
    } else {
        show_list(&answer, args.limit as usize)
    };
    // A closed pipe (`| head`) is not an error worth a panic.
    let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), format!("{text}\n").as_bytes());
    ExitCode::SUCCESS
}

/// The newest `limit` conversations, page by page; `more` when the runtime has others.
async fn list(target: &Target, limit: usize) -> Result<Value, String> {
    let mut conversations = Vec::new();
    let mut cursor: Option<Value> = None;
    let more = loop {
        let want = (limit - conversations.len()).min(openagents_protocol::HISTORY_MAX_PAGE);
        let mut params = json!({ "limit": want });
        if let Some(c) = cursor.take() {
            params["cursor"] = c;
        }
        let page = call(target, "conversations", params).await?;
        conversations.extend(page["conversations"].as_array().cloned().unwrap_or_default());
        match page.get("next") {
            Some(next) if conversations.len() < limit => cursor = Some(next.clone()),
            Some(_) => break true,
            None => break false,
        }
    };
    Ok(json!({ "conversations": conversations, "more": more }))
}

/// The conversation `id` and every one of its turns, page by page.
async fn one(target: &Target, id: &str) -> Result<Value, String> {
    let mut params = json!({ "id": id, "limit": openagents_protocol::HISTORY_MAX_PAGE });
    let mut turns = Vec::new();
    let conversation = loop {
        let page = call(target, "conversation", params.clone()).await?;
        turns.extend(page["turns"].as_array().cloned().unwrap_or_default());
        match page.get("next") {
            Some(next) => params["cursor"] = next.clone(),
            None => break page["conversation"].clone(),
        }
    };
    Ok(json!({ "conversation": conversation, "turns": turns }))
}

/// `ms` since the epoch as `YYYY-MM-DD HH:MM:SSZ` (UTC).
fn utc(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's days-to-civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}Z", rest / 3600, rest % 3600 / 60, rest % 60)
}

fn text(v: &Value) -> String {
    printable(v.as_str().unwrap_or(""), false)
}

fn show_list(answer: &Value, limit: usize) -> String {
    let conversations = answer["conversations"].as_array().cloned().unwrap_or_default();
    if conversations.is_empty() {
        return "no conversations".into();
    }
    let rows: Vec<[String; 5]> = conversations
        .iter()
        .map(|c| [text(&c["id"]), c["updated_at_ms"].as_i64().map(utc).unwrap_or_default(), c["turns"].as_i64().unwrap_or(0).to_string(), text(&c["runner"]), text(&c["title"])])
        .collect();
    let head = ["ID", "UPDATED", "TURNS", "RUNNER", "TITLE"];
    let width = |i: usize| rows.iter().map(|r| r[i].chars().count()).chain([head[i].len()]).max().unwrap_or(0);
    let widths = [width(0), width(1), width(2), width(3)];
    let line = |r: [&str; 5]| format!("{:<w0$}  {:<w1$}  {:>w2$}  {:<w3$}  {}", r[0], r[1], r[2], r[3], r[4], w0 = widths[0], w1 = widths[1], w2 = widths[2], w3 = widths[3]).trim_end().to_owned();
    let mut out = vec![line(head)];
    out.extend(rows.iter().map(|r| line([&r[0], &r[1], &r[2], &r[3], &r[4]])));
    if answer["more"] == true {
        out.push(format!("(more: give --limit {} to see them)", limit.saturating_mul(2)));
    }
    out.join("\n")
}

fn show_conversation(answer: &Value) -> String {
    let c = &answer["conversation"];
    let turns = answer["turns"].as_array().cloned().unwrap_or_default();
    let mut out = vec![format!("conversation {} ({}, {} turns): {}", text(&c["id"]), text(&c["runner"]), c["turns"].as_i64().unwrap_or(0), text(&c["title"]))];
    for (i, t) in turns.iter().enumerate() {
        let outcome = match t["error"]["code"].as_str() {
            Some(code) if t["outcome"] != "interrupted" => format!("{} ({})", text(&t["outcome"]), printable(code, false)),
            _ => text(&t["outcome"]),
        };
        let started = t["started_at_ms"].as_i64().map(utc).unwrap_or_default();
        let finished = t["finished_at_ms"].as_i64().map(|ms| format!(" to {}", utc(ms))).unwrap_or_default();
        let seqs = match (t["first_seq"].as_i64(), t["last_seq"].as_i64()) {
            (Some(first), Some(last)) => format!("events {first}-{last}"),
            (Some(first), None) => format!("events {first}-"),
            _ => String::new(),
        };
        out.push(String::new());
        out.push(format!("{}. {}  {}  {}  {started}{finished}  {seqs}", i + 1, text(&t["assignment"]), text(&t["runner"]), outcome));
        out.push(format!("   task: {}", text(&t["task"])));
        if let Some(result) = t.get("result") {
            out.push(format!("   result: {}", text(result)));
        }
        if let Some(message) = t["error"].get("message") {
            out.push(format!("   error: {}", text(message)));
        }
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_printed_in_utc() {
        for (ms, want) in [(0, "1970-01-01 00:00:00Z"), (951_782_400_000, "2000-02-29 00:00:00Z"), (1_764_806_399_999, "2025-12-03 23:59:59Z"), (4_107_542_400_000, "2100-03-01 00:00:00Z")] {
            assert_eq!(utc(ms), want, "{ms}");
        }
    }
}
