//! What `deploy/` builds is what the workspace makes: the Dockerfile's build command names a
//! package that has the binary it installs (checked against `cargo metadata`, as no container
//! runtime runs here), and the Kubernetes manifest passes `--state` to replicas that share one.

use serde_json::Value;
use std::path::Path;

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// The package `cargo build -p PACKAGE` names, the binary `install -D target/release/BIN`
/// takes, and the features `--features` names, in the Dockerfile.
fn dockerfile_build() -> (String, String, Vec<String>) {
    let text = std::fs::read_to_string(root().join("deploy/Dockerfile")).expect("the Dockerfile");
    // The RUN instruction that builds (its continued lines included), not comments.
    let mut instruction = String::new();
    let mut inside = false;
    for line in text.lines() {
        if line.trim_start().starts_with("RUN ") && line.contains("cargo build") {
            inside = true;
        }
        if inside {
            instruction.push_str(line.trim_end_matches('\\'));
            instruction.push(' ');
            if !line.trim_end().ends_with('\\') {
                break;
            }
        }
    }
    let words: Vec<&str> = instruction.split_whitespace().collect();
    let package = words
        .windows(2)
        .find(|pair| pair[0] == "-p" || pair[0] == "--package")
        .map(|pair| pair[1].to_owned())
        .expect("the Dockerfile builds one package with -p");
    let binary = words
        .iter()
        .find_map(|word| word.strip_prefix("target/release/"))
        .map(str::to_owned)
        .expect("the Dockerfile installs a binary from target/release");
    let features = words
        .windows(2)
        .filter(|pair| pair[0] == "--features" || pair[0] == "-F")
        .flat_map(|pair| pair[1].split(','))
        .map(str::to_owned)
        .collect();
    (package, binary, features)
}

/// The image serves over HTTP with a shared store (the manifest's `--http` and `--state`),
/// which are the CLI's `http` feature: the default build leaves them out.
#[test]
fn the_image_has_what_the_manifest_runs() {
    let (_, _, features) = dockerfile_build();
    let manifest = std::fs::read_to_string(root().join("deploy/kubernetes/toolcell.yaml"))
        .expect("the manifest");
    assert!(
        manifest.contains("- --http"),
        "the manifest serves over HTTP"
    );
    assert!(
        features
            .iter()
            .any(|feature| feature == "full" || feature == "http"),
        "the Dockerfile builds the CLI with features {features:?}, without `http`"
    );
}

#[test]
fn the_dockerfile_builds_the_package_that_has_its_binary() {
    let (package, binary, _) = dockerfile_build();
    let metadata: Value = crate::support::cargo_metadata();
    let packages = metadata["packages"].as_array().expect("packages");
    let found = packages
        .iter()
        .find(|candidate| candidate["name"] == package.as_str())
        .unwrap_or_else(|| panic!("the Dockerfile builds -p {package}, which is no package"));
    let bins: Vec<&str> = found["targets"]
        .as_array()
        .expect("targets")
        .iter()
        .filter(|target| {
            target["kind"]
                .as_array()
                .is_some_and(|kinds| kinds.iter().any(|kind| kind == "bin"))
        })
        .filter_map(|target| target["name"].as_str())
        .collect();
    assert!(
        bins.contains(&binary.as_str()),
        "the Dockerfile builds -p {package}, whose binaries are {bins:?}, and installs {binary}"
    );
}

#[test]
fn the_kubernetes_replicas_share_a_store() {
    let manifest = std::fs::read_to_string(root().join("deploy/kubernetes/toolcell.yaml"))
        .expect("the manifest");
    assert!(manifest.contains("- --state"), "toolcell is given --state");
    assert!(
        manifest.contains("redis://toolcell-state:6379"),
        "the store's Service is what --state names"
    );
    assert!(
        manifest.contains("name: toolcell-state"),
        "the store's Service"
    );
    assert!(
        manifest.contains("- --seal-key-file"),
        "every replica is given the operator's seal key"
    );
    let replicas = manifest
        .lines()
        .find_map(|line| line.trim().strip_prefix("replicas: "))
        .and_then(|count| count.trim().parse::<u32>().ok())
        .expect("replicas");
    assert!(replicas >= 2, "at least two replicas: {replicas}");
}
