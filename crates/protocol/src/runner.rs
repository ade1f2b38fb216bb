//! Hand-written conveniences on the generated runner-contract types (`Turn`, `Event`), with the
//! seed's signatures. The types themselves are generated; these only read them.

use crate::rt::{Validate, Violation};
use crate::{Event, Turn, VERSION};

impl Event {
    /// Returns the event's text, result, or error message (for an approval request, its
    /// prompt).
    pub fn text(&self) -> &str {
        match self {
            Event::Text { text } => text,
            Event::ApprovalRequest { prompt, .. } => prompt,
            Event::Completed { result } => result,
            Event::Failed { message } => message,
        }
    }

    /// Returns true when the event ends the turn.
    pub fn terminal(&self) -> bool {
        matches!(self, Event::Completed { .. } | Event::Failed { .. })
    }
}

impl Turn {
    /// A turn for `runner` with the current contract version.
    pub fn new(assignment: impl Into<String>, conversation: impl Into<String>, runner: impl Into<String>, task: impl Into<String>, cwd: impl Into<String>) -> Turn {
        Turn {
            schema: VERSION.to_owned(),
            assignment: assignment.into(),
            conversation: conversation.into(),
            agent: crate::AgentSpec { runner: runner.into() },
            task: task.into(),
            cwd: cwd.into(),
            history: None,
        }
    }

    /// Checks the request and returns a message for the user when it is not valid.
    ///
    /// The message names the first problem; [`Validate::validate`] lists every violation with
    /// its JSON pointer.
    #[allow(clippy::should_implement_trait)]
    pub fn validate(&self) -> Result<(), &'static str> {
        match Validate::validate(self) {
            Ok(()) => Ok(()),
            Err(violations) => Err(message_for(&violations[0])),
        }
    }
}

fn message_for(v: &Violation) -> &'static str {
    match (v.pointer.as_str(), v.keyword.as_str()) {
        ("/schema", _) => "unsupported turn schema: this runner speaks openagents.agent.runner.v1",
        ("/assignment", _) => "the assignment id must be 1 to 128 characters of A-Z a-z 0-9 . _ : - starting with a letter or digit",
        ("/conversation", _) => "the conversation id must be 1 to 128 characters of A-Z a-z 0-9 . _ : - starting with a letter or digit",
        ("/agent/runner", _) => "the runner id must be 1 to 128 characters of A-Z a-z 0-9 . _ : - starting with a letter or digit",
        ("/task", "minLength") => "the task is empty",
        ("/task", _) => "the task is longer than 98304 characters",
        ("/cwd", _) => "the working folder must be an absolute path of at most 4096 characters",
        _ => "the turn does not match the runner contract schema",
    }
}
