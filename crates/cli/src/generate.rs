//! `tightlink generate`: what packagers and the guide take from the
//! command line's own definitions, so that help, man pages, shell
//! completions and the guide's reference never drift apart: one source.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, Command, Subcommand};

#[derive(Args)]
pub struct GenerateArgs {
    #[command(subcommand)]
    what: What,
}

#[derive(Subcommand)]
enum What {
    /// A shell's completion script on stdout, e.g.
    /// `tightlink generate completions bash > /usr/share/bash-completion/completions/tightlink`.
    #[command(
        after_help = "Examples:\n  tightlink generate completions bash > tightlink.bash\n  tightlink generate completions zsh > _tightlink"
    )]
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Man pages into DIR: tightlink.1 and one per command
    /// (tightlink-estimate.1, ...), e.g. `tightlink generate man /usr/share/man/man1`.
    #[command(
        after_help = "Examples:\n  tightlink generate man man1                          # then: man -l man1/tightlink-estimate.1"
    )]
    Man {
        /// Where to write them (created if missing).
        dir: PathBuf,
    },
    /// The command-line reference as Markdown on stdout (the guide's
    /// reference chapter is this output).
    #[command(after_help = "Examples:\n  tightlink generate reference > reference.md")]
    Reference,
}

pub fn run(args: GenerateArgs, mut cli: Command) -> Result<()> {
    match args.what {
        What::Completions { shell } => {
            clap_complete::generate(shell, &mut cli, "tightlink", &mut std::io::stdout());
        }
        What::Man { dir } => {
            std::fs::create_dir_all(&dir).with_context(|| format!("{}", dir.display()))?;
            let written = man_pages(&cli, &dir)?;
            eprintln!("{written} man pages in {}", dir.display());
        }
        What::Reference => print!("{}", reference(&cli)),
    }
    Ok(())
}

/// tightlink.1 and a page per command and subcommand; how many.
fn man_pages(cli: &Command, dir: &std::path::Path) -> Result<usize> {
    let mut n = 0;
    let mut stack: Vec<(String, Command)> = vec![("tightlink".into(), cli.clone())];
    while let Some((name, cmd)) = stack.pop() {
        let page = cmd.clone().name(name.clone());
        let mut out = Vec::new();
        clap_mangen::Man::new(page).render(&mut out)?;
        let file = dir.join(format!("{name}.1"));
        std::fs::write(&file, out).with_context(|| format!("{}", file.display()))?;
        n += 1;
        for sub in cmd.get_subcommands().filter(|s| shown(s)) {
            stack.push((format!("{name}-{}", sub.get_name()), sub.clone()));
        }
    }
    Ok(n)
}

/// Every command with its about, usage and options, in Markdown.
pub fn reference(cli: &Command) -> String {
    let mut cli = cli.clone();
    cli.build();
    let mut out = String::from(
        "# Command-line reference\n\n\
         Generated from the command line's own definitions (`tightlink generate\n\
         reference`); `tightlink COMMAND --help` prints the same, and\n\
         `tightlink generate man DIR` writes it as man pages.\n",
    );
    let mut stack = vec![(vec!["tightlink".to_string()], cli)];
    let mut pages = Vec::new();
    while let Some((path, cmd)) = stack.pop() {
        let subs: Vec<&Command> = cmd.get_subcommands().filter(|s| shown(s)).collect();
        for sub in subs.into_iter().rev() {
            let mut p = path.clone();
            p.push(sub.get_name().to_string());
            stack.push((p, sub.clone()));
        }
        pages.push((path, cmd));
    }
    for (path, cmd) in pages {
        let title = path.join(" ");
        let _ = write!(out, "\n## `{title}`\n\n");
        if let Some(about) = cmd.get_long_about().or(cmd.get_about()) {
            let _ = writeln!(out, "{}\n", escape(&about.to_string()));
        }
        let mut usage = cmd.clone().bin_name(title.clone());
        let _ = writeln!(
            out,
            "```text\n{}\n```\n",
            usage
                .render_usage()
                .to_string()
                .trim_start_matches("Usage: ")
        );
        if let Some(after) = cmd.get_after_help() {
            let text = after.to_string();
            if let Some(lines) = text.strip_prefix("Examples:\n") {
                out.push_str("```sh\n");
                for l in lines.lines() {
                    let _ = writeln!(out, "{}", l.strip_prefix("  ").unwrap_or(l));
                }
                out.push_str("```\n\n");
            }
        }
        let subs: Vec<&Command> = cmd.get_subcommands().filter(|s| shown(s)).collect();
        if !subs.is_empty() {
            out.push_str("| command | what it does |\n|---|---|\n");
            for s in subs {
                let about = s.get_about().map(|a| a.to_string()).unwrap_or_default();
                let _ = writeln!(out, "| `{}` | {} |", s.get_name(), cell(&about));
            }
            out.push('\n');
        }
        let args: Vec<&clap::Arg> = cmd
            .get_arguments()
            .filter(|a| !a.is_hide_set() && a.get_id() != "help" && a.get_id() != "version")
            .collect();
        if !args.is_empty() {
            out.push_str("| argument | meaning |\n|---|---|\n");
            for a in args {
                let _ = writeln!(out, "| `{}` | {} |", arg_name(a), cell(&arg_help(a)));
            }
        }
    }
    out
}

/// A command with a page of its own: not hidden, not clap's `help`.
fn shown(c: &Command) -> bool {
    !c.is_hide_set() && c.get_name() != "help"
}

fn arg_name(a: &clap::Arg) -> String {
    let value = a
        .get_value_names()
        .map(|v| {
            v.iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|| a.get_id().to_string().to_uppercase());
    match (a.get_short(), a.get_long()) {
        (_, None) => value,
        (s, Some(l)) => {
            let takes = a.get_num_args().is_some_and(|n| n.takes_values());
            let short = s.map(|c| format!("-{c}, ")).unwrap_or_default();
            if takes {
                format!("{short}--{l} <{value}>")
            } else {
                format!("{short}--{l}")
            }
        }
    }
}

fn arg_help(a: &clap::Arg) -> String {
    let mut h = a
        .get_long_help()
        .or(a.get_help())
        .map(|s| s.to_string())
        .unwrap_or_default();
    let defaults: Vec<String> = a
        .get_default_values()
        .iter()
        .map(|v| v.to_string_lossy().into_owned())
        .collect();
    let takes = a.get_num_args().is_some_and(|n| n.takes_values());
    if !defaults.is_empty() && takes {
        let _ = write!(h, " (default: `{}`)", defaults.join(","));
    }
    if let Some(env) = a.get_env() {
        let _ = write!(h, " (environment: `{}`)", env.to_string_lossy());
    }
    let possible: Vec<String> = a
        .get_possible_values()
        .iter()
        .filter(|p| !p.is_hide_set())
        .map(|p| format!("`{}`", p.get_name()))
        .collect();
    if !possible.is_empty() && takes {
        let _ = write!(h, " (one of {})", possible.join(", "));
    }
    h
}

/// A table cell: one line, pipes escaped.
fn cell(s: &str) -> String {
    escape(&s.split_whitespace().collect::<Vec<_>>().join(" ")).replace('|', "\\|")
}

/// Markdown that a help text's `<...>` would otherwise open as HTML.
fn escape(s: &str) -> String {
    s.replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Arg, ArgAction};

    #[test]
    fn a_command_reads_as_a_reference_page() {
        let cli = Command::new("tightlink").subcommand(
            Command::new("estimate")
                .about("Estimate a path | quickly")
                .after_help("Examples:\n  tightlink estimate        # the simulated path\n  tightlink estimate --json")
                .arg(
                    Arg::new("target")
                        .help("HOST or sim:")
                        .default_value("sim:"),
                )
                .arg(
                    Arg::new("json")
                        .long("json")
                        .action(ArgAction::SetTrue)
                        .help("One object"),
                )
                .arg(
                    Arg::new("method")
                        .short('m')
                        .long("method")
                        .value_name("METHOD")
                        .help("Which <method>"),
                ),
        );
        let md = reference(&cli);
        assert!(md.contains("## `tightlink estimate`"), "{md}");
        // Examples become a shell block (which the guide's test runs).
        assert!(
            md.contains("```sh\ntightlink estimate        # the simulated path\ntightlink estimate --json\n```"),
            "{md}"
        );
        assert!(
            md.contains("| `estimate` | Estimate a path \\| quickly |"),
            "{md}"
        );
        assert!(
            md.contains("| `TARGET` | HOST or sim: (default: `sim:`) |"),
            "{md}"
        );
        assert!(md.contains("| `--json` | One object |"), "{md}");
        assert!(
            md.contains("| `-m, --method <METHOD>` | Which &lt;method&gt; |"),
            "{md}"
        );
        // The root comes first, then its commands in order.
        assert!(md.find("## `tightlink`").unwrap() < md.find("## `tightlink estimate`").unwrap());
    }
}
