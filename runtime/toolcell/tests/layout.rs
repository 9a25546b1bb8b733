//! The crate's layout is its architecture: the stages import only the stages before them, the
//! crates depend only on the crates before them, and the core's dependency tree carries none of
//! the front ends' crates (issue 24).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The core's stages, each allowed to import only those before it (`digest` is a leaf anyone
/// may use; `lib.rs` and `fuzzing.rs` sit above them all).
const STAGES: &[&str] = &[
    "digest", "call", "tool", "policy", "validate", "gate", "wasm", "pipeline",
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

/// The stages `text` names as `crate::STAGE`, outside comments and its unit tests.
fn imported_stages(text: &str) -> BTreeSet<String> {
    let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or(text);
    let mut stages = BTreeSet::new();
    for line in code.lines() {
        let line = line.trim_start();
        if line.starts_with("//") {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if STAGES.contains(&name.as_str()) {
                stages.insert(name);
            }
        }
    }
    stages
}

#[test]
fn the_stages_import_no_stage_below_them() {
    let src = manifest_dir().join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut checked = 0;
    for file in files {
        let relative = file.strip_prefix(&src).expect("inside src");
        let first = relative
            .components()
            .next()
            .and_then(|part| part.as_os_str().to_str())
            .expect("a name")
            .trim_end_matches(".rs")
            .to_owned();
        let Some(rank) = STAGES.iter().position(|stage| *stage == first) else {
            assert!(
                ["lib", "fuzzing"].contains(&first.as_str()),
                "{} is in no stage: add its folder to STAGES, in order",
                relative.display()
            );
            continue;
        };
        let text = std::fs::read_to_string(&file).expect("readable");
        for imported in imported_stages(&text) {
            let imported_rank = STAGES
                .iter()
                .position(|stage| *stage == imported)
                .expect("a stage");
            assert!(
                imported_rank <= rank,
                "{} (stage {first}) imports the later stage {imported}: an import circle in the \
                 making",
                relative.display()
            );
        }
        checked += 1;
    }
    assert!(checked > 30, "only {checked} files checked");
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
