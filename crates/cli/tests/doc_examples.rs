//! Every `tightlink` command in the README's and the guide's `sh` and
//! `console` blocks runs, and exits 0: a stale example fails here.
//! (Blocks marked `text` are synopses and output, not run.)
//!
//! The examples' far host, `far.example.net`, is this host; the
//! long-running commands (`server`, `reflector`, `agent`) run in
//! the background until the next one of their kind starts or the page
//! ends, and must still be running a second after they start. `sudo`
//! commands and privileged ports run only as root (CI is root). Other
//! commands (`cargo`, `pip`, `python3`) are left to the steps that run
//! them: `.ci/run` runs the cargo ones, `python/tests` the Python ones.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A command of a page, where it is.
#[derive(Debug, Clone, PartialEq)]
struct Example {
    line: usize,
    command: String,
}

/// The commands of `sh` and `console` blocks: `$ ` prompts and trailing
/// `  # ...` comments taken off, lines ending in `\` joined.
fn examples(text: &str) -> Vec<Example> {
    let mut out = Vec::new();
    let mut in_block = false;
    let mut pending: Option<Example> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim_end();
        if let Some(info) = line.trim_start().strip_prefix("```") {
            in_block = !in_block && matches!(info.trim(), "sh" | "console" | "bash");
            if !in_block && line.trim_start() != "```" && !info.trim().is_empty() {
                // Another language's block opened: skip it.
            }
            continue;
        }
        if !in_block {
            continue;
        }
        let body = line
            .trim_start()
            .strip_prefix("$ ")
            .unwrap_or(line.trim_start());
        let body = strip_comment(body);
        let (body, continues) = match body.strip_suffix('\\') {
            Some(b) => (b.trim_end(), true),
            None => (body, false),
        };
        let ex = match pending.take() {
            Some(mut p) => {
                p.command.push(' ');
                p.command.push_str(body.trim());
                p
            }
            None => Example {
                line: i + 1,
                command: body.trim().to_string(),
            },
        };
        if continues {
            pending = Some(ex);
        } else if !ex.command.is_empty() {
            out.push(ex);
        }
    }
    out
}

/// The command without a trailing comment: ` #` after at least one
/// space, outside quotes.
fn strip_comment(s: &str) -> &str {
    let (mut single, mut double) = (false, false);
    let b = s.as_bytes();
    for (i, &c) in b.iter().enumerate() {
        match c {
            b'\'' if !double => single = !single,
            b'"' if !single => double = !double,
            b'#' if !single && !double && i > 0 && b[i - 1] == b' ' => {
                return s[..i].trim_end();
            }
            _ => {}
        }
    }
    s
}

/// What the runner does with one command.
#[derive(Debug, PartialEq)]
enum Plan {
    /// Runs to its end; must exit 0.
    Run(String),
    /// Runs in the background; must still be running a second on.
    Daemon(&'static str, String),
    /// Not run here, and why.
    Skip(&'static str),
}

/// Commands that run until stopped (`cross` ends after its `--duration`:
/// it runs to its end like any other).
const DAEMONS: [&str; 3] = ["server", "reflector", "agent"];

/// Examples another test runs as they are written, and checks more
/// closely than an exit status: not run twice.
const RUN_ELSEWHERE: [(&str, &str); 1] = [(
    "tightlink eval --quick --plots plots",
    "tests/eval.rs runs it (with --jobs 2) and checks its tables",
)];

fn plan(command: &str, root: bool) -> Plan {
    let (sudo, cmd) = match command.strip_prefix("sudo ") {
        Some(rest) => (true, rest.trim_start()),
        None => (false, command),
    };
    if !cmd.starts_with("tightlink ") && cmd != "tightlink" {
        return Plan::Skip("not a tightlink command");
    }
    if sudo && !root {
        return Plan::Skip("needs root");
    }
    if let Some((_, why)) = RUN_ELSEWHERE.iter().find(|(c, _)| *c == cmd) {
        return Plan::Skip(why);
    }
    let cmd = cmd.replace("far.example.net", "127.0.0.1");
    let sub = cmd.split_whitespace().nth(1).unwrap_or("");
    // The reflector's default port, 862, is privileged.
    if sub == "reflector" && !cmd.contains("--port") && !root {
        return Plan::Skip("needs root (port 862)");
    }
    match DAEMONS.iter().find(|d| **d == sub) {
        Some(d) if !cmd.contains("--help") && !cmd.contains("--check") => Plan::Daemon(d, cmd),
        _ => Plan::Run(cmd),
    }
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn pages() -> Vec<PathBuf> {
    let mut v = vec![repo().join("README.md")];
    let mut guide: Vec<PathBuf> = std::fs::read_dir(repo().join("guide/src"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    guide.sort();
    v.extend(guide);
    v
}

/// A shell in `dir` with the built `tightlink` first on PATH and a home
/// of its own (the agent's history, files the examples write).
fn shell(dir: &Path, cmd: &str) -> Command {
    let bin = Path::new(env!("CARGO_BIN_EXE_tightlink")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(cmd)
        .current_dir(dir)
        .env("PATH", path)
        .env("HOME", dir)
        .env_remove("XDG_STATE_HOME")
        .env_remove("STATE_DIRECTORY")
        .stdin(Stdio::null());
    c
}

/// The command's output, or `None` (and the command killed) after `limit`.
fn run_with_timeout(mut c: Command, limit: Duration) -> Option<Output> {
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            v
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().ok()? {
            break s;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Some(Output {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    })
}

/// Runs one page's examples; the failures, each with file:line.
fn run_page(page: &Path, root: bool, ran: &mut usize) -> Vec<String> {
    let text = std::fs::read_to_string(page).unwrap();
    let name = page
        .strip_prefix(repo())
        .unwrap_or(page)
        .display()
        .to_string();
    let dir = tempfile::tempdir().unwrap();
    // The repository's files the examples name (deploy/agent.toml, ...).
    for sub in ["deploy", "python"] {
        let _ = std::os::unix::fs::symlink(repo().join(sub), dir.path().join(sub));
    }
    let mut daemons: Vec<(&'static str, Child, String)> = Vec::new();
    let mut failures = Vec::new();
    for ex in examples(&text) {
        let at = format!("{name}:{}", ex.line);
        match plan(&ex.command, root) {
            Plan::Skip(why) => eprintln!("{at}: skipped ({why}): {}", ex.command),
            Plan::Run(cmd) => {
                *ran += 1;
                let started = Instant::now();
                let out = run_with_timeout(shell(dir.path(), &cmd), Duration::from_secs(300));
                eprintln!(
                    "{at}: {cmd} ({:.1} s, {})",
                    started.elapsed().as_secs_f64(),
                    out.as_ref()
                        .map_or("timed out".to_string(), |o| o.status.to_string())
                );
                match out {
                    Some(o) if o.status.success() => {}
                    Some(o) => failures.push(format!(
                        "{at}: `{cmd}` exited {}: {}",
                        o.status,
                        String::from_utf8_lossy(&o.stderr).trim()
                    )),
                    None => failures.push(format!("{at}: `{cmd}` ran over 300 s")),
                }
            }
            Plan::Daemon(kind, cmd) => {
                *ran += 1;
                if let Some(i) = daemons.iter().position(|d| d.0 == kind) {
                    let (_, mut c, _) = daemons.remove(i);
                    let _ = c.kill();
                    let _ = c.wait();
                }
                let cmd = cmd.trim_end_matches('&').trim().to_string();
                let mut c = shell(dir.path(), &format!("exec {cmd}"));
                let mut child = c
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap();
                std::thread::sleep(Duration::from_secs(1));
                match child.try_wait().unwrap() {
                    None => {
                        eprintln!("{at}: {cmd} (running)");
                        daemons.push((kind, child, at));
                    }
                    Some(status) => {
                        let out = child.wait_with_output().unwrap();
                        failures.push(format!(
                            "{at}: `{cmd}` stopped within a second ({status}): {}",
                            String::from_utf8_lossy(&out.stderr).trim()
                        ));
                    }
                }
            }
        }
    }
    for (_, mut c, _) in daemons {
        let _ = c.kill();
        let _ = c.wait();
    }
    failures
}

#[test]
fn every_example_in_the_readme_and_the_guide_runs() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let mut ran = 0;
    let mut failures = Vec::new();
    for page in pages() {
        failures.extend(run_page(&page, root, &mut ran));
    }
    assert!(
        ran >= 20,
        "only {ran} examples found: is the parser broken?"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn examples_are_read_as_a_shell_reads_them() {
    let page = "text\n```sh\n$ tightlink estimate   # the default\ntightlink estimate sim:cross=cbr:3G \\\n  --json\n```\n```text\ntightlink estimate [TARGET]\n```\n```python\nimport tightlink  # no\n```\n";
    assert_eq!(
        examples(page),
        vec![
            Example {
                line: 3,
                command: "tightlink estimate".into()
            },
            Example {
                line: 4,
                command: "tightlink estimate sim:cross=cbr:3G --json".into()
            },
        ]
    );
    assert_eq!(strip_comment("a '# b' c # d"), "a '# b' c");
    assert_eq!(
        plan("tightlink estimate far.example.net --both", false),
        Plan::Run("tightlink estimate 127.0.0.1 --both".into())
    );
    assert_eq!(
        plan("tightlink server", true),
        Plan::Daemon("server", "tightlink server".into())
    );
    assert_eq!(
        plan("sudo tightlink lab list", false),
        Plan::Skip("needs root")
    );
    assert_eq!(
        plan("cargo test", true),
        Plan::Skip("not a tightlink command")
    );
    // Run elsewhere only as written: other flags run here.
    assert!(matches!(
        plan("tightlink eval --quick --plots plots", true),
        Plan::Skip(why) if why.contains("tests/eval.rs")
    ));
    assert_eq!(
        plan("tightlink eval --quick", true),
        Plan::Run("tightlink eval --quick".into())
    );
}

/// The runner fails on a broken example, with the page and line.
#[test]
fn a_broken_example_fails_with_its_place() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("broken.md");
    std::fs::write(
        &page,
        "```sh\ntightlink estimate --method no-such-method\n```\n",
    )
    .unwrap();
    let mut ran = 0;
    let failures = run_page(&page, false, &mut ran);
    assert_eq!(ran, 1);
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(failures[0].contains("broken.md:2"), "{failures:?}");
    assert!(failures[0].contains("no-such-method"), "{failures:?}");
}
