//! No runner process outlives what owns it, against the real binary: an ACP agent's escapee (a
//! double fork and `setsid`) ends with the agent's process, whether the agent exits after
//! answering or is closed as idle while another agent lives on; `kill -9` of the server takes
//! every runner along; and a runner is not ended merely because the thread that started it did.
//!
//! Every wait is a poll with a generous bound (or a readiness line), never a sleep before an
//! assertion.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use openagents_hardening::harness::{alive, bin, wait_for};
use serde_json::{Value, json};

/// How long anything here may take to happen on a loaded machine: far beyond what it takes.
const BOUND: Duration = Duration::from_secs(20);

/// A fake ACP agent: answers `initialize`, `session/new` and `session/prompt`. It writes its pid
/// to `agent.pid` in its working folder. A prompt containing `escape` first double-forks: the
/// middle process calls `setsid` and starts `sleep 300` (its stdio on /dev/null) in the new
/// session, writes that sleeper's pid to `sleeper.pid` and exits, so the sleeper is orphaned
/// before the agent answers. A prompt containing `exit` makes the agent exit right after its
/// answer.
const FAKE_AGENT: &str = r#"
import json, os, sys

def say(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()

def escape():
    middle = os.fork()
    if middle == 0:
        os.setsid()
        sleeper = os.fork()
        if sleeper == 0:
            null = os.open("/dev/null", os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            os.execvp("sleep", ["sleep", "300"])
        with open("sleeper.pid.tmp", "w") as f:
            f.write(f"{sleeper}\n")
        os.rename("sleeper.pid.tmp", "sleeper.pid")
        os._exit(0)
    os.waitpid(middle, 0)

with open("agent.pid", "w") as f:
    f.write(f"{os.getpid()}\n")
for line in sys.stdin:
    msg = json.loads(line)
    method, rid = msg.get("method"), msg.get("id")
    if method == "initialize":
        say({"jsonrpc": "2.0", "id": rid, "result": {"protocolVersion": 1, "agentCapabilities": {}}})
    elif method == "session/new":
        say({"jsonrpc": "2.0", "id": rid, "result": {"sessionId": "s1"}})
    elif method == "session/prompt":
        task = msg["params"]["prompt"][0]["text"]
        if "escape" in task:
            escape()
        say({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1", "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "ok"}}}})
        say({"jsonrpc": "2.0", "id": rid, "result": {"stopReason": "end_turn"}})
        if "exit" in task:
            sys.exit(0)
"#;

/// A plain runner that records its pid and its child's, says it started, and sleeps.
const SLEEPER: &str = r#"echo $$ > runner.pid
read -r _
sleep 300 &
echo $! > child.pid
echo '{"type":"text","text":"started"}'
wait
"#;

/// A scratch folder with the operator configuration and a registry of two ACP runners (one
/// closed after 1 s of idleness, one after 600 s) and the plain `sleeper`.
struct Setup {
    dir: PathBuf,
}

impl Setup {
    fn new(name: &str) -> Setup {
        let dir = std::env::temp_dir().join(format!("oa-lifetime-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch folder");
        std::fs::write(dir.join("agent.py"), FAKE_AGENT).expect("agent");
        std::fs::write(dir.join("sleeper.sh"), SLEEPER).expect("runner");
        std::fs::write(dir.join("config.toml"), "[capabilities.server]\nenabled = true\nrunners = [\"acp-long\", \"acp-short\", \"sleeper\"]\n").expect("config");
        let agent = dir.join("agent.py").display().to_string();
        let registry = format!(
            "[runners.acp-long]\ncommand = \"/usr/bin/env\"\nargs = [\"python3\", \"{agent}\"]\nprotocol = \"acp\"\nidle_timeout_s = 600\ntimeout_s = 60\n\n\
             [runners.acp-short]\ncommand = \"/usr/bin/env\"\nargs = [\"python3\", \"{agent}\"]\nprotocol = \"acp\"\nidle_timeout_s = 1\ntimeout_s = 60\n\n\
             [runners.sleeper]\ncommand = \"/bin/bash\"\nargs = [\"{}\"]\ntimeout_s = 600\n",
            dir.join("sleeper.sh").display()
        );
        std::fs::write(dir.join("runners.toml"), registry).expect("registry");
        Setup { dir }
    }

    /// A working folder of its own for one conversation (where its agent writes its pids).
    fn folder(&self, name: &str) -> PathBuf {
        let d = self.dir.join(name);
        std::fs::create_dir_all(&d).expect("conversation folder");
        d
    }

    /// Starts `openagents serve --stdio`.
    fn serve(&self) -> Server {
        let mut child = Command::new(bin("openagents"))
            .args(["serve", "--stdio", "--cwd", &self.dir.display().to_string()])
            .current_dir(&self.dir)
            .env("OPENAGENTS_CONFIG", self.dir.join("config.toml"))
            .env("OPENAGENTS_RUNNERS", self.dir.join("runners.toml"))
            .env("XDG_RUNTIME_DIR", &self.dir)
            .env("XDG_STATE_HOME", &self.dir)
            .env_remove("OPENAGENTS_STORE")
            .env_remove("XDG_CONFIG_HOME")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(self.dir.join("stderr")).expect("stderr file"))
            .spawn()
            .expect("openagents serve --stdio starts");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let Ok(v) = serde_json::from_str::<Value>(&line) else { break };
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        Server { child, stdin, rx, next_id: 1 }
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// A running `openagents serve --stdio`; killed on drop.
struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    rx: mpsc::Receiver<Value>,
    next_id: i64,
}

impl Server {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends a `submit`; returns its id.
    fn submit(&mut self, runner: &str, conversation: &str, cwd: &Path, task: &str) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": "submit", "params": {"task": task, "runner": runner, "conversation": conversation, "cwd": cwd.display().to_string()}});
        let w = self.stdin.as_mut().expect("stdin is open");
        writeln!(w, "{msg}").and_then(|()| w.flush()).expect("writing to the server");
        id
    }

    /// Waits for the message `until` accepts.
    fn until(&mut self, what: &str, until: impl Fn(&Value) -> bool) -> Value {
        let deadline = std::time::Instant::now() + BOUND;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(v) if until(&v) => return v,
                Ok(_) => {}
                Err(e) => panic!("no {what} from the server within {BOUND:?}: {e}"),
            }
        }
    }

    /// Runs one turn to its end; returns its result.
    fn turn(&mut self, runner: &str, conversation: &str, cwd: &Path, task: &str) -> Value {
        let id = self.submit(runner, conversation, cwd, task);
        let answer = self.until("answer", |v| v["id"] == id);
        assert_eq!(answer["result"]["result"], "ok", "{runner} {conversation}: {answer}");
        answer
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The pid a runner wrote to `file` in `dir`.
fn pid_in(dir: &Path, file: &str) -> u32 {
    wait_for(BOUND, || std::fs::read_to_string(dir.join(file)).ok()?.trim().parse().ok()).unwrap_or_else(|| panic!("no pid in {}", dir.join(file).display()))
}

/// `/proc/<pid>/stat`'s state and parent.
fn state_and_parent(pid: u32) -> Option<(char, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut f = stat.rsplit_once(')')?.1.split_whitespace();
    Some((f.next()?.chars().next()?, f.next()?.parse().ok()?))
}

/// The zombies among `parent`'s children.
fn zombie_children(parent: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.flatten().filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok()).filter(|&pid| state_and_parent(pid) == Some(('Z', parent))).collect()
}

/// Waits until none of `pids` runs and `parent` has no zombie child; panics naming what is left.
fn all_gone(what: &str, pids: &[u32], parent: Option<u32>) {
    let done = wait_for(BOUND, || (pids.iter().all(|&p| !alive(p)) && parent.is_none_or(|p| zombie_children(p).is_empty())).then_some(()));
    if done.is_none() {
        let left: Vec<(u32, Option<(char, u32)>)> = pids.iter().filter(|&&p| alive(p)).map(|&p| (p, state_and_parent(p))).collect();
        // Not left running after the test.
        for (pid, _) in &left {
            let _ = kill(Pid::from_raw(*pid as i32), Signal::SIGKILL);
        }
        panic!("{what}: {BOUND:?} later, still running (pid, (state, parent)): {left:?}; zombie children of the server: {:?}", parent.map(zombie_children));
    }
}

#[test]
fn an_acp_agent_that_exits_after_answering_takes_its_escapee_along_and_is_reaped() {
    let setup = Setup::new("exits");
    let mut server = setup.serve();
    // Another agent lives on throughout, as ACP agents do.
    let keep = setup.folder("keep");
    server.turn("acp-long", "keep", &keep, "hello");
    let keep_agent = pid_in(&keep, "agent.pid");
    let quit = setup.folder("quit");
    server.turn("acp-long", "quit", &quit, "escape, then exit");
    let (agent, sleeper) = (pid_in(&quit, "agent.pid"), pid_in(&quit, "sleeper.pid"));
    all_gone("an agent that exited after answering", &[agent, sleeper], Some(server.pid()));
    // The server goes on: the other conversation's agent is untouched and answers again.
    server.turn("acp-long", "keep", &keep, "hello again");
    assert_eq!(pid_in(&keep, "agent.pid"), keep_agent, "the kept agent was restarted");
    assert!(alive(keep_agent), "the kept agent {keep_agent} was ended");
    assert!(!alive(sleeper), "the escapee {sleeper} came back after a further turn");
}

#[test]
fn an_acp_agent_closed_as_idle_takes_its_escapee_along_while_another_agent_lives() {
    let setup = Setup::new("idle");
    let mut server = setup.serve();
    // The long-lived agent escapes too: its escapee must live as long as it does.
    let keep = setup.folder("keep");
    server.turn("acp-long", "keep", &keep, "escape");
    let (keep_agent, keep_sleeper) = (pid_in(&keep, "agent.pid"), pid_in(&keep, "sleeper.pid"));
    let idle = setup.folder("idle");
    server.turn("acp-short", "idle", &idle, "escape");
    let (agent, sleeper) = (pid_in(&idle, "agent.pid"), pid_in(&idle, "sleeper.pid"));
    // acp-short's idle timeout is 1 s.
    all_gone("an agent closed as idle", &[agent, sleeper], Some(server.pid()));
    assert!(alive(keep_agent) && alive(keep_sleeper), "closing one agent ended another's processes: agent {keep_agent} {}, its escapee {keep_sleeper} {}", alive(keep_agent), alive(keep_sleeper));
    server.turn("acp-long", "keep", &keep, "hello again");
    assert!(alive(keep_sleeper), "a further turn ended the live agent's escapee {keep_sleeper}");
    // The end of input shuts the server down, and its agents with everything they started.
    drop(server.stdin.take());
    let exited = wait_for(BOUND, || server.child.try_wait().ok().flatten());
    assert!(exited.is_some(), "the server did not exit at the end of its input");
    all_gone("the server's shutdown", &[keep_agent, keep_sleeper], None);
}

#[test]
fn kill_9_of_the_server_takes_every_runner_along() {
    let setup = Setup::new("kill9");
    let mut server = setup.serve();
    // An idle ACP agent with an escapee, then a plain runner in the middle of a turn.
    let acp = setup.folder("acp");
    server.turn("acp-long", "acp", &acp, "escape");
    let (agent, escapee) = (pid_in(&acp, "agent.pid"), pid_in(&acp, "sleeper.pid"));
    let plain = setup.folder("plain");
    server.submit("sleeper", "plain", &plain, "sleep");
    server.until("the runner's `started`", |v| v["event"]["event"]["text"] == "started");
    let (runner, child) = (pid_in(&plain, "runner.pid"), pid_in(&plain, "child.pid"));
    assert!([agent, escapee, runner, child].iter().all(|&p| alive(p)), "a runner was not running before the kill");
    kill(Pid::from_raw(server.pid() as i32), Signal::SIGKILL).expect("kill -9 the server");
    let _ = server.child.wait();
    all_gone("kill -9 of the server", &[runner, child, agent, escapee], None);
}

/// A launcher's parent-death signal comes when the *thread* that started it ends, not the
/// process (tokio's blocking threads end after 10 s idle). The launcher takes the signal for the
/// server's end only when its parent process has changed: here the thread that starts it ends
/// at once; the launcher takes the signal and goes back to waiting (a launcher that took it for
/// the server's end never would: that is what is waited for, not a pause), and the runner goes
/// on answering and exits on its own terms (status 0).
#[test]
fn a_runner_outlives_the_thread_that_started_it() {
    let me = std::process::id().to_string();
    let (tx, rx) = mpsc::channel();
    let starter = std::thread::spawn(move || {
        let mut child = Command::new(bin("openagents"))
            .args(["runner-exec", "--parent", &me, "--", "/bin/sh", "-c", "echo ready; read line; echo \"got $line\"; read _; exit 0"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the launcher starts");
        // The runner is started once the launcher has asked for its parent-death signal: this
        // thread ends only after that.
        let mut out = BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        let _ = out.read_line(&mut line);
        let _ = tx.send((nix::unistd::gettid().as_raw(), child, out, line));
    });
    let (tid, mut launcher, mut out, ready) = rx.recv().expect("the starting thread's report");
    assert_eq!(ready, "ready\n", "the runner did not start");
    starter.join().expect("the starting thread");
    // The thread is gone once the kernel has let go of it, after it sent the parent-death signal.
    let gone = wait_for(BOUND, || (!Path::new(&format!("/proc/self/task/{tid}")).exists()).then_some(()));
    assert!(gone.is_some(), "the thread that started the launcher did not end");
    // The launcher has taken the signal and gone back to waiting for the next one: nothing is
    // pending, and it sleeps in `sigtimedwait` again. Had it taken the signal for the server's
    // end, it would never wait again: it would kill the runner and exit.
    let launcher_pid = launcher.id();
    let waiting_again = wait_for(BOUND, || {
        if launcher.try_wait().ok().flatten().is_some() {
            return Some(false);
        }
        let status = std::fs::read_to_string(format!("/proc/{launcher_pid}/status")).ok()?;
        let field = |name: &str| status.lines().find_map(|l| l.strip_prefix(name)).map(str::trim).unwrap_or_default().to_owned();
        let none_pending = [field("SigPnd:"), field("ShdPnd:")].iter().all(|v| !v.is_empty() && v.trim_start_matches('0').is_empty());
        let wchan = std::fs::read_to_string(format!("/proc/{launcher_pid}/wchan")).unwrap_or_default();
        (none_pending && field("State:").starts_with('S') && wchan.contains("sigtimedwait")).then_some(true)
    });
    assert_eq!(waiting_again, Some(true), "the launcher did not go back to waiting after the thread that started it ended (it exited: {:?})", launcher.try_wait());
    let mut line = String::new();
    let mut input = launcher.stdin.take().expect("stdin");
    writeln!(input, "hello").expect("writing to the runner");
    out.read_line(&mut line).expect("the runner's answer");
    assert_eq!(line, "got hello\n", "the runner did not answer after the thread that started it ended");
    drop(input);
    let status = wait_for(BOUND, || launcher.try_wait().ok().flatten()).expect("the launcher exits when its runner does");
    assert_eq!(status.code(), Some(0), "the runner did not end on its own terms: {status:?}");
}
