//! `http_fetch`'s URL handling, as pure functions: the guest runs them, and the host's tests
//! include this file (`#[path]`) and test them natively.

/// A URL split into what `wasi:http` wants.
#[derive(Debug, PartialEq, Eq)]
pub struct Target {
    /// True for `https`, false for `http`.
    pub https: bool,
    /// `host[:port]`.
    pub authority: String,
    /// The path and query, starting with `/`; the fragment dropped.
    pub path: String,
}

/// Split an `http://` or `https://` URL; the error says why it is not one.
pub fn parse(url: &str) -> Result<Target, String> {
    let invalid = || format!("{url:?} is not an http or https URL");
    let (scheme, rest) = url.split_once("://").ok_or_else(invalid)?;
    let https = match scheme.to_ascii_lowercase().as_str() {
        "http" => false,
        "https" => true,
        _ => return Err(invalid()),
    };
    let rest = rest.split('#').next().unwrap_or_default();
    let split = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(split);
    if authority.is_empty() {
        return Err(invalid());
    }
    let path = match path {
        "" => "/".to_owned(),
        p if p.starts_with('?') => format!("/{p}"),
        p => p.to_owned(),
    };
    Ok(Target {
        https,
        authority: authority.to_owned(),
        path,
    })
}

/// Where a redirect's `Location` leads from `base`: an absolute URL, an absolute path, or a
/// path relative to `base`'s directory.
pub fn resolve(base: &str, location: &str) -> Result<String, String> {
    if location.contains("://") {
        return Ok(location.to_owned());
    }
    let target = parse(base)?;
    let scheme = if target.https { "https" } else { "http" };
    if location.starts_with('/') {
        Ok(format!("{scheme}://{}{location}", target.authority))
    } else {
        let path = target.path.split('?').next().unwrap_or_default();
        let dir = path
            .rsplit_once('/')
            .map(|(dir, _)| dir)
            .unwrap_or_default();
        Ok(format!("{scheme}://{}{dir}/{location}", target.authority))
    }
}
