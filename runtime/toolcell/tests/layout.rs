//! The crate's layout is its architecture: the stages import only the stages before them, the
//! crates depend only on the crates before them, and the core's dependency tree carries none of
//! the front ends' crates (issue 24); no function is longer than a screen of decisions, and a
//! long file says why it is long.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The core's stages, each allowed to import only those before it (`digest` and `sync` are
/// leaves anyone may use; `lib.rs` and `fuzzing.rs` sit above them all).
const STAGES: &[&str] = &[
    "digest", "sync", "hostfs", "call", "tool", "audit", "policy", "validate", "gate", "wasm",
    "pipeline",
];

/// Packages an embedder of the core must not compile: registry clients, signing, MCP, OAuth,
/// the command line's crates, the metrics server.
const FORBIDDEN: &[&str] = &[
    "sigstore",
    "oci-client",
    "oci-wasm",
    "rmcp",
    "jsonwebtoken",
    "clap",
    "indicatif",
    "prometheus-client",
    "reqwest",
];

/// The most packages `cargo tree -p toolcell -e normal` may list (issue 24's budget).
const MAX_CORE_PACKAGES: usize = 250;

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a source directory") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            sources(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            found.push(path);
        }
    }
}

/// The module (`call::registry`) of the source file at `relative` (to `src/`).
fn module_of(relative: &Path) -> String {
    let text = relative
        .with_extension("")
        .to_string_lossy()
        .replace('/', "::");
    text.strip_suffix("::mod").unwrap_or(&text).to_owned()
}

/// The modules among `modules` that `text`, the source of `module`, names (`crate::a::b::Item`
/// names `a::b` if that is a module, else `a`; `crate::a::{b, c}` names `a::b` and `a::c`
/// where those are modules; `super::c` in `a::b` names `a::c`, or `a`), outside comments and
/// unit tests. A parent's own children named by a bare path (`mod c; use c::Item;`) are not
/// imports: a module owns its children.
fn imported_modules(module: &str, text: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or(text);
    // What `super::` stands for in this module: its parent's path (empty: the crate root).
    let parent = module.rsplit_once("::").map_or("", |(parent, _)| parent);
    let mut found = BTreeSet::new();
    for line in code.lines() {
        let line = line.trim_start();
        if line.starts_with("//") {
            continue;
        }
        let mut rest = line;
        while let Some((at, prefix)) = ["crate::", "super::"]
            .iter()
            .filter_map(|prefix| rest.find(prefix).map(|at| (at, *prefix)))
            .min()
        {
            rest = &rest[at + prefix.len()..];
            let path: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            let base = match prefix {
                "super::" => parent,
                _ => "",
            };
            let parts: Vec<&str> = base
                .split("::")
                .chain(path.split("::"))
                .filter(|part| !part.is_empty())
                .collect();
            let longest = (1..=parts.len())
                .rev()
                .map(|k| parts[..k].join("::"))
                .find(|candidate| modules.contains(candidate));
            if let Some(module) = &longest {
                found.insert(module.clone());
            }
            // `crate::a::{b, c}`: the braces may name submodules.
            let after = &rest[path.len()..];
            if let (Some(base), Some(inner)) = (
                longest,
                after
                    .strip_prefix('{')
                    .and_then(|inner| inner.split('}').next()),
            ) {
                for item in inner.split(',') {
                    let candidate = format!("{base}::{}", item.trim());
                    if modules.contains(&candidate) {
                        found.insert(candidate);
                    }
                }
            }
        }
    }
    found
}

/// Every module of the crate whose sources are in `src` but those in `above` (the crate root
/// and whatever sits above all the rest), with the modules it imports by a `crate::` path.
fn imports_in(src: &Path, above: &[&str]) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    sources(src, &mut files);
    let texts: Vec<(String, String)> = files
        .iter()
        .map(|file| {
            let relative = file.strip_prefix(src).expect("inside src");
            (
                module_of(relative),
                std::fs::read_to_string(file).expect("readable"),
            )
        })
        .filter(|(module, _)| !above.contains(&module.as_str()))
        .collect();
    let modules: BTreeSet<String> = texts.iter().map(|(module, _)| module.clone()).collect();
    texts
        .iter()
        .map(|(module, text)| {
            let mut imported = imported_modules(module, text, &modules);
            imported.remove(module);
            (module.clone(), imported)
        })
        .collect()
}

/// Every module of the core but `lib` and `fuzzing` (which sit above the stages), with the
/// modules it imports.
fn core_imports() -> BTreeMap<String, BTreeSet<String>> {
    imports_in(&manifest_dir().join("src"), &["lib", "fuzzing"])
}

/// Panics with the circle if a module of `edges` imports, directly or through others, a module
/// that imports it back.
fn assert_no_circle(edges: &BTreeMap<String, BTreeSet<String>>) {
    // A depth-first search: a module met again while still on the path closes a circle.
    fn visit(
        module: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) {
        if let Some(at) = path.iter().position(|on| on == module) {
            panic!("an import circle: {} -> {module}", path[at..].join(" -> "));
        }
        if done.contains(module) {
            return;
        }
        path.push(module.to_owned());
        for next in edges.get(module).into_iter().flatten() {
            visit(next, edges, path, done);
        }
        path.pop();
        done.insert(module.to_owned());
    }
    let mut done = BTreeSet::new();
    for module in edges.keys() {
        visit(module, edges, &mut Vec::new(), &mut done);
    }
}

/// The stage of `module` (`call` for `call::registry`) and its place in [`STAGES`].
fn stage_of(module: &str) -> (&str, Option<usize>) {
    let stage = module.split("::").next().unwrap_or(module);
    (stage, STAGES.iter().position(|known| *known == stage))
}

#[test]
fn the_stages_import_no_stage_below_them() {
    let imports = core_imports();
    for (module, imported) in &imports {
        let (stage, rank) = stage_of(module);
        let rank = rank.unwrap_or_else(|| {
            panic!("{module} is in no stage: add its folder to STAGES, in order")
        });
        for other in imported {
            let (later, imported_rank) = stage_of(other);
            assert!(
                imported_rank.is_some_and(|imported_rank| imported_rank <= rank),
                "{module} (stage {stage}) imports the later stage {later}: an import circle \
                 in the making"
            );
        }
    }
    assert!(imports.len() > 30, "only {} modules checked", imports.len());
}

#[test]
fn no_module_of_the_core_imports_one_that_imports_it_back() {
    let edges = core_imports();
    assert_no_circle(&edges);
    assert!(
        edges.values().map(BTreeSet::len).sum::<usize>() > 50,
        "too few imports found: the scan is broken"
    );
}

/// The MCP front end: no module imports one that imports it back (`lib` holds the server the
/// others serve and the helpers they share; `fuzzing` drives them all).
#[test]
fn no_module_of_the_mcp_crate_imports_one_that_imports_it_back() {
    let edges = imports_in(&manifest_dir().join("../mcp/src"), &["lib", "fuzzing"]);
    assert_no_circle(&edges);
    assert!(
        edges.values().map(BTreeSet::len).sum::<usize>() > 25,
        "too few imports found: the scan is broken"
    );
}

/// The OCI crate: no module imports one that imports it back (the wire layer and the registry
/// client once did, through the error type).
#[test]
fn no_module_of_the_oci_crate_imports_one_that_imports_it_back() {
    let edges = imports_in(&manifest_dir().join("../oci/src"), &["lib"]);
    assert_no_circle(&edges);
    assert!(
        edges.values().map(BTreeSet::len).sum::<usize>() > 5,
        "too few imports found: the scan is broken"
    );
}

/// The CLI crate: no module imports one that imports it back (`lib` and `main` hold the
/// dispatch over the commands; the arguments once imported the bench's constants while the
/// commands imported the arguments).
#[test]
fn no_module_of_the_cli_crate_imports_one_that_imports_it_back() {
    let edges = imports_in(&manifest_dir().join("../cli/src"), &["lib", "main"]);
    assert_no_circle(&edges);
    assert!(
        edges.values().map(BTreeSet::len).sum::<usize>() > 5,
        "too few imports found: the scan is broken"
    );
}

/// The scan finds a circle when there is one (two modules of a made-up crate import each
/// other), so a pass above means something.
#[test]
#[should_panic(expected = "an import circle")]
fn a_circle_is_found() {
    let dir = std::env::temp_dir().join(format!("toolcell-layout-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("b")).expect("a scratch crate");
    std::fs::write(dir.join("a.rs"), "use crate::b::Thing;\n").expect("a.rs");
    std::fs::write(
        dir.join("b/mod.rs"),
        "pub struct Thing;\nuse crate::a::x;\n",
    )
    .expect("b");
    let edges = imports_in(&dir, &[]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_no_circle(&edges);
}

/// The names of the `toolcell*` packages `manifest` depends on (normal dependencies).
fn toolcell_dependencies(manifest: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(manifest).expect("a manifest");
    let value: toml::Table = text.parse().expect("TOML");
    value
        .get("dependencies")
        .and_then(|deps| deps.as_table())
        .map(|deps| {
            deps.keys()
                .filter(|name| name.starts_with("toolcell"))
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn the_crates_depend_only_on_the_crates_before_them() {
    let runtime = manifest_dir().join("..");
    let expected: [(&str, &[&str]); 4] = [
        ("toolcell", &[]),
        ("oci", &["toolcell"]),
        ("mcp", &["toolcell"]),
        ("cli", &["toolcell", "toolcell-mcp", "toolcell-oci"]),
    ];
    for (dir, allowed) in expected {
        let found = toolcell_dependencies(&runtime.join(dir).join("Cargo.toml"));
        let allowed: BTreeSet<String> = allowed.iter().map(|name| (*name).to_owned()).collect();
        assert_eq!(found, allowed, "runtime/{dir}/Cargo.toml");
    }
}

#[test]
fn the_core_compiles_none_of_the_front_ends_crates() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(cargo)
        .current_dir(manifest_dir())
        .args([
            "tree",
            "-p",
            "toolcell",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--no-dedupe",
            "--offline",
        ])
        .output()
        .expect("cargo tree");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // Each package once per version: `name vX.Y.Z`.
    let packages: BTreeSet<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| {
            line.split_whitespace()
                .take(2)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .filter(|package| !package.is_empty())
        .collect();
    for name in FORBIDDEN {
        assert!(
            !packages
                .iter()
                .any(|package| package.split(' ').next() == Some(*name)),
            "the core depends on {name}"
        );
    }
    assert!(
        packages.len() <= MAX_CORE_PACKAGES,
        "the core's tree has {} packages; at most {MAX_CORE_PACKAGES}",
        packages.len()
    );
}

/// The longest a function in `runtime/` may be, outside unit tests: a reader should see the
/// order of its decisions on one screen, and each step has a name of its own.
const MAX_FUNCTION_LINES: usize = 120;

/// Functions allowed past [`MAX_FUNCTION_LINES`], each with why (none today).
const LONG_FUNCTIONS: &[(&str, &str, &str)] = &[];

/// The longest a source file in `runtime/` may be without saying why in its first lines.
const MAX_FILE_LINES: usize = 700;

/// How many of a file's first lines may say why it is long: its module doc.
const WHY_WITHIN_LINES: usize = 40;

/// Every `.rs` file of every crate under `runtime/`, without the crates' `tests/`.
fn runtime_sources() -> Vec<PathBuf> {
    let runtime = manifest_dir().parent().expect("runtime/").to_path_buf();
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&runtime).expect("runtime/") {
        let src = entry.expect("an entry").path().join("src");
        if src.is_dir() {
            sources(&src, &mut found);
        }
    }
    found.sort();
    found
}

/// The functions of `text` (rustfmt-formatted Rust) longer than `max` lines, outside
/// `#[cfg(test)]` modules: `(name, first line, length)`. A function runs from its `fn` line to
/// the first `}` line at the same indentation after its body opens.
fn long_functions(text: &str, max: usize) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let end = lines
        .iter()
        .position(|line| line.starts_with("#[cfg(test)]"))
        .unwrap_or(lines.len());
    let mut found = Vec::new();
    let mut at = 0;
    while at < end {
        let line = lines[at];
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        let signature = trimmed
            .split_once("fn ")
            .filter(|(before, _)| {
                before.split_whitespace().all(|word| {
                    ["pub", "async", "const", "unsafe", "extern"].contains(&word)
                        || word.starts_with("pub(")
                })
            })
            .map(|(_, after)| after);
        let Some(signature) = signature else {
            at += 1;
            continue;
        };
        let name: String = signature
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        // The line that opens the body (or ends a declaration without one).
        let mut open = at;
        while open < end && !lines[open].trim_end().ends_with('{') && !lines[open].ends_with(';') {
            open += 1;
        }
        if open >= end || lines[open].ends_with(';') {
            at = open + 1;
            continue;
        }
        let closing = format!("{indent}}}");
        let mut close = open + 1;
        while close < end && lines[close] != closing {
            close += 1;
        }
        let length = close - at + 1;
        if length > max {
            found.push((name, at + 1, length));
        }
        at = open + 1;
    }
    found
}

#[test]
fn no_function_in_runtime_is_longer_than_a_screen_of_decisions() {
    let mut long = Vec::new();
    for path in runtime_sources() {
        let text = std::fs::read_to_string(&path).expect("a source file");
        for (name, line, length) in long_functions(&text, MAX_FUNCTION_LINES) {
            let file = path.to_string_lossy().into_owned();
            let allowed = LONG_FUNCTIONS
                .iter()
                .any(|(at, allowed, _why)| file.ends_with(at) && *allowed == name);
            if !allowed {
                long.push(format!("{file}:{line} fn {name}: {length} lines"));
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions over {MAX_FUNCTION_LINES} lines (split them by decision, or allow one in \
         LONG_FUNCTIONS with why): {long:#?}"
    );
}

#[test]
fn a_long_function_is_found() {
    let body = "    let x = 1;\n".repeat(MAX_FUNCTION_LINES);
    let text = format!(
        "fn short() {{\n}}\n\npub(crate) async fn long(\n    a: u8,\n) -> u8 {{\n{body}    a\n}}\n\n\
         #[cfg(test)]\nmod tests {{\n    fn in_tests() {{\n{body}    }}\n}}\n"
    );
    let found = long_functions(&text, MAX_FUNCTION_LINES);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, "long");
    assert_eq!(found[0].2, MAX_FUNCTION_LINES + 5);
}

#[test]
fn a_file_past_700_lines_says_why_in_its_first_lines() {
    let mut silent = Vec::new();
    for path in runtime_sources() {
        let text = std::fs::read_to_string(&path).expect("a source file");
        let lines = text.lines().count();
        if lines <= MAX_FILE_LINES {
            continue;
        }
        let says_why = text
            .lines()
            .take(WHY_WITHIN_LINES)
            .any(|line| line.starts_with("//!") && line.contains("700 lines"));
        if !says_why {
            silent.push(format!("{} ({lines} lines)", path.display()));
        }
    }
    assert!(
        silent.is_empty(),
        "files over {MAX_FILE_LINES} lines whose module doc does not say why in its first \
         {WHY_WITHIN_LINES} lines (a `//!` line naming the house's 700 lines and the reason): \
         {silent:#?}"
    );
}
