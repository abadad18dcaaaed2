//! What the CLI's integration tests share: running the built binary.
// Each test crate uses part of this module.
#![allow(dead_code)]

use std::process::{Command, Output};

/// Runs `tightlink ARGS` to completion.
pub fn tightlink(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tightlink"))
        .args(args)
        .output()
        .expect("run tightlink")
}

/// Runs `tightlink ARGS`: (succeeded, stdout, stderr) as text.
pub fn tightlink_text(args: &[&str]) -> (bool, String, String) {
    let o = tightlink(args);
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}
