//! The README, the user guide and docs/ hold together: every relative
//! link and image points at a file of the repository (and a heading of it
//! where it names one), every chapter is in the guide's SUMMARY, no dated
//! run anecdote ("this VM", "that day", a date) reads as user
//! documentation or a design note, and dated figures live only in the
//! evaluation report (docs/evaluation.md) and BENCHMARKS.md, with their
//! command and without run anecdotes.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The markdown files of one folder of the repository, sorted.
fn markdown_in(dir: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(repo().join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    v.sort();
    v
}

/// The pages: the README and every guide chapter.
fn pages() -> Vec<PathBuf> {
    let mut v = vec![repo().join("README.md")];
    v.extend(markdown_in("guide/src"));
    v
}

/// Markdown link targets `](target)` outside code, with their lines.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fenced = false;
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Inline code spans hold no links.
        let plain: String = line
            .split('`')
            .enumerate()
            .filter(|(k, _)| k % 2 == 0)
            .map(|(_, s)| s)
            .collect::<Vec<_>>()
            .join(" ");
        let mut rest = plain.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            out.push((i + 1, after[..end].trim().to_string()));
            rest = &after[end..];
        }
    }
    out
}

/// mdBook's (and GitHub's) anchor of a heading.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    let mut fenced = false;
    text.lines()
        .filter(|l| {
            if l.starts_with("```") {
                fenced = !fenced;
            }
            !fenced
        })
        .filter_map(|l| l.strip_prefix('#'))
        .map(|l| slug(l.trim_start_matches('#')))
        .collect()
}

/// The broken links of one page, each with file:line.
fn broken_links(page: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(page).unwrap();
    let dir = page.parent().unwrap();
    let name = page
        .strip_prefix(repo())
        .unwrap_or(page)
        .display()
        .to_string();
    let mut bad = Vec::new();
    for (line, target) in links(&text) {
        if target.starts_with("http://")
            || target.starts_with("https://")
            || target.starts_with("mailto:")
        {
            continue;
        }
        let (file, anchor) = match target.split_once('#') {
            Some((f, a)) => (f, Some(a)),
            None => (target.as_str(), None),
        };
        let path = if file.is_empty() {
            page.to_path_buf()
        } else {
            dir.join(file)
        };
        if !path.exists() {
            bad.push(format!("{name}:{line}: {target}: no such file"));
            continue;
        }
        if let (Some(a), true) = (anchor, path.extension().is_some_and(|e| e == "md")) {
            let there = std::fs::read_to_string(&path).unwrap();
            if !anchors(&there).contains(a) {
                bad.push(format!("{name}:{line}: {target}: no heading #{a} there"));
            }
        }
    }
    for (i, line) in text.lines().enumerate() {
        if let Some(rest) = line.trim().strip_prefix("{{#include ") {
            let file = rest.trim_end_matches("}}").trim();
            if !dir.join(file).exists() {
                bad.push(format!("{name}:{}: include {file}: no such file", i + 1));
            }
        }
    }
    bad
}

/// The repository's docs: the design notes, the evaluation report and
/// the benchmarks.
fn docs() -> Vec<PathBuf> {
    let mut v = markdown_in("docs");
    v.push(repo().join("BENCHMARKS.md"));
    v
}

/// Pages that may carry dated figures: the evaluation report and the
/// benchmarks.
fn dated_figures_allowed(page: &Path) -> bool {
    page.ends_with("docs/evaluation.md") || page.ends_with("BENCHMARKS.md")
}

#[test]
fn every_link_of_the_readme_the_guide_and_docs_resolves() {
    let bad: Vec<String> = pages()
        .iter()
        .chain(docs().iter())
        .flat_map(|p| broken_links(p))
        .collect();
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// Design notes say how and why, with no date and no run anecdote; the
/// evaluation report and the benchmarks give dates but no anecdotes.
#[test]
fn design_notes_carry_no_dates_and_reports_no_anecdotes() {
    let mut found = Vec::new();
    let pages = docs();
    assert!(pages.len() >= 7, "{pages:?}");
    for page in pages {
        let text = std::fs::read_to_string(&page).unwrap();
        for (i, line) in text.lines().enumerate() {
            let what = match dated(line) {
                Some("a date") if dated_figures_allowed(&page) => None,
                other => other,
            };
            if let Some(what) = what {
                found.push(format!(
                    "{}:{}: {what}: {line}",
                    page.strip_prefix(repo()).unwrap_or(&page).display(),
                    i + 1
                ));
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn the_link_check_finds_a_broken_link() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("p.md");
    std::fs::write(dir.path().join("there.md"), "# A heading\n").unwrap();
    std::fs::write(
        &page,
        "[ok](there.md) [ok too](there.md#a-heading) `[not a link](nowhere.md)`\n\
         [gone](nowhere.md)\n[wrong anchor](there.md#nope)\n",
    )
    .unwrap();
    let bad = broken_links(&page);
    assert_eq!(bad.len(), 2, "{bad:?}");
    assert!(bad[0].contains(":2: nowhere.md"), "{bad:?}");
    assert!(bad[1].contains(":3: there.md#nope"), "{bad:?}");
}

#[test]
fn every_chapter_is_in_the_summary() {
    let summary = std::fs::read_to_string(repo().join("guide/src/SUMMARY.md")).unwrap();
    let listed: BTreeSet<String> = links(&summary).into_iter().map(|(_, t)| t).collect();
    for page in pages().iter().skip(1) {
        let name = page.file_name().unwrap().to_str().unwrap();
        if name != "SUMMARY.md" {
            assert!(listed.contains(name), "{name} is not in SUMMARY.md");
        }
    }
}

/// What marks a run anecdote or a dated figure in user documentation.
fn dated(line: &str) -> Option<&'static str> {
    let l = line.to_lowercase();
    for phrase in [
        "this vm",
        "these vms",
        "that vm",
        "that day",
        "the day's",
        "this machine",
    ] {
        if l.contains(phrase) {
            return Some("a run anecdote");
        }
    }
    let b = line.as_bytes();
    let date = b.windows(10).any(|w| {
        w[..4].iter().all(u8::is_ascii_digit)
            && w[0] == b'2'
            && w[4] == b'-'
            && w[5..7].iter().all(u8::is_ascii_digit)
            && w[7] == b'-'
            && w[8..10].iter().all(u8::is_ascii_digit)
    });
    date.then_some("a date")
}

/// Code comments say why, not what a run once read: no run anecdote or
/// dated figure in a comment of the workspace's or the Python package's
/// sources (timestamps in UTC, the agent's own format, aside).
#[test]
fn code_comments_carry_no_run_anecdotes() {
    let mut found = Vec::new();
    let mut stack = vec![repo().join("crates"), repo().join("python/src")];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") && !p.ends_with("doc_links.rs") {
                let text = std::fs::read_to_string(&p).unwrap();
                for (i, line) in text.lines().enumerate() {
                    let comment = line.trim_start().starts_with("//");
                    if let (true, Some(what)) = (comment && !line.contains("UTC"), dated(line)) {
                        found.push(format!(
                            "{}:{}: {what}: {}",
                            p.strip_prefix(repo()).unwrap_or(&p).display(),
                            i + 1,
                            line.trim()
                        ));
                    }
                }
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn the_readme_and_the_guide_carry_no_dated_figures() {
    let mut found = Vec::new();
    let mut files = pages();
    // The trace format is part of the guide by inclusion.
    files.push(repo().join("docs/probe-trace.md"));
    for page in files {
        let text = std::fs::read_to_string(&page).unwrap();
        for (i, line) in text.lines().enumerate() {
            if let Some(what) = dated(line) {
                found.push(format!(
                    "{}:{}: {what}: {line}",
                    page.strip_prefix(repo()).unwrap_or(&page).display(),
                    i + 1
                ));
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
    assert_eq!(dated("measured on 2026-12-03"), Some("a date"));
    assert_eq!(dated("On this VM it reads"), Some("a run anecdote"));
    assert_eq!(dated("ports 7447-7448 and 10-20"), None);
}
