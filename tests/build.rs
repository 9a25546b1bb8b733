//! Builds the test-only guests in `tests/guests/` and gives each a constant, plus a
//! `for_each_guest!` macro the tests use to prove every guest has a test.

#[path = "../runtime/toolcell/build_guests.rs"]
mod build_guests;

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    let root = Path::new(&manifest_dir);
    println!(
        "cargo:rerun-if-changed={}",
        root.join("../guest-tools/guest").display()
    );
    println!("cargo:rerun-if-changed={}", root.join("../wit").display());
    let guests = build_guests::build_workspace(&root.join("guests"));
    let copied = build_guests::copy_to_out_dir(&guests);

    let mut code = String::new();
    for (name, path) in &copied {
        let _ = writeln!(
            code,
            "/// The `{name}` test guest.\npub const {}: &[u8] = include_bytes!({:?});",
            name.to_uppercase(),
            path.display().to_string()
        );
    }
    code.push_str("/// Calls `$m!(guest)` once per test guest (used by the tests only).\n#[allow(unused_macros)]\nmacro_rules! for_each_guest {\n    ($m:ident) => {\n");
    for (name, _) in &copied {
        let _ = writeln!(code, "        $m!({name});");
    }
    code.push_str("    };\n}\n");
    let out = Path::new(&std::env::var("OUT_DIR").unwrap_or_default()).join("guests.rs");
    if let Err(error) = std::fs::write(&out, code) {
        eprintln!("error: writing {}: {error}", out.display());
        std::process::exit(1);
    }
}
