//! `tightlink generate`: the guide's reference is what the command line
//! says of itself today, the man pages render, the completion scripts
//! parse in their shells, and `--version` names the commit.

use std::path::Path;
use std::process::Command;

fn tightlink(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tightlink"))
        .args(args)
        .output()
        .unwrap()
}

/// `TIGHTLINK_BLESS=1` writes the reference anew.
#[test]
fn the_guides_reference_is_generated_from_the_definitions() {
    let out = tightlink(&["generate", "reference"]);
    assert!(out.status.success());
    let now = String::from_utf8(out.stdout).unwrap();
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../guide/src/reference.md");
    if std::env::var("TIGHTLINK_BLESS").as_deref() == Ok("1") {
        std::fs::write(&file, &now).unwrap();
    }
    let shipped = std::fs::read_to_string(&file).unwrap();
    assert!(
        shipped == now,
        "guide/src/reference.md is stale: run `tightlink generate reference > guide/src/reference.md` \
         (or the tests with TIGHTLINK_BLESS=1)"
    );
    for command in [
        "estimate",
        "server",
        "reflector",
        "agent",
        "lab run",
        "generate man",
    ] {
        assert!(
            now.contains(&format!("## `tightlink {command}`")),
            "{command}"
        );
    }
}

#[test]
fn man_pages_render_for_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let out = tightlink(&["generate", "man", dir.path().to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pages: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for p in [
        "tightlink.1",
        "tightlink-estimate.1",
        "tightlink-lab-run.1",
        "tightlink-agent.1",
    ] {
        assert!(pages.iter().any(|x| x == p), "{p} missing from {pages:?}");
    }
    assert!(!pages.iter().any(|x| x.contains("help")), "{pages:?}");
    let estimate = std::fs::read_to_string(dir.path().join("tightlink-estimate.1")).unwrap();
    assert!(
        estimate.starts_with(".ie") || estimate.contains(".TH"),
        "{estimate}"
    );
    assert!(estimate.contains("\\-\\-method"), "{estimate}");
    // Where man(1) is installed, the page formats without a warning.
    if let Ok(o) = Command::new("man")
        .args(["--warnings", "-l", "-Tutf8"])
        .arg(dir.path().join("tightlink-estimate.1"))
        .env("MANWIDTH", "80")
        .output()
    {
        if o.status.success() {
            let text = String::from_utf8_lossy(&o.stdout);
            assert!(text.contains("method"), "{text}");
        }
    }
}

#[test]
fn completion_scripts_parse_in_their_shells() {
    for (shell, check) in [
        ("bash", ["bash", "-n"]),
        ("zsh", ["zsh", "-n"]),
        ("fish", ["fish", "-n"]),
    ] {
        let out = tightlink(&["generate", "completions", shell]);
        assert!(out.status.success(), "{shell}");
        let script = String::from_utf8(out.stdout).unwrap();
        assert!(
            script.contains("estimate") && script.contains("--method"),
            "{shell}"
        );
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), &script).unwrap();
        match Command::new(check[0])
            .arg(check[1])
            .arg(file.path())
            .output()
        {
            Ok(o) => assert!(
                o.status.success(),
                "{shell}: {}",
                String::from_utf8_lossy(&o.stderr)
            ),
            Err(_) => eprintln!("skipped the {shell} syntax check: no {}", check[0]),
        }
    }
}

#[test]
fn the_version_names_its_commit() {
    let out = tightlink(&["--version"]);
    let v = String::from_utf8(out.stdout).unwrap();
    assert!(
        v.starts_with(&format!("tightlink {}", env!("CARGO_PKG_VERSION"))),
        "{v}"
    );
    // Built in a git checkout (as the tests are), the commit follows.
    let in_git = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    if let Some(commit) = in_git {
        assert!(v.contains(&format!("(commit {commit}")), "{v} vs {commit}");
    }
}
