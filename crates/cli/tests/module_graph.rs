//! Inside each crate of the workspace, no two source files import each
//! other in a loop, directly or around a longer circle: a file's `use`
//! and inline paths (`crate::a::b`, `super::x`, a child module's name)
//! name the files they take from, and those arrows must form no circle.
//! The crate root (`lib.rs`, `main.rs`) is the crate's face, where
//! modules are declared and re-exported: it is no room of the graph.
//! Test modules (from a file's `#[cfg(test)]` on) may use anything.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A crate's source files by module path (`["backend", "packet"]`).
struct Crate {
    name: String,
    files: BTreeMap<Vec<String>, PathBuf>,
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("the workspace root")
        .to_path_buf()
}

fn crates() -> Vec<Crate> {
    let mut out = Vec::new();
    let dir = workspace().join("crates");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    for krate in names {
        let src = krate.join("src");
        if !src.is_dir() {
            continue;
        }
        let mut files = BTreeMap::new();
        collect(&src, &src, &mut files);
        out.push(Crate {
            name: krate.file_name().unwrap().to_string_lossy().into_owned(),
            files,
        });
    }
    out
}

fn collect(root: &Path, dir: &Path, files: &mut BTreeMap<Vec<String>, PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            // `src/bin` holds binaries of their own.
            if p.file_name().is_some_and(|n| n != "bin") {
                collect(root, &p, files);
            }
            continue;
        }
        if p.extension().is_none_or(|x| x != "rs") {
            continue;
        }
        let rel = p.strip_prefix(root).unwrap().with_extension("");
        let mut module: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if module.last().is_some_and(|m| m == "mod") {
            module.pop();
        }
        if module == ["lib"] || module == ["main"] {
            continue;
        }
        files.insert(module, p);
    }
}

/// The file's code before its tests, without comments.
fn code(path: &Path) -> String {
    code_of(&std::fs::read_to_string(path).unwrap())
}

/// `code` of a file's text: a `#[cfg(test)]` that only declares a test
/// module kept in its own file (`mod tests;`) is passed over, and the
/// code after it still read.
fn code_of(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if line.trim_start() == "#[cfg(test)]" {
            let declares_only = lines.peek().is_some_and(|next| {
                let t = next.trim();
                t.starts_with("mod ") && t.ends_with(';')
                    || t.starts_with("pub(crate) mod ") && t.ends_with(';')
            });
            if declares_only {
                lines.next();
                continue;
            }
            break;
        }
        let line = match line.find("//") {
            Some(i) => &line[..i],
            None => line,
        };
        out.push_str(line);
        out.push('\n');
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Every path a use tree (the text after `use`) names, expanded.
fn use_paths(tree: &str) -> Vec<Vec<String>> {
    fn expand(s: &str, prefix: &[String], out: &mut Vec<Vec<String>>) {
        let s = s.trim();
        if let Some(open) = s.find('{') {
            let head: Vec<String> = s[..open]
                .split("::")
                .map(str::trim)
                .filter(|x| !x.is_empty())
                .map(String::from)
                .collect();
            let mut base = prefix.to_vec();
            base.extend(head);
            let close = s.rfind('}').filter(|&c| c > open).unwrap_or(s.len());
            let inner = &s[open + 1..close];
            // Split at commas outside nested braces.
            let (mut depth, mut start) = (0, 0);
            for (i, c) in inner.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        expand(&inner[start..i], &base, out);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            expand(&inner[start..], &base, out);
        } else {
            let s = s.split(" as ").next().unwrap_or(s);
            let mut p = prefix.to_vec();
            p.extend(
                s.split("::")
                    .map(str::trim)
                    .filter(|x| !x.is_empty() && *x != "*" && *x != "self")
                    .map(String::from),
            );
            if !p.is_empty() {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    expand(tree, &[], &mut out);
    out
}

/// The paths a file's code names: its use trees, and inline paths that
/// start with `crate::` or `super::`.
fn named_paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    // Use statements (a line that opens with one), to their semicolon.
    let mut at = 0;
    for line in code.split_inclusive('\n') {
        let start = at;
        at += line.len();
        let t = line.trim_start();
        let t = ["pub(crate) ", "pub(super) ", "pub "]
            .iter()
            .find_map(|p| t.strip_prefix(p))
            .unwrap_or(t);
        let Some(tree) = t.strip_prefix("use ") else {
            continue;
        };
        let from = start + (line.len() - tree.len());
        let end = code[from..].find(';').map_or(code.len(), |e| from + e);
        out.extend(use_paths(&code[from..end]));
    }
    for start in ["crate::", "super::"] {
        let mut at = 0;
        while let Some(i) = code[at..].find(start) {
            let i = at + i;
            at = i + start.len();
            // Not inside a longer path (`a::super::`, `super::super::`).
            if code[..i]
                .chars()
                .last()
                .is_some_and(|c| is_ident(c) || c == ':')
            {
                continue;
            }
            let tail: String = code[i..]
                .chars()
                .take_while(|&c| is_ident(c) || c == ':')
                .collect();
            // `super::{a, b}`: the use tree above reads the group.
            if tail.trim_end_matches(':') == start.trim_end_matches(':') {
                continue;
            }
            out.push(
                tail.split("::")
                    .filter(|x| !x.is_empty())
                    .map(String::from)
                    .collect(),
            );
        }
    }
    out
}

/// Whether `code` names `module::` at the start of a path (not as the
/// tail of another path, `a::module::`).
fn names_inline(code: &str, module: &str) -> bool {
    let pat = format!("{module}::");
    let mut at = 0;
    while let Some(i) = code[at..].find(&pat) {
        let i = at + i;
        at = i + pat.len();
        let before = code[..i].chars().last();
        if before.is_none_or(|c| !is_ident(c) && c != ':') {
            return true;
        }
    }
    false
}

/// The file a path from module `from` reaches (its longest prefix that
/// is a module of the crate), if another one.
fn target(k: &Crate, from: &[String], path: &[String]) -> Option<Vec<String>> {
    let mut p: Vec<String> = Vec::new();
    let mut segs = path.iter().peekable();
    match segs.peek().map(|s| s.as_str()) {
        Some("crate") => {
            segs.next();
        }
        Some("super") => {
            p = from.to_vec();
            while segs.peek().is_some_and(|s| *s == "super") {
                segs.next();
                p.pop()?;
            }
        }
        Some("self") => {
            segs.next();
            p = from.to_vec();
        }
        Some(first) => {
            // A child module's name, or another crate's.
            let mut child = from.to_vec();
            child.push(first.to_string());
            if !k.files.contains_key(&child) {
                return None;
            }
            p = from.to_vec();
        }
        None => return None,
    }
    p.extend(segs.cloned());
    while !p.is_empty() {
        if k.files.contains_key(&p) {
            return (p != from).then_some(p);
        }
        p.pop();
    }
    None
}

/// Circles of the graph (Tarjan's strongly connected components of two
/// files or more).
fn circles(edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<Vec<Vec<String>>> {
    struct State<'a> {
        edges: &'a BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        index: BTreeMap<&'a Vec<String>, usize>,
        low: BTreeMap<&'a Vec<String>, usize>,
        stack: Vec<&'a Vec<String>>,
        on: BTreeSet<&'a Vec<String>>,
        out: Vec<Vec<Vec<String>>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a Vec<String>) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on.insert(v);
        if let Some(next) = s.edges.get(v) {
            for w in next {
                if !s.index.contains_key(w) {
                    visit(s, w);
                    let lw = s.low[w];
                    let lv = s.low.get_mut(v).unwrap();
                    *lv = (*lv).min(lw);
                } else if s.on.contains(w) {
                    let iw = s.index[w];
                    let lv = s.low.get_mut(v).unwrap();
                    *lv = (*lv).min(iw);
                }
            }
        }
        if s.low[v] == s.index[v] {
            let mut scc = Vec::new();
            loop {
                let w = s.stack.pop().unwrap();
                s.on.remove(w);
                scc.push(w.clone());
                if w == v {
                    break;
                }
            }
            if scc.len() > 1 {
                scc.sort();
                s.out.push(scc);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out
}

fn graph(k: &Crate) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for (module, path) in &k.files {
        let e = edges.entry(module.clone()).or_default();
        let text = code(path);
        for p in named_paths(&text) {
            if let Some(t) = target(k, module, &p) {
                e.insert(t);
            }
        }
        // A child module named inline (`child::f()`), with no `use`.
        for other in k.files.keys() {
            let child = other.len() == module.len() + 1 && other.starts_with(module);
            if child && names_inline(&text, other.last().unwrap()) {
                e.insert(other.clone());
            }
        }
    }
    edges
}

#[test]
fn no_crate_has_modules_that_import_each_other_in_a_loop() {
    let mut found = Vec::new();
    let all = crates();
    assert!(all.len() >= 10, "found only {} crates", all.len());
    for k in &all {
        for c in circles(&graph(k)) {
            let names: Vec<String> = c.iter().map(|m| m.join("/")).collect();
            found.push(format!("{}: {}", k.name, names.join(" <-> ")));
        }
    }
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
}

#[test]
fn the_reader_sees_a_circle_by_hand() {
    // Three modules: a takes from b, b from c by `super::`, c from a.
    let k = Crate {
        name: "t".into(),
        files: [
            (vec!["a".to_string()], PathBuf::new()),
            (vec!["b".to_string()], PathBuf::new()),
            (vec!["b".to_string(), "c".to_string()], PathBuf::new()),
        ]
        .into_iter()
        .collect(),
    };
    let a = vec!["a".to_string()];
    let b = vec!["b".to_string()];
    let c = vec!["b".to_string(), "c".to_string()];
    let paths = named_paths("use crate::{b::{X, c::Y as Z}, a};\nfn f() { super::W; }");
    assert_eq!(
        paths[..3],
        [
            vec!["crate".to_string(), "b".into(), "X".into()],
            vec!["crate".into(), "b".into(), "c".into(), "Y".into()],
            vec!["crate".into(), "a".into()],
        ]
    );
    assert_eq!(target(&k, &a, &paths[0]), Some(b.clone()));
    assert_eq!(target(&k, &a, &paths[1]), Some(c.clone()));
    assert_eq!(
        target(&k, &c, &["super".into(), "W".into()]),
        Some(b.clone())
    );
    assert_eq!(target(&k, &b, &["c".into(), "Y".into()]), Some(c.clone()));
    assert_eq!(target(&k, &b, &["std".into(), "io".into()]), None);
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    edges.entry(a.clone()).or_default().insert(b.clone());
    edges.entry(b.clone()).or_default().insert(c.clone());
    edges.entry(c.clone()).or_default().insert(a.clone());
    assert_eq!(circles(&edges), vec![vec![a.clone(), b.clone(), c.clone()]]);
    edges.get_mut(&c).unwrap().clear();
    assert!(circles(&edges).is_empty());
}

#[test]
fn imports_after_a_test_module_declaration_and_inline_child_paths_count() {
    let text = "use a::X;\n#[cfg(test)]\nmod tests;\nuse b::*;\n#[cfg(test)]\nmod more {\n    use c::Y;\n}\n";
    let code = code_of(text);
    assert!(code.contains("use b::*;"), "{code}");
    assert!(!code.contains("use c::Y;"), "{code}");
    assert!(names_inline("let n = shaper::bytes(1);", "shaper"));
    assert!(!names_inline(
        "let n = crate::x::shaper::bytes(1);",
        "shaper"
    ));
    assert!(!names_inline("let n = my_shaper::bytes(1);", "shaper"));
    // `super::super::x` is one path, not also `super::x`.
    assert_eq!(
        named_paths("fn f() { super::super::x::Y; }"),
        vec![vec![
            "super".to_string(),
            "super".into(),
            "x".into(),
            "Y".into()
        ]]
    );
    // A grouped use names its members, not the parent.
    assert_eq!(
        named_paths("use super::{a::X, b::*};\n"),
        vec![
            vec!["super".to_string(), "a".into(), "X".into()],
            vec!["super".to_string(), "b".into()],
        ]
    );
}
