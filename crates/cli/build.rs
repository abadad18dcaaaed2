//! Names the commit `tightlink --version` was built from: ` (commit
//! abc123def456)`, `-dirty` when the tree had changes, nothing outside a
//! git checkout (a source package says its version alone).

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let suffix = match git(&["rev-parse", "--short=12", "HEAD"]) {
        Some(commit) if !commit.is_empty() => {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            format!(" (commit {commit}{})", if dirty { "-dirty" } else { "" })
        }
        _ => String::new(),
    };
    println!("cargo:rustc-env=TIGHTLINK_BUILT_FROM={suffix}");
    // A new commit or a checkout changes HEAD or the ref it names.
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
        if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
            println!("cargo:rerun-if-changed={dir}/{r}");
        }
        println!("cargo:rerun-if-changed={dir}/index");
    }
}
