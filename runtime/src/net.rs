//! The network a call may reach: `wasi:http` only, to the hosts its policy rule names.
//!
//! Raw TCP and UDP stay disabled for every call (see `sandbox.rs`). A call granted `network`
//! gets `wasi:http` requests checked by [`NetworkHooks`] one by one, redirects included (a
//! guest follows a redirect by making a new request, which is checked again):
//!
//! - the scheme, host and port must match one of the rule's [`HostPattern`]s;
//! - the host resolves the name itself, and refuses loopback, private, link-local and other
//!   non-public addresses unless the matching pattern names that exact host (an IP literal or
//!   `localhost`);
//! - a plain-HTTP request is then sent to the address that was checked, so a second lookup
//!   cannot rebind the name. (HTTPS needs the name for TLS; there the sender resolves it again,
//!   and a name that flips to a private address between the two lookups is not caught.)

use http_body_util::BodyExt as _;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr as _;
use std::sync::Arc;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

/// One host a policy allows: `[scheme://]host[:port]`, where host may start with `*.` to cover
/// its subdomains. Without a scheme only HTTPS is covered; without a port, the scheme's
/// default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPattern {
    scheme: String,
    host: String,
    port: Option<u16>,
}

impl HostPattern {
    /// Parse a pattern from a policy.
    pub fn parse(text: &str) -> Result<HostPattern, String> {
        let (scheme, rest) = match text.split_once("://") {
            Some((scheme, rest)) => (scheme.to_ascii_lowercase(), rest),
            None => ("https".to_owned(), text),
        };
        if scheme != "http" && scheme != "https" {
            return Err(format!("host {text:?}: only http and https are supported"));
        }
        let (host, port) = match rest.rsplit_once(':') {
            Some((host, port)) if !host.ends_with(']') || rest.starts_with('[') => {
                let port = port
                    .parse::<u16>()
                    .map_err(|_| format!("host {text:?}: {port:?} is not a port"))?;
                (host, Some(port))
            }
            _ => (rest, None),
        };
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        if host.is_empty() || host.contains('/') {
            return Err(format!("host {text:?} is not [scheme://]host[:port]"));
        }
        Ok(HostPattern { scheme, host, port })
    }

    /// True when a request to `scheme://host:port` is covered.
    pub fn matches(&self, scheme: &str, host: &str, port: u16) -> bool {
        let default_port = if scheme == "http" { 80 } else { 443 };
        let host_matches = if self.host == "*" {
            true
        } else if let Some(suffix) = self.host.strip_prefix('*') {
            suffix.starts_with('.') && host.ends_with(suffix) && host.len() > suffix.len()
        } else {
            self.host == host
        };
        self.scheme == scheme && self.port.unwrap_or(default_port) == port && host_matches
    }

    /// True when the pattern names `host` exactly (no wildcard): only then may it reach a
    /// non-public address.
    pub fn names_exactly(&self, host: &str) -> bool {
        !self.host.starts_with('*') && self.host == host
    }
}

/// True for addresses a tool must not reach unless a policy names them: loopback, private,
/// link-local, unspecified, broadcast, shared (CGNAT) and unique-local addresses.
pub fn is_non_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || (a == 100 && (64..128).contains(&b))
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_non_public(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
        }
    }
}

/// The `wasi:http` hooks of one call: its allowlist, checked on every request.
#[derive(Debug, Clone, Default)]
pub(crate) struct NetworkHooks {
    allowed: Arc<Vec<HostPattern>>,
}

impl NetworkHooks {
    pub(crate) fn new(allowed: Arc<Vec<HostPattern>>) -> Self {
        NetworkHooks { allowed }
    }
}

type SendResult = wasmtime_wasi_http::Result<(
    http::Response<WasiBody>,
    Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>,
)>;

impl WasiHttpHooks for NetworkHooks {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        fut: Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>,
    ) -> Box<dyn Future<Output = SendResult> + Send> {
        drop(fut);
        let allowed = Arc::clone(&self.allowed);
        Box::new(async move {
            let request = checked(request, &allowed).await?;
            let (response, io) = wasmtime_wasi_http::default_send_request(request, options).await?;
            Ok((
                response.map(|body| body.boxed_unsync()),
                Box::new(io) as Box<dyn Future<Output = _> + Send>,
            ))
        })
    }
}

/// The request, if its destination is allowed; plain HTTP pinned to the checked address.
async fn checked(
    mut request: http::Request<WasiBody>,
    allowed: &[HostPattern],
) -> Result<http::Request<WasiBody>, Error> {
    let uri = request.uri();
    let scheme = uri.scheme_str().unwrap_or("https").to_ascii_lowercase();
    let host = uri
        .host()
        .ok_or(Error::HttpRequestUriInvalid)?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase();
    let port = uri
        .port_u16()
        .unwrap_or(if scheme == "http" { 80 } else { 443 });
    let Some(pattern) = allowed.iter().find(|p| p.matches(&scheme, &host, port)) else {
        return Err(Error::HttpRequestDenied);
    };
    let addresses: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), port))
        .await
        .map_err(|_| Error::DnsError {
            rcode: None,
            info_code: None,
        })?
        .collect();
    let Some(first) = addresses.first().copied() else {
        return Err(Error::DestinationNotFound);
    };
    if addresses.iter().any(|a| is_non_public(a.ip())) && !pattern.names_exactly(&host) {
        return Err(Error::DestinationIpProhibited);
    }
    if scheme == "http" {
        let mut parts = request.uri().clone().into_parts();
        parts.authority = Some(
            http::uri::Authority::from_str(&first.to_string())
                .map_err(|_| Error::HttpRequestUriInvalid)?,
        );
        *request.uri_mut() =
            http::Uri::from_parts(parts).map_err(|_| Error::HttpRequestUriInvalid)?;
    }
    Ok(request)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_cover_what_they_say() {
        let rows: &[(&str, &str, &str, u16, bool)] = &[
            ("example.org", "https", "example.org", 443, true),
            ("example.org", "http", "example.org", 80, false),
            ("example.org", "https", "example.org", 8443, false),
            ("http://example.org:8080", "http", "example.org", 8080, true),
            (
                "https://*.example.org",
                "https",
                "api.example.org",
                443,
                true,
            ),
            ("https://*.example.org", "https", "example.org", 443, false),
            (
                "https://*.example.org",
                "https",
                "evilexample.org",
                443,
                false,
            ),
            ("http://127.0.0.1:9", "http", "127.0.0.1", 9, true),
            ("http://[::1]:9", "http", "::1", 9, true),
            ("http://*:9", "http", "anything.example", 9, true),
            ("*", "https", "anything.example", 443, true),
        ];
        for &(pattern, scheme, host, port, expected) in rows {
            let parsed = HostPattern::parse(pattern).expect(pattern);
            assert_eq!(
                parsed.matches(scheme, host, port),
                expected,
                "{pattern} vs {scheme}://{host}:{port}"
            );
        }
        assert!(HostPattern::parse("ftp://x").is_err());
        assert!(HostPattern::parse("http://x:notaport").is_err());
        assert!(
            !HostPattern::parse("*.x.org")
                .expect("p")
                .names_exactly("a.x.org")
        );
    }

    #[test]
    fn non_public_addresses() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.1.1",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(is_non_public(ip.parse().expect(ip)), "{ip}");
        }
        for ip in ["93.184.216.34", "2606:4700::1111", "8.8.8.8"] {
            assert!(!is_non_public(ip.parse().expect(ip)), "{ip}");
        }
    }
}
