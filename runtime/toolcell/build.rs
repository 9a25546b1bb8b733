//! Builds the tools in `guest-tools/` for wasm32-wasip2 and embeds them in the crate.

#[path = "build_guests.rs"]
mod build_guests;

use sha2::Digest as _;
use std::fmt::Write as _;
use std::path::Path;

fn main() {
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    let root = Path::new(&manifest_dir).join("../..");
    println!("cargo:rerun-if-changed={}", root.join("wit").display());
    println!("cargo:rerun-if-changed=build_guests.rs");
    let guests = build_guests::build_workspace(&root.join("guest-tools"));
    let copied = build_guests::copy_to_out_dir(&guests);

    let mut code = String::from(
        "/// The tools that ship inside toolcell: (name, component bytes), sorted by name.\n\
         pub(crate) static BUILTIN_TOOLS: &[(&str, &[u8])] = &[\n",
    );
    let mut digests = String::from(
        "/// The sha256 of each of [`BUILTIN_TOOLS`], as lowercase hex, in the same order.\n\
         pub(crate) static BUILTIN_DIGESTS: &[&str] = &[\n",
    );
    for (name, path) in &copied {
        let digest = match std::fs::read(path) {
            Ok(bytes) => {
                sha2::Sha256::digest(&bytes)
                    .iter()
                    .fold(String::new(), |mut hex, byte| {
                        let _ = write!(hex, "{byte:02x}");
                        hex
                    })
            }
            Err(error) => {
                eprintln!("error: reading {}: {error}", path.display());
                std::process::exit(1);
            }
        };
        let _ = writeln!(
            code,
            "    ({name:?}, include_bytes!({:?})),",
            path.display().to_string()
        );
        let _ = writeln!(digests, "    {digest:?},");
    }
    code.push_str("];\n");
    digests.push_str("];\n");
    code.push_str(&digests);
    let out = Path::new(&std::env::var("OUT_DIR").unwrap_or_default()).join("builtin_tools.rs");
    if let Err(error) = std::fs::write(&out, code) {
        eprintln!("error: writing {}: {error}", out.display());
        std::process::exit(1);
    }
}
