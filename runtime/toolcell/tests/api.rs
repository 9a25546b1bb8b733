//! The core's public API, listed: `runtime/toolcell/api.txt` names every public item (its path
//! and kind) and every public method of a public type, and this test fails when the crate's
//! source says otherwise. Growing or shrinking the API is then a visible change in review: the
//! list changes beside the code. After a change that is meant, write the list again with
//! `TOOLCELL_BLESS_API=1 cargo test --release --workspace --test api`.
//!
//! Read from the source with `syn` (rustdoc's JSON output needs a nightly compiler): modules
//! are followed from `lib.rs` while public; an item in a private module is public only through
//! a `pub use`, which is listed as such; a method is listed when it is `pub` and its type's name
//! is public.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use syn::{ImplItem, Item, UseTree, Visibility};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn is_pub(visibility: &Visibility) -> bool {
    matches!(visibility, Visibility::Public(_))
}

/// Whether `attrs` hide the item from the API (`#[doc(hidden)]`, `#[cfg(test)]`).
fn hidden(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        let text = quote_attr(attr);
        text.starts_with("doc(hidden") || text.starts_with("cfg(test")
    })
}

fn quote_attr(attr: &syn::Attribute) -> String {
    match &attr.meta {
        syn::Meta::List(list) => format!(
            "{}({}",
            list.path
                .segments
                .iter()
                .map(|segment| segment.ident.to_string())
                .collect::<Vec<_>>()
                .join("::"),
            list.tokens.to_string().replace(' ', "")
        ),
        _ => String::new(),
    }
}

/// The names a `pub use` tree makes public where it stands (`Name as Other`: `Other`; a glob:
/// its source path and `*`).
fn uses(prefix: &str, tree: &UseTree, found: &mut Vec<String>) {
    match tree {
        UseTree::Path(path) => uses(&format!("{prefix}{}::", path.ident), &path.tree, found),
        UseTree::Name(name) => found.push(name.ident.to_string()),
        UseTree::Rename(rename) => found.push(rename.rename.to_string()),
        UseTree::Glob(_) => found.push(format!("{prefix}*")),
        UseTree::Group(group) => {
            for tree in &group.items {
                uses(prefix, tree, found);
            }
        }
    }
}

struct Lister {
    /// `kind path` lines.
    items: BTreeSet<String>,
    /// Public type names (their last segment), for methods.
    types: BTreeSet<String>,
    /// `Type::method` of `pub fn`s in impl blocks anywhere in the crate.
    methods: Vec<(String, String)>,
}

impl Lister {
    fn module(&mut self, path: &str, items: &[Item], file: &Path, public: bool) {
        for item in items {
            self.item(path, item, file, public);
        }
    }

    fn add(&mut self, public: bool, kind: &str, path: &str, name: &str) {
        if public {
            self.items.insert(format!("{kind} {path}{name}"));
        }
    }

    fn item(&mut self, path: &str, item: &Item, file: &Path, public: bool) {
        match item {
            Item::Mod(module) => {
                if hidden(&module.attrs) {
                    return;
                }
                let name = module.ident.to_string();
                let open = public && is_pub(&module.vis);
                self.add(open, "mod", path, &name);
                let inner = format!("{path}{name}::");
                if let Some((_, items)) = &module.content {
                    self.module(&inner, items, file, open);
                } else {
                    let dir = if file
                        .file_name()
                        .is_some_and(|f| f == "lib.rs" || f == "mod.rs")
                    {
                        file.parent().expect("a directory").to_path_buf()
                    } else {
                        file.with_extension("")
                    };
                    let candidates = [
                        dir.join(format!("{name}.rs")),
                        dir.join(&name).join("mod.rs"),
                    ];
                    let Some(found) = candidates.iter().find(|candidate| candidate.exists()) else {
                        return;
                    };
                    let text = std::fs::read_to_string(found).expect("read a module");
                    let parsed = syn::parse_file(&text).expect("parse a module");
                    self.module(&inner, &parsed.items, found, open);
                }
            }
            Item::Use(use_item) if is_pub(&use_item.vis) && !hidden(&use_item.attrs) => {
                let mut found = Vec::new();
                uses("", &use_item.tree, &mut found);
                for used in found {
                    let last = used
                        .rsplit([':', ' '])
                        .next()
                        .unwrap_or_default()
                        .to_owned();
                    if public {
                        self.types.insert(last);
                    }
                    self.add(public, "use", path, &used);
                }
            }
            Item::Struct(item) if is_pub(&item.vis) && !hidden(&item.attrs) => {
                self.public_type(public, "struct", path, &item.ident.to_string());
            }
            Item::Enum(item) if is_pub(&item.vis) && !hidden(&item.attrs) => {
                self.public_type(public, "enum", path, &item.ident.to_string());
            }
            Item::Trait(item) if is_pub(&item.vis) && !hidden(&item.attrs) => {
                self.public_type(public, "trait", path, &item.ident.to_string());
            }
            Item::Type(item) if is_pub(&item.vis) && !hidden(&item.attrs) => {
                self.public_type(public, "type", path, &item.ident.to_string());
            }
            Item::Fn(item) if is_pub(&item.vis) && !hidden(&item.attrs) => {
                self.add(public, "fn", path, &item.sig.ident.to_string());
            }
            Item::Const(item) if is_pub(&item.vis) && !hidden(&item.attrs) => {
                self.add(public, "const", path, &item.ident.to_string());
            }
            Item::Static(item) if is_pub(&item.vis) && !hidden(&item.attrs) => {
                self.add(public, "static", path, &item.ident.to_string());
            }
            Item::Impl(block) if block.trait_.is_none() && !hidden(&block.attrs) => {
                let syn::Type::Path(self_type) = block.self_ty.as_ref() else {
                    return;
                };
                let Some(last) = self_type.path.segments.last() else {
                    return;
                };
                for inner in &block.items {
                    if let ImplItem::Fn(method) = inner
                        && is_pub(&method.vis)
                        && !hidden(&method.attrs)
                    {
                        self.methods
                            .push((last.ident.to_string(), method.sig.ident.to_string()));
                    }
                }
            }
            _ => {}
        }
    }

    fn public_type(&mut self, public: bool, kind: &str, path: &str, name: &str) {
        if public {
            self.types.insert(name.to_owned());
        }
        self.add(public, kind, path, name);
    }
}

/// The API as the source says it now, a line each.
fn api() -> Vec<String> {
    let lib = src().join("lib.rs");
    let text = std::fs::read_to_string(&lib).expect("lib.rs");
    let parsed = syn::parse_file(&text).expect("parse lib.rs");
    let mut lister = Lister {
        items: BTreeSet::new(),
        types: BTreeSet::new(),
        methods: Vec::new(),
    };
    lister.module("", &parsed.items, &lib, true);
    let methods: BTreeSet<String> = lister
        .methods
        .iter()
        .filter(|(owner, _)| lister.types.contains(owner))
        .map(|(owner, method)| format!("method {owner}::{method}"))
        .collect();
    lister.items.into_iter().chain(methods).collect()
}

fn listed_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("api.txt")
}

#[test]
fn the_public_api_is_the_listed_one() {
    let now = api();
    let header = "# The public API of the `toolcell` crate, as tests/api.rs reads it from the source.\n\
                  # Written by `TOOLCELL_BLESS_API=1 cargo test --release --workspace --test api`.\n";
    let text = format!("{header}{}\n", now.join("\n"));
    if std::env::var_os("TOOLCELL_BLESS_API").is_some() {
        std::fs::write(listed_path(), &text).expect("write api.txt");
        return;
    }
    let listed = std::fs::read_to_string(listed_path()).unwrap_or_default();
    let listed: BTreeSet<&str> = listed
        .lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .collect();
    let now_set: BTreeSet<&str> = now.iter().map(String::as_str).collect();
    let added: Vec<_> = now_set.difference(&listed).collect();
    let removed: Vec<_> = listed.difference(&now_set).collect();
    assert!(
        added.is_empty() && removed.is_empty(),
        "the public API changed: added {added:#?}, removed {removed:#?}; if meant, write \
         runtime/toolcell/api.txt again (TOOLCELL_BLESS_API=1 cargo test --release --workspace \
         --test api) and let review see it"
    );
}

#[test]
fn the_reader_finds_what_it_must() {
    // Items the lister must see, of each way an item becomes public: a crate-root re-export,
    // an item of a public file module, an item of an inline public module's re-export, and a
    // method of a public type.
    let now = api();
    for expected in [
        "use Runtime",
        "fn digest::sha256_hex",
        "fn digest::unhex",
        "use registry::Dispatch",
        "method Runtime::run",
    ] {
        assert!(
            now.iter().any(|line| line == expected),
            "{expected} not found in {now:#?}"
        );
    }
    // And nothing private: a crate-private function of a public module.
    assert!(
        !now.iter().any(|line| line.contains("read_opened")),
        "a private item listed"
    );
}
