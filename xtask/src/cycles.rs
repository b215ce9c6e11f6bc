//! `cargo xtask cycles [DIR...]`: fails on a cycle among the modules of a source directory, as
//! their `use crate::...`, `use super::...`, `use self::...` (and a crate root's `use child::...`)
//! declarations import each other. A module is a file (`a.rs`, `a/mod.rs`, and the directory's
//! `lib.rs`, `main.rs` or `mod.rs` for the directory's own module); an inline `mod x { ... }`
//! (a file's tests) counts as its file. Imports of anything outside the directory are not edges.
//!
//! Why: modules that import each other in a circle cannot be understood, tested or moved one at
//! a time; a layered directory can, bottom up.
//!
//! Without arguments, CI's policy ([`ci`]): `src/engine`, `python/src` and `capi/src` must have
//! none ([`ENFORCED`]). With directories, each of them must have none.
use anyhow::{bail, Context, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Directories that must have no import cycle.
pub const ENFORCED: &[&str] = &["src/engine", "python/src", "capi/src"];
/// Directories whose cycles are printed, not failed on (yet).
pub const REPORTED: &[&str] = &[];

/// `cargo xtask cycles [DIR...]`.
pub fn task(root: &Path, dirs: &[PathBuf]) -> Result<()> {
    if dirs.is_empty() {
        return ci(root);
    }
    let dirs: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    enforce(root, &dirs.iter().map(String::as_str).collect::<Vec<_>>())
}

/// CI's check: fails on a cycle in [`ENFORCED`], prints those of [`REPORTED`].
pub fn ci(root: &Path) -> Result<()> {
    for dir in REPORTED {
        let cycles = find(&root.join(dir))?;
        if cycles.is_empty() {
            println!("cycles: {dir}: none (add it to cycles::ENFORCED)");
        } else {
            println!(
                "cycles: {dir}: {} (reported, not enforced yet):\n{}",
                cycles.len(),
                describe(&cycles)
            );
        }
    }
    enforce(root, ENFORCED)
}

fn enforce(root: &Path, dirs: &[&str]) -> Result<()> {
    let mut failed = Vec::new();
    for dir in dirs {
        let cycles = find(&root.join(dir))?;
        if cycles.is_empty() {
            println!("cycles: {dir}: none");
        } else {
            eprintln!("cycles: {dir}:\n{}", describe(&cycles));
            failed.push(*dir);
        }
    }
    if !failed.is_empty() {
        bail!("import cycles among the modules of {}", failed.join(", "));
    }
    Ok(())
}

fn describe(groups: &[Group]) -> String {
    groups
        .iter()
        .map(|g| {
            format!(
                "  {} modules import each other: {}\n    e.g. {} -> {}",
                g.modules.len(),
                g.modules.join(", "),
                g.cycle.join(" -> "),
                g.cycle[0]
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Modules that import each other, directly or not (a strongly connected component of more
/// than one module).
#[derive(Debug, PartialEq)]
pub struct Group {
    /// Every module of the group, sorted.
    pub modules: Vec<String>,
    /// A shortest cycle through its first module, in import order.
    pub cycle: Vec<String>,
}

/// The groups of modules of `dir` that import each other; none in a layered directory.
pub fn find(dir: &Path) -> Result<Vec<Group>> {
    let base = module_of_dir(dir)?;
    let mut files = Vec::new();
    collect(dir, dir, &mut files)?;
    let mut sources = Vec::new();
    for (rel, path) in files {
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let mut module = base.clone();
        module.extend(rel);
        sources.push((module, text));
    }
    Ok(cycles_of(&graph(&base, &sources)))
}

/// The module path of `dir` within its crate: the crate's `src/` (the directory with `lib.rs`
/// or `main.rs`) is the root, `src/engine` is `engine`.
fn module_of_dir(dir: &Path) -> Result<Vec<String>> {
    let mut at = dir.to_path_buf();
    let mut below = Vec::new();
    loop {
        if at.join("lib.rs").is_file() || at.join("main.rs").is_file() {
            below.reverse();
            return Ok(below);
        }
        let name = at.file_name().map(|n| n.to_string_lossy().into_owned());
        match (name, at.parent()) {
            (Some(name), Some(parent)) => {
                below.push(name);
                at = parent.to_path_buf();
            }
            _ => bail!("{}: no lib.rs or main.rs above it", dir.display()),
        }
    }
}

/// Every `.rs` file under `dir`, with its module path relative to `top` (`a.rs`, `a/mod.rs`:
/// `[a]`; `top`'s own `lib.rs`, `main.rs`, `mod.rs`: `[]`), sorted.
fn collect(top: &Path, dir: &Path, out: &mut Vec<(Vec<String>, PathBuf)>) -> Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .collect::<std::io::Result<_>>()?;
    entries.sort_by_key(|e| e.path());
    for e in entries {
        let path = e.path();
        if path.is_dir() {
            collect(top, &path, out)?;
            continue;
        }
        if path.extension().is_none_or(|x| x != "rs") {
            continue;
        }
        let rel = path
            .strip_prefix(top)
            .expect("under top")
            .with_extension("");
        let mut module: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let last = module.last().map(String::as_str);
        if last == Some("mod") || (module.len() == 1 && matches!(last, Some("lib" | "main"))) {
            module.pop();
        }
        out.push((module, path));
    }
    Ok(())
}

/// The import graph of `sources` (each a module's absolute path and its text) whose modules
/// lie under `base`: module -> the modules it imports, by name ([`name`]).
fn graph(base: &[String], sources: &[(Vec<String>, String)]) -> BTreeMap<String, BTreeSet<String>> {
    let modules: BTreeSet<&[String]> = sources.iter().map(|(m, _)| m.as_slice()).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, text) in sources {
        let from = name(module);
        let entry = edges.entry(from.clone()).or_default();
        for (scope, path) in imports(text) {
            let mut at = module.clone();
            at.extend(scope);
            let Some(target) = resolve(&at, &path, &modules) else {
                continue;
            };
            if target.starts_with(base) {
                let to = name(&target);
                if to != from {
                    entry.insert(to);
                }
            }
        }
    }
    edges
}

/// A module's display name: `crate::a::b`.
fn name(module: &[String]) -> String {
    std::iter::once("crate")
        .chain(module.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join("::")
}

/// The known module that `path`, imported from module `at`, names (the longest known prefix
/// of its absolute path); `None` for another crate's items.
fn resolve(at: &[String], path: &[String], modules: &BTreeSet<&[String]>) -> Option<Vec<String>> {
    let first = path.first()?;
    let mut abs: Vec<String> = match first.as_str() {
        "crate" => path[1..].to_vec(),
        "self" => at.iter().chain(&path[1..]).cloned().collect(),
        "super" => {
            let ups = path.iter().take_while(|s| *s == "super").count();
            let keep = at.len().checked_sub(ups)?;
            at[..keep].iter().chain(&path[ups..]).cloned().collect()
        }
        // A bare path names a child module of `at` (a crate root's `pub use child::x`), or
        // another crate.
        _ => {
            let mut child = at.to_vec();
            child.push(first.clone());
            if !modules.contains(child.as_slice()) {
                return None;
            }
            at.iter().chain(path).cloned().collect()
        }
    };
    while !modules.contains(abs.as_slice()) {
        abs.pop()?;
    }
    Some(abs)
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Punct(char),
    Path,
}

/// The `use` declarations of a file's text: each imported path, with the inline modules
/// (`mod tests { ... }`) it sits in.
fn imports(text: &str) -> Vec<(Vec<String>, Vec<String>)> {
    let toks = tokens(text);
    let mut out = Vec::new();
    // The open braces: `Some(name)` for an inline module's.
    let mut braces: Vec<Option<String>> = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        match &toks[i] {
            Tok::Ident(kw) if kw == "mod" => {
                if let (Some(Tok::Ident(m)), Some(Tok::Punct('{'))) =
                    (toks.get(i + 1), toks.get(i + 2))
                {
                    braces.push(Some(m.clone()));
                    i += 3;
                    continue;
                }
            }
            Tok::Ident(kw) if kw == "use" => {
                i += 1;
                let scope: Vec<String> = braces.iter().flatten().cloned().collect();
                let mut paths = Vec::new();
                use_tree(&toks, &mut i, Vec::new(), &mut paths);
                while i < toks.len() && toks[i] != Tok::Punct(';') {
                    i += 1;
                }
                out.extend(paths.into_iter().map(|p| (scope.clone(), p)));
            }
            Tok::Punct('{') => braces.push(None),
            Tok::Punct('}') => {
                braces.pop();
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// One use tree at `toks[*i]`, expanded into its paths (a glob, or `self` in braces, names
/// the prefix itself). A leading `::` names another crate: no path.
fn use_tree(toks: &[Tok], i: &mut usize, mut prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    if prefix.is_empty() && toks.get(*i) == Some(&Tok::Path) {
        // `use ::other_crate::...`: skip the tree.
        return;
    }
    loop {
        match toks.get(*i) {
            Some(Tok::Ident(s)) => {
                // `self` after a prefix (`a::{self, b}`) names the prefix.
                if s != "self" || prefix.is_empty() {
                    prefix.push(s.clone());
                }
                *i += 1;
                if toks.get(*i) == Some(&Tok::Path) {
                    *i += 1;
                    continue;
                }
                if toks.get(*i) == Some(&Tok::Ident("as".into())) {
                    *i += 2;
                }
                out.push(prefix);
                return;
            }
            Some(Tok::Punct('*')) => {
                *i += 1;
                out.push(prefix);
                return;
            }
            Some(Tok::Punct('{')) => {
                *i += 1;
                while let Some(t) = toks.get(*i) {
                    match t {
                        Tok::Punct('}') => {
                            *i += 1;
                            break;
                        }
                        Tok::Punct(',') => *i += 1,
                        _ => use_tree(toks, i, prefix.clone(), out),
                    }
                }
                return;
            }
            _ => return,
        }
    }
}

/// Identifiers, `::` and single punctuation of Rust source, without comments, string, byte
/// string, raw string and character literals (so braces and `use` inside them do not count).
fn tokens(text: &str) -> Vec<Tok> {
    let c: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        match c[i] {
            '/' if peek(&c, i + 1) == '/' => {
                while i < c.len() && c[i] != '\n' {
                    i += 1;
                }
            }
            '/' if peek(&c, i + 1) == '*' => {
                let mut depth = 0;
                while i < c.len() {
                    if c[i] == '/' && peek(&c, i + 1) == '*' {
                        depth += 1;
                        i += 2;
                    } else if c[i] == '*' && peek(&c, i + 1) == '/' {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
            }
            '"' => i = skip_string(&c, i + 1),
            'r' | 'b' if is_raw_string(&c, i) => {
                // r"..", r#".."#, br#".."#: no escapes; ends at a quote and as many hashes.
                while c[i] != '"' && c[i] != '#' {
                    i += 1;
                }
                let hashes = c[i..].iter().take_while(|&&x| x == '#').count();
                i += hashes + 1;
                while i < c.len() {
                    if c[i] == '"'
                        && c[i + 1..]
                            .iter()
                            .take(hashes)
                            .filter(|&&x| x == '#')
                            .count()
                            == hashes
                    {
                        i += 1 + hashes;
                        break;
                    }
                    i += 1;
                }
            }
            'b' if peek(&c, i + 1) == '"' => i = skip_string(&c, i + 2),
            '\'' => {
                // A character literal ('x', '\n', '\u{..}'); else a lifetime, kept as nothing.
                if peek(&c, i + 1) == '\\' {
                    // Past the quote, the backslash and the escaped character ('\'' too).
                    i += 3;
                    while i < c.len() && c[i] != '\'' {
                        i += 1;
                    }
                    i += 1;
                } else if peek(&c, i + 2) == '\'' {
                    i += 3;
                } else {
                    i += 1;
                }
            }
            ':' if peek(&c, i + 1) == ':' => {
                out.push(Tok::Path);
                i += 2;
            }
            x if x.is_alphabetic() || x == '_' => {
                let start = i;
                while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                    i += 1;
                }
                out.push(Tok::Ident(c[start..i].iter().collect()));
            }
            x if x.is_whitespace() => i += 1,
            x => {
                out.push(Tok::Punct(x));
                i += 1;
            }
        }
    }
    out
}

/// The character at `i`, or NUL past the end.
fn peek(c: &[char], i: usize) -> char {
    c.get(i).copied().unwrap_or('\0')
}

/// Past the end of a string literal whose text starts at `i`.
fn skip_string(c: &[char], mut i: usize) -> usize {
    while i < c.len() && c[i] != '"' {
        i += if c[i] == '\\' { 2 } else { 1 };
    }
    i + 1
}

/// Whether a raw (byte) string starts at `i`: `r"`, `r#`, `br"`, `br#`, not in an identifier.
fn is_raw_string(c: &[char], i: usize) -> bool {
    if i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_') {
        return false;
    }
    let r = if c[i] == 'b' { i + 1 } else { i };
    c.get(r) == Some(&'r') && matches!(c.get(r + 1), Some('"' | '#'))
}

/// Every strongly connected component of more than one module (Tarjan), sorted.
fn cycles_of(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Group> {
    struct Tarjan<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        components: Vec<BTreeSet<&'a str>>,
    }
    impl<'a> Tarjan<'a> {
        fn visit(&mut self, v: &'a str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.edges.get(v).into_iter().flatten() {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.on_stack.contains(w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = BTreeSet::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.insert(w);
                    if w == v {
                        break;
                    }
                }
                self.components.push(component);
            }
        }
    }
    let mut t = Tarjan {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        components: Vec::new(),
    };
    for v in edges.keys() {
        if !t.index.contains_key(v.as_str()) {
            t.visit(v);
        }
    }
    let mut groups: Vec<Group> = t
        .components
        .iter()
        .filter(|c| c.len() > 1)
        .map(|c| Group {
            modules: c.iter().map(|m| m.to_string()).collect(),
            cycle: cycle_in(edges, c),
        })
        .collect();
    groups.sort_by(|a, b| a.modules.cmp(&b.modules));
    groups
}

/// A shortest cycle through the smallest module of `component` (breadth first, inside it).
fn cycle_in(edges: &BTreeMap<String, BTreeSet<String>>, component: &BTreeSet<&str>) -> Vec<String> {
    let start = *component.first().expect("a component has a module");
    let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for w in edges.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !component.contains(w) {
                continue;
            }
            if w == start {
                let mut path = vec![v.to_string()];
                let mut at = v;
                while at != start {
                    at = came_from[at];
                    path.push(at.to_string());
                }
                path.reverse();
                return path;
            }
            if w != start && !came_from.contains_key(w) {
                came_from.insert(w, v);
                queue.push_back(w);
            }
        }
    }
    unreachable!("a strongly connected component has a cycle through each module")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module(path: &str, text: &str) -> (Vec<String>, String) {
        let m = path
            .split('/')
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        (m, text.to_string())
    }

    /// The cycle shown for each group.
    fn cycles(base: &[&str], sources: &[(Vec<String>, String)]) -> Vec<Vec<String>> {
        let base: Vec<String> = base.iter().map(|s| s.to_string()).collect();
        cycles_of(&graph(&base, sources))
            .into_iter()
            .map(|g| g.cycle)
            .collect()
    }

    #[test]
    fn use_trees_expand_into_paths() {
        let got = imports(
            "pub(crate) use crate::{a::X, b::{self, c::Y as Z}, d::*};\n\
             use super::super::e; use ::ext::f; use std::g;",
        );
        let paths: Vec<String> = got.into_iter().map(|(_, p)| p.join("::")).collect();
        assert_eq!(
            paths,
            [
                "crate::a::X",
                "crate::b",
                "crate::b::c::Y",
                "crate::d",
                "super::super::e",
                "std::g"
            ]
        );
    }

    #[test]
    fn comments_strings_and_inline_modules() {
        let text = "// use crate::a;\n/* use crate::b; { */ const S: &str = \"use crate::c; {\";\n\
                    const R: &str = r#\"\"{ use crate::d;\"#; const C: [char; 3] = ['{', '\\'', '\\u{7b}'];\n\
                    fn f<'a>(x: &'a u8) {}\n\
                    #[cfg(test)] mod tests { use super::*; use crate::e; }\n use crate::f;";
        let got: Vec<(String, String)> = imports(text)
            .into_iter()
            .map(|(s, p)| (s.join("::"), p.join("::")))
            .collect();
        let want = [("tests", "super"), ("tests", "crate::e"), ("", "crate::f")];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(s, p)| (s.to_string(), p.to_string()))
            .collect();
        assert_eq!(got, want);
    }

    /// The circle capi/src had: args -> handle -> held -> args, and handle <-> held.
    #[test]
    fn finds_a_circle_of_three() {
        let sources = [
            module(
                "",
                "mod args; mod handle; mod held; pub use held::srb_release;",
            ),
            module("args", "use crate::handle::srb_readback; use srb::X;"),
            module("handle", "use crate::held::HeldTable; use std::sync::Arc;"),
            module(
                "held",
                "use crate::args::handle;\nuse crate::handle::{srb_readback, Inner};",
            ),
            module("codes", "#[cfg(test)] mod tests { use super::*; }"),
        ];
        assert_eq!(
            cycles(&[], &sources),
            [["crate::args", "crate::handle", "crate::held"]]
        );
    }

    #[test]
    fn layers_have_no_cycle() {
        let sources = [
            module("", "mod a; mod b; pub use a::f; pub use b::g;"),
            module(
                "a",
                "use crate::b::G; #[cfg(test)] mod tests { use super::*; use crate::b; }",
            ),
            module("b", "pub struct G;"),
        ];
        assert_eq!(cycles(&[], &sources), Vec::<Vec<String>>::new());
    }

    /// `super` from a file of a subdirectory and from its inline tests; imports from outside
    /// the directory are not edges.
    #[test]
    fn super_and_the_directory_s_own_module() {
        let base = ["engine"];
        let sources = [
            module(
                "engine",
                "mod host; mod ring; use self::ring::Ring; use crate::error::E;",
            ),
            module("engine/host", "mod wait; use super::Deadline;"),
            module("engine/host/wait", "use super::super::ring::R;"),
            module(
                "engine/ring",
                "use crate::engine::host::wait::W; mod tests { use super::super::host; }",
            ),
        ];
        // engine -> ring -> host::wait -> ring, ring (its tests) -> host -> engine: one group,
        // shown by its shortest cycle through crate::engine.
        assert_eq!(
            cycles(&base, &sources),
            [[
                "crate::engine",
                "crate::engine::ring",
                "crate::engine::host"
            ]]
        );
    }

    /// The repository's capi/src, which CI enforces, has none.
    #[test]
    fn capi_src_has_no_cycle() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("the repository");
        assert_eq!(find(&root.join("capi/src")).unwrap(), Vec::<Group>::new());
    }
}
