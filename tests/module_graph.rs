//! Every crate's modules depend on each other in one direction only.
//!
//! For each crate of the workspace this reads every file under its `src/`,
//! collects the crate paths it names (`use` statements, and `crate::`,
//! `super::` and `self::` paths in code; comments and string literals are
//! left out), resolves each path to the module that defines it (following
//! the re-exports of `lib.rs` and of every other module), and checks that
//! among the children of each module the graph "uses something of" has no
//! cycle. A module using its parent or a child of its own is not an edge: a
//! folder is one role, and its files may lean on each other through the
//! folder's `mod.rs`. A test module counts as part of the module it tests.
//!
//! No broker, no dependency: plain file reading, so `cargo test` runs it
//! everywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

#[path = "support/sources.rs"]
mod sources;

/// A module, by its path from the crate root (empty for the root).
type ModPath = Vec<String>;

/// The workspace's crates, by the folder that holds their `src/`, with
/// at least how many dependencies between their modules the check must
/// see (or it proves nothing).
const CRATES: &[(&str, usize)] = &[
    // The facade: its root and the re-exports under it.
    (".", 0),
    ("queuey-core", 40),
    ("queuey-macros", 2),
    ("queuey-tower", 30),
    ("queuey-rabbitmq", 60),
    ("queuey-redis", 2),
    ("queuey-ops", 40),
];

#[test]
fn every_crates_modules_have_no_import_circle() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = String::new();
    for (folder, least) in CRATES {
        let root = workspace.join(folder).join("src");
        let mut files = Vec::new();
        read_tree(&root, &mut files);
        assert!(
            !files.is_empty(),
            "found no source files under {}",
            root.display()
        );
        let graph = Graph::of(&files);
        let edges = graph.edges_under(&[]).len();
        assert!(
            edges >= *least,
            "{folder}: found {edges} dependencies between the crate's modules, expected at \
             least {least}: {:?}",
            graph.edges_under(&[])
        );
        let cycles = graph.cycles();
        if !cycles.is_empty() {
            let _ = writeln!(found, "{folder}:\n{}", graph.explain(&cycles));
        }
    }
    assert!(found.is_empty(), "{found}");
}

#[test]
fn a_circle_between_siblings_is_found_and_parents_and_children_are_not_edges() {
    let files = [
        (m(&[]), "mod a; mod b; mod c; pub use c::Thing;"),
        (m(&["a"]), "use crate::b::f; pub(crate) fn g() {}"),
        // Through the root's re-export of `c::Thing`, in code, not a `use`.
        (m(&["b"]), "pub(crate) fn f() { let _ = crate::Thing; }"),
        (
            m(&["c"]),
            "mod inner; // crate::a::g in a comment is not a use\n\
             pub struct Thing; fn h() { let _ = \"crate::b::f\"; super::a::g(); }",
        ),
        // A child using its parent, and the parent its child: no edge.
        (m(&["c", "inner"]), "use super::Thing; use crate::c::inner;"),
    ];
    let files: Vec<_> = files
        .into_iter()
        .map(|(path, text)| (path, text.to_owned()))
        .collect();
    let graph = Graph::of(&files);
    let cycles = graph.cycles();
    assert_eq!(cycles, vec![vec![m(&["a"]), m(&["b"]), m(&["c"])]]);
    assert!(graph.edges_under(&m(&["c"])).is_empty());
    let text = graph.explain(&cycles);
    assert!(text.contains("a -> b -> c -> a"), "{text}");

    // Break the circle: `c` no longer calls into `a`.
    let mut acyclic = files.clone();
    acyclic[3].1 = "mod inner; pub struct Thing;".to_owned();
    assert!(Graph::of(&acyclic).cycles().is_empty());
}

#[test]
fn use_trees_expand_to_every_path_they_name() {
    let items = use_items(&tokens("use crate::{a::{self, B}, c::*, d::E as F, e::G};"));
    let paths: Vec<String> = items.iter().map(|i| i.path.join("::")).collect();
    assert_eq!(
        paths,
        [
            "crate::a",
            "crate::a::B",
            "crate::c",
            "crate::d::E",
            "crate::e::G"
        ]
    );
    assert_eq!(items[3].name, "F");
    assert!(items[2].glob);
}

fn m(path: &[&str]) -> ModPath {
    path.iter().map(|s| (*s).to_owned()).collect()
}

/// Every `.rs` file under `root`, with the module path its place gives it.
fn read_tree(root: &Path, files: &mut Vec<(ModPath, String)>) {
    for (path, text) in sources::rust_files(root) {
        let relative = path.strip_prefix(root).expect("under the root");
        let mut module: ModPath = relative
            .with_extension("")
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if matches!(
            module.last().map(String::as_str),
            Some("mod" | "lib" | "main")
        ) {
            module.pop();
        }
        files.push((module, text));
    }
}

// ===== the graph =====

/// Which module uses which, with the evidence.
struct Graph {
    /// Every module found: files and inline `mod name { .. }` blocks.
    modules: BTreeSet<ModPath>,
    /// `pub use` re-exports: (module, name) to the path it stands for.
    reexports: BTreeMap<(ModPath, String), Vec<String>>,
    /// Every crate path named: (the module naming it, the absolute path).
    references: Vec<(ModPath, Vec<String>)>,
}

impl Graph {
    fn of(files: &[(ModPath, String)]) -> Graph {
        let mut graph = Graph {
            modules: files.iter().map(|(module, _)| module.clone()).collect(),
            reexports: BTreeMap::new(),
            references: Vec::new(),
        };
        let mut named = Vec::new();
        for (module, text) in files {
            scan(module, &tokens(text), &mut graph.modules, &mut named);
        }
        // Relative paths resolve once every module is known.
        for (module, item, public) in named {
            let Some(path) = graph.absolute(&module, &item.path) else {
                continue;
            };
            if public && !item.glob {
                graph
                    .reexports
                    .insert((module.clone(), item.name.clone()), path.clone());
            }
            graph.references.push((module, path));
        }
        graph
    }

    /// `path` as named in `module`, from the crate root; `None` for a path
    /// outside the crate.
    fn absolute(&self, module: &ModPath, path: &[String]) -> Option<Vec<String>> {
        let first = path.first()?;
        let mut base = match first.as_str() {
            "crate" => Vec::new(),
            "self" | "super" => module.clone(),
            child => {
                let mut candidate = module.clone();
                candidate.push(child.to_owned());
                if !self.modules.contains(&candidate) {
                    // Another crate (`std`, `lapin`, ...) or a local name.
                    return None;
                }
                module.clone()
            }
        };
        let mut rest = path;
        if first == "crate" || first == "self" {
            rest = &path[1..];
        }
        while let Some(("super", tail)) = rest.split_first().map(|(h, t)| (h.as_str(), t)) {
            base.pop()?;
            rest = tail;
        }
        base.extend(rest.iter().cloned());
        Some(base)
    }

    /// The module that defines what `path` names, through re-exports.
    fn home(&self, path: &[String]) -> ModPath {
        let mut path = path.to_vec();
        for _ in 0..16 {
            let known = (0..=path.len())
                .rev()
                .find(|&n| self.modules.contains(&path[..n]))
                .unwrap_or(0);
            let module = path[..known].to_vec();
            let Some(name) = path.get(known) else {
                return module;
            };
            match self.reexports.get(&(module.clone(), name.clone())) {
                Some(target) if *target != path[..=known] => {
                    let mut next = target.clone();
                    next.extend(path[known + 1..].iter().cloned());
                    path = next;
                }
                _ => return module,
            }
        }
        path
    }

    /// The edges between the children of `parent`: (from, to) to the
    /// references that make them.
    fn edges_under(&self, parent: &[String]) -> BTreeMap<(String, String), Vec<String>> {
        let mut edges: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
        for (from, path) in &self.references {
            let to = self.home(path);
            let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
            if common != parent.len() || from[..common] != *parent {
                continue;
            }
            let (Some(a), Some(b)) = (from.get(common), to.get(common)) else {
                // One is the other's ancestor.
                continue;
            };
            edges
                .entry((a.clone(), b.clone()))
                .or_default()
                .push(format!("{} uses {}", show(from), path.join("::")));
        }
        edges
    }

    /// Every cycle among siblings, as the modules on it, each cycle
    /// starting at its smallest module.
    fn cycles(&self) -> Vec<Vec<ModPath>> {
        let parents: BTreeSet<ModPath> = self
            .modules
            .iter()
            .filter_map(|m| m.split_last().map(|(_, p)| p.to_vec()))
            .collect();
        let mut found = Vec::new();
        for parent in parents {
            let edges = self.edges_under(&parent);
            let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
            for (a, b) in edges.keys() {
                next.entry(a.as_str()).or_default().push(b.as_str());
            }
            for cycle in simple_cycles(&next) {
                found.push(
                    cycle
                        .into_iter()
                        .map(|name| {
                            let mut module = parent.clone();
                            module.push(name.to_owned());
                            module
                        })
                        .collect(),
                );
            }
        }
        found
    }

    /// A failure message: each cycle, and what makes each of its edges.
    fn explain(&self, cycles: &[Vec<ModPath>]) -> String {
        let mut text = String::from(
            "modules of the crate depend on each other in a circle; move what both \
             sides need into a module below them:\n",
        );
        for cycle in cycles {
            let names: Vec<String> = cycle.iter().map(|m| show(m)).collect();
            let _ = writeln!(text, "\n  {} -> {}", names.join(" -> "), names[0]);
            let parent = &cycle[0][..cycle[0].len() - 1];
            let edges = self.edges_under(parent);
            for (i, from) in cycle.iter().enumerate() {
                let to = &cycle[(i + 1) % cycle.len()];
                let key = (from.last().unwrap().clone(), to.last().unwrap().clone());
                for why in edges.get(&key).into_iter().flatten().take(3) {
                    let _ = writeln!(text, "    {why}");
                }
            }
        }
        text
    }
}

fn show(module: &[String]) -> String {
    if module.is_empty() {
        "the crate root".to_owned()
    } else {
        module.join("::")
    }
}

/// The elementary cycles of a small graph, each once, starting at its
/// smallest node.
fn simple_cycles<'a>(next: &BTreeMap<&'a str, Vec<&'a str>>) -> Vec<Vec<&'a str>> {
    fn walk<'a>(
        start: &'a str,
        at: &'a str,
        next: &BTreeMap<&'a str, Vec<&'a str>>,
        path: &mut Vec<&'a str>,
        found: &mut Vec<Vec<&'a str>>,
    ) {
        for &to in next.get(at).into_iter().flatten() {
            if to == start {
                found.push(path.clone());
            } else if to > start && !path.contains(&to) {
                path.push(to);
                walk(start, to, next, path, found);
                path.pop();
            }
        }
    }
    let mut found = Vec::new();
    for &start in next.keys() {
        walk(start, start, next, &mut vec![start], &mut found);
    }
    found
}

// ===== reading source =====

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    /// `::`
    Path,
    Punct(char),
}

/// The tokens of `text` that matter here, comments, strings and character
/// literals left out.
fn tokens(text: &str) -> Vec<Token> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let ident_char = |c: char| c.is_alphanumeric() || c == '_';
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if c == '\'' {
            // A character literal ('x', '\n', '\u{..}'), or a lifetime.
            if next == Some('\\') {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
            }
        } else if ident_char(c) {
            let start = i;
            while i < chars.len() && ident_char(chars[i]) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            // A raw string: r"..", r#".."#, br#".."#.
            if (word == "r" || word == "br") && matches!(chars.get(i), Some('"' | '#')) {
                let mut hashes = 0;
                while chars.get(i) == Some(&'#') {
                    hashes += 1;
                    i += 1;
                }
                if chars.get(i) == Some(&'"') {
                    i += 1;
                    loop {
                        if i >= chars.len() {
                            break;
                        }
                        if chars[i] == '"' && (1..=hashes).all(|k| chars.get(i + k) == Some(&'#')) {
                            i += 1 + hashes;
                            break;
                        }
                        i += 1;
                    }
                    continue;
                }
            }
            if word == "b" && chars.get(i) == Some(&'"') {
                continue; // the string itself is skipped next
            }
            if word == "b" && chars.get(i) == Some(&'\'') {
                continue;
            }
            out.push(Token::Ident(word));
        } else if c == ':' && next == Some(':') {
            out.push(Token::Path);
            i += 2;
        } else {
            if !c.is_whitespace() {
                out.push(Token::Punct(c));
            }
            i += 1;
        }
    }
    out
}

/// One path a `use` statement names, and the name it brings in.
#[derive(Debug, Clone)]
struct UseItem {
    path: Vec<String>,
    name: String,
    glob: bool,
}

/// Walks the tokens of the file of `module`: records inline modules, and
/// every path named, as (module, item, whether it is a `pub` re-export).
fn scan(
    module: &ModPath,
    tokens: &[Token],
    modules: &mut BTreeSet<ModPath>,
    named: &mut Vec<(ModPath, UseItem, bool)>,
) {
    // The inline modules open here, with the brace depth they opened at.
    let mut stack: Vec<(String, usize)> = Vec::new();
    let mut depth = 0;
    let mut public = false;
    let mut i = 0;
    let here = |stack: &[(String, usize)]| {
        let mut path = module.clone();
        path.extend(stack.iter().map(|(name, _)| name.clone()));
        path
    };
    while i < tokens.len() {
        match &tokens[i] {
            Token::Ident(word) if word == "pub" => {
                public = true;
                i += 1;
                if tokens.get(i) == Some(&Token::Punct('(')) {
                    while i < tokens.len() && tokens[i] != Token::Punct(')') {
                        i += 1;
                    }
                    i += 1;
                }
                continue;
            }
            Token::Ident(word) if word == "mod" => {
                if let (Some(Token::Ident(name)), Some(after)) =
                    (tokens.get(i + 1), tokens.get(i + 2))
                {
                    let mut path = here(&stack);
                    path.push(name.clone());
                    modules.insert(path);
                    if *after == Token::Punct('{') {
                        depth += 1;
                        stack.push((name.clone(), depth));
                        i += 3;
                        public = false;
                        continue;
                    }
                }
            }
            Token::Ident(word) if word == "use" => {
                let end = tokens[i..]
                    .iter()
                    .position(|t| *t == Token::Punct(';'))
                    .map_or(tokens.len(), |n| i + n);
                for item in use_items(&tokens[i..end]) {
                    named.push((here(&stack), item, public));
                }
                i = end + 1;
                public = false;
                continue;
            }
            Token::Ident(word)
                if matches!(word.as_str(), "crate" | "super" | "self")
                    && tokens.get(i + 1) == Some(&Token::Path) =>
            {
                let mut path = vec![word.clone()];
                let mut j = i + 1;
                while tokens.get(j) == Some(&Token::Path) {
                    match tokens.get(j + 1) {
                        Some(Token::Ident(segment)) => path.push(segment.clone()),
                        _ => break,
                    }
                    j += 2;
                }
                let name = path.last().cloned().unwrap_or_default();
                named.push((
                    here(&stack),
                    UseItem {
                        path,
                        name,
                        glob: false,
                    },
                    false,
                ));
                i = j;
                public = false;
                continue;
            }
            Token::Punct('{') => depth += 1,
            Token::Punct('}') => {
                if stack.last().is_some_and(|(_, opened)| *opened == depth) {
                    stack.pop();
                }
                depth = depth.saturating_sub(1);
            }
            _ => {}
        }
        public = false;
        i += 1;
    }
}

/// The items of one `use` statement (its tokens from `use` to before `;`).
fn use_items(tokens: &[Token]) -> Vec<UseItem> {
    let mut items = Vec::new();
    let start = usize::from(tokens.first() == Some(&Token::Ident("use".to_owned())));
    if tokens.get(start) == Some(&Token::Path) {
        return items; // `use ::other_crate::..`
    }
    tree(tokens, &mut { start }, Vec::new(), &mut items);
    items
}

/// Parses one use tree at `*at` under `prefix`.
fn tree(tokens: &[Token], at: &mut usize, prefix: Vec<String>, items: &mut Vec<UseItem>) {
    let mut path = prefix;
    loop {
        match tokens.get(*at) {
            Some(Token::Punct('{')) => {
                *at += 1;
                loop {
                    match tokens.get(*at) {
                        Some(Token::Punct('}')) | None => {
                            *at += 1;
                            return;
                        }
                        Some(Token::Punct(',')) => *at += 1,
                        Some(_) => tree(tokens, at, path.clone(), items),
                    }
                }
            }
            Some(Token::Punct('*')) => {
                *at += 1;
                let name = path.last().cloned().unwrap_or_default();
                items.push(UseItem {
                    path,
                    name,
                    glob: true,
                });
                return;
            }
            Some(Token::Ident(segment)) => {
                *at += 1;
                if tokens.get(*at) == Some(&Token::Path) {
                    path.push(segment.clone());
                    *at += 1;
                    continue;
                }
                let mut name = segment.clone();
                if segment != "self" {
                    path.push(segment.clone());
                } else if let Some(last) = path.last() {
                    name = last.clone();
                }
                if tokens.get(*at) == Some(&Token::Ident("as".to_owned())) {
                    if let Some(Token::Ident(alias)) = tokens.get(*at + 1) {
                        name = alias.clone();
                    }
                    *at += 2;
                }
                items.push(UseItem {
                    path,
                    name,
                    glob: false,
                });
                return;
            }
            _ => {
                *at += 1;
                return;
            }
        }
    }
}
