//! `wasi:config/store`: the configuration values a call was granted, by key, and nothing else.
//!
//! Components of the ecosystem import it at two versions, `0.2.0-draft` (what Wassette's
//! examples were built against) and `0.2.0-rc.1` (wasmtime's own `wasmtime-wasi-config` since
//! version 40); prereleases match only exactly, so both are linked here, by hand: two
//! functions, each reading the call's grants (`gate/kinds.rs`, the `config` capability). A key
//! not granted is answered as absent (`ok(none)`), never an error that says it exists;
//! `get-all` lists the granted keys only. Values are never logged nor audited (the audit names
//! the keys granted).

use crate::wasm::sandbox::CallState;
use wasmtime::component::{ComponentType, Lift, Linker, Lower};

/// The versions of `wasi:config/store` linked.
const VERSIONS: &[&str] = &["0.2.0-draft", "0.2.0-rc.1"];

/// `wasi:config/store`'s error variant (named `config-error` in 0.2.0-draft and `error` in
/// rc.1: the same cases, which is what the type check compares). Never returned: a key
/// toolcell does not hold is simply absent.
#[derive(ComponentType, Lift, Lower, Debug, Clone)]
#[component(variant)]
enum ConfigError {
    #[component(name = "upstream")]
    Upstream(String),
    #[component(name = "io")]
    Io(String),
}

/// Link `get` and `get-all` of every version in `linker`.
pub(crate) fn link(linker: &mut Linker<CallState>) -> anyhow::Result<()> {
    for version in VERSIONS {
        let mut store = linker.instance(&format!("wasi:config/store@{version}"))?;
        store.func_wrap_async("get", |store, (key,): (String,)| {
            let value = store
                .data()
                .config
                .iter()
                .find(|(granted, _)| *granted == key)
                .map(|(_, value)| value.clone());
            Box::new(async move { Ok((Ok::<_, ConfigError>(value),)) })
        })?;
        store.func_wrap_async("get-all", |store, (): ()| {
            let all = store.data().config.clone();
            Box::new(async move { Ok((Ok::<_, ConfigError>(all),)) })
        })?;
    }
    Ok(())
}
