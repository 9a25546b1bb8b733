//! What an HTTP request must be before the front authenticates it, reads its body or acts on
//! anything in it: an origin-form target, exactly one well-formed `Host` that is allowed, and
//! at most one `Origin`, well-formed and allowed.
//!
//! rmcp checks `Host` and `Origin` too, but only once the front has handed it the request, and
//! leniently (`evil.com@127.0.0.1` parses as an authority, the first of two `Origin` headers
//! is the one read). The front answers first, strictly, so a request a browser page forged
//! (a DNS-rebinding `Host`, a foreign `Origin` on a "simple" cross-origin POST) is refused
//! before its body can stop a call or cost a place in a client's queue.

use crate::http::config_error::ConfigError;
use http::{HeaderMap, StatusCode, Uri, header};
use std::net::Ipv6Addr;

/// The longest host name accepted in `Host` or `Origin` (RFC 1035's 253 characters of a name).
pub const MAX_HOST_NAME_BYTES: usize = 253;

/// Why a request was refused before anything read its body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The request target is not a path (`POST http://evil.com/mcp`, `CONNECT`, `*`): a
    /// server answers for itself only.
    NotOriginForm,
    /// No `Host`, more than one, or one that is not `name[:port]` / `[v6][:port]` (userinfo,
    /// a path, stray characters).
    BadHost,
    /// A well-formed `Host` that is not allowed (a DNS-rebinding page).
    ForeignHost,
    /// More than one `Origin`, or one that is not `scheme://host[:port]`.
    BadOrigin,
    /// A well-formed `Origin` that is not allowed (a page elsewhere).
    ForeignOrigin,
}

impl Refused {
    /// The status the front answers with.
    pub fn status(self) -> StatusCode {
        match self {
            Refused::NotOriginForm | Refused::BadHost => StatusCode::BAD_REQUEST,
            Refused::ForeignHost | Refused::BadOrigin | Refused::ForeignOrigin => {
                StatusCode::FORBIDDEN
            }
        }
    }

    /// The body the front answers with.
    pub fn message(self) -> &'static str {
        match self {
            Refused::NotOriginForm => "Bad Request: the request target must be a path\n",
            Refused::BadHost => "Bad Request: exactly one Host header, name[:port], is needed\n",
            Refused::ForeignHost => "Forbidden: Host header is not allowed\n",
            Refused::BadOrigin => "Forbidden: at most one Origin header, scheme://host[:port]\n",
            Refused::ForeignOrigin => "Forbidden: Origin header is not allowed\n",
        }
    }
}

/// A host and port as a request names them (lower-cased; IPv6 without brackets).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Authority {
    host: String,
    port: Option<u16>,
}

/// An allowed origin's port: a number, or `*` for any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PortRule {
    Any,
    Exact(u16),
}

/// One entry of the allowed origins.
#[derive(Debug, Clone, PartialEq, Eq)]
enum AllowedOrigin {
    /// `null`: only when listed as such (sandboxed frames and `file:` pages send it).
    Null,
    Tuple {
        scheme: String,
        host: String,
        port: PortRule,
    },
}

/// The hosts and origins a server accepts.
#[derive(Debug, Clone)]
pub struct Guard {
    hosts: Vec<Authority>,
    origins: Vec<AllowedOrigin>,
}

impl Guard {
    /// The guard for `hosts` (`name`, a bare IPv6 address or `[v6]` allows any port,
    /// `name:port` or `[v6]:port` that port only) and
    /// `origins` (`scheme://host:port`, `scheme://host:*` for any port, `scheme://host` for the
    /// scheme's default port, or `null`). An entry that does not parse is an error, so a typo
    /// never widens or silently narrows what is allowed.
    pub fn new(hosts: &[String], origins: &[String]) -> Result<Guard, ConfigError> {
        let hosts = hosts
            .iter()
            .map(|entry| {
                let entry = entry.trim();
                // A bare IPv6 address (`::1`) is an entry too: it names no port.
                let bare_v6 = entry.parse::<Ipv6Addr>().ok().map(|address| Authority {
                    host: address.to_string(),
                    port: None,
                });
                bare_v6
                    .or_else(|| parse_authority(entry))
                    .ok_or_else(|| ConfigError::AllowHost {
                        entry: entry.to_owned(),
                    })
            })
            .collect::<Result<_, _>>()?;
        let origins = origins
            .iter()
            .map(|entry| {
                parse_allowed_origin(entry.trim()).ok_or_else(|| ConfigError::AllowOrigin {
                    entry: entry.clone(),
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Guard { hosts, origins })
    }

    /// Whether a request with this target and these headers may go further.
    pub fn check(&self, uri: &Uri, headers: &HeaderMap) -> Result<(), Refused> {
        check_origin_form(uri)?;
        let mut hosts = headers.get_all(header::HOST).iter();
        let (Some(host), None) = (hosts.next(), hosts.next()) else {
            return Err(Refused::BadHost);
        };
        let host = host
            .to_str()
            .ok()
            .and_then(|host| parse_authority(host.trim()))
            .ok_or(Refused::BadHost)?;
        let allowed = self.hosts.iter().any(|entry| {
            entry.host == host.host && entry.port.is_none_or(|port| host.port == Some(port))
        });
        if !allowed {
            return Err(Refused::ForeignHost);
        }
        let mut origins = headers.get_all(header::ORIGIN).iter();
        let origin = match (origins.next(), origins.next()) {
            (None, _) => return Ok(()),
            (Some(origin), None) => origin,
            (Some(_), Some(_)) => return Err(Refused::BadOrigin),
        };
        let origin = origin
            .to_str()
            .ok()
            .and_then(|origin| parse_origin(origin.trim()))
            .ok_or(Refused::BadOrigin)?;
        if self
            .origins
            .iter()
            .any(|entry| origin_matches(entry, &origin))
        {
            Ok(())
        } else {
            Err(Refused::ForeignOrigin)
        }
    }
}

/// The target must be a path (origin form): no scheme, no authority.
pub fn check_origin_form(uri: &Uri) -> Result<(), Refused> {
    if uri.scheme().is_some() || uri.authority().is_some() || !uri.path().starts_with('/') {
        return Err(Refused::NotOriginForm);
    }
    Ok(())
}

/// `name[:port]` or `[v6][:port]`, nothing else: no userinfo, no path, no spaces; a name is
/// letters, digits, `-` and `.`.
fn parse_authority(text: &str) -> Option<Authority> {
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (v6, after) = rest.split_once(']')?;
        let address: Ipv6Addr = v6.parse().ok()?;
        let port = match after {
            "" => None,
            _ => Some(parse_port(after.strip_prefix(':')?)?),
        };
        (address.to_string(), port)
    } else {
        let (name, port) = match text.split_once(':') {
            Some((name, port)) => (name, Some(parse_port(port)?)),
            None => (text, None),
        };
        let well_formed = !name.is_empty()
            && name.len() <= MAX_HOST_NAME_BYTES
            && name
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'.');
        if !well_formed {
            return None;
        }
        (name.to_ascii_lowercase(), port)
    };
    Some(Authority { host, port })
}

/// 1 to 5 digits, at most 65535.
fn parse_port(text: &str) -> Option<u16> {
    if text.is_empty() || text.len() > 5 || !text.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// An `Origin` as a browser serialises one (RFC 6454): `null`, or `scheme://host[:port]` with
/// no path, userinfo, query or fragment; the port is the scheme's default when none is named.
fn parse_origin(text: &str) -> Option<AllowedOrigin> {
    if text.eq_ignore_ascii_case("null") {
        return Some(AllowedOrigin::Null);
    }
    let (scheme, authority) = parse_origin_parts(text)?;
    let port = authority.port.or_else(|| default_port(&scheme))?;
    Some(AllowedOrigin::Tuple {
        scheme,
        host: authority.host,
        port: PortRule::Exact(port),
    })
}

/// `scheme://authority`, the scheme lower-cased.
fn parse_origin_parts(text: &str) -> Option<(String, Authority)> {
    let (scheme, rest) = text.split_once("://")?;
    let scheme_ok = scheme
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic())
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
    if !scheme_ok {
        return None;
    }
    Some((scheme.to_ascii_lowercase(), parse_authority(rest)?))
}

/// An allowed-origins entry: an origin, or `scheme://host:*` for any port (the host naming no
/// port of its own).
fn parse_allowed_origin(text: &str) -> Option<AllowedOrigin> {
    let Some(base) = text.strip_suffix(":*") else {
        return parse_origin(text);
    };
    let (scheme, authority) = parse_origin_parts(base)?;
    if authority.port.is_some() {
        return None;
    }
    Some(AllowedOrigin::Tuple {
        scheme,
        host: authority.host,
        port: PortRule::Any,
    })
}

/// The port an origin implies when it names none.
fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    }
}

fn origin_matches(allowed: &AllowedOrigin, origin: &AllowedOrigin) -> bool {
    match (allowed, origin) {
        (AllowedOrigin::Null, AllowedOrigin::Null) => true,
        (
            AllowedOrigin::Tuple { scheme, host, port },
            AllowedOrigin::Tuple {
                scheme: their_scheme,
                host: their_host,
                port: PortRule::Exact(their_port),
            },
        ) => {
            scheme == their_scheme
                && host == their_host
                && match port {
                    PortRule::Any => true,
                    PortRule::Exact(port) => port == their_port,
                }
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard() -> Guard {
        Guard::new(
            &[
                "localhost".into(),
                "127.0.0.1".into(),
                "::1".into(),
                "api.example:8443".into(),
            ],
            &["http://localhost:*".into(), "https://app.example".into()],
        )
        .expect("a guard")
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                header::HeaderName::from_bytes(name.as_bytes()).expect("name"),
                header::HeaderValue::from_str(value).expect("value"),
            );
        }
        map
    }

    #[test]
    fn hosts_origins_and_targets_are_read_strictly() {
        let guard = guard();
        let path: Uri = "/mcp".parse().expect("uri");
        /// A target, its headers, and what the guard answers.
        type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], Result<(), Refused>);
        let cases: &[Case] = &[
            ("/mcp", &[("Host", "127.0.0.1:8080")], Ok(())),
            ("/mcp", &[("Host", "LOCALHOST")], Ok(())),
            ("/mcp", &[("Host", "[::1]:9")], Ok(())),
            ("/mcp", &[("Host", "api.example:8443")], Ok(())),
            (
                "/mcp",
                &[("Host", "api.example:8444")],
                Err(Refused::ForeignHost),
            ),
            (
                "/mcp",
                &[("Host", "api.example")],
                Err(Refused::ForeignHost),
            ),
            (
                "/mcp",
                &[("Host", "attacker.example")],
                Err(Refused::ForeignHost),
            ),
            // Userinfo, a path, a second Host, none, an empty port, a port past 65535.
            (
                "/mcp",
                &[("Host", "evil.com@127.0.0.1")],
                Err(Refused::BadHost),
            ),
            ("/mcp", &[("Host", "127.0.0.1/x")], Err(Refused::BadHost)),
            (
                "/mcp",
                &[("Host", "127.0.0.1"), ("Host", "evil.com")],
                Err(Refused::BadHost),
            ),
            ("/mcp", &[], Err(Refused::BadHost)),
            ("/mcp", &[("Host", "localhost:")], Err(Refused::BadHost)),
            (
                "/mcp",
                &[("Host", "localhost:65536")],
                Err(Refused::BadHost),
            ),
            ("/mcp", &[("Host", "[::1")], Err(Refused::BadHost)),
            // Origins: allowed ones, a foreign one, two, malformed ones, `null`.
            (
                "/mcp",
                &[("Host", "localhost"), ("Origin", "http://localhost:3000")],
                Ok(()),
            ),
            (
                "/mcp",
                &[("Host", "localhost"), ("Origin", "https://app.example")],
                Ok(()),
            ),
            (
                "/mcp",
                &[("Host", "localhost"), ("Origin", "https://app.example:443")],
                Ok(()),
            ),
            (
                "/mcp",
                &[
                    ("Host", "localhost"),
                    ("Origin", "https://app.example:8443"),
                ],
                Err(Refused::ForeignOrigin),
            ),
            (
                "/mcp",
                &[("Host", "localhost"), ("Origin", "http://attacker.example")],
                Err(Refused::ForeignOrigin),
            ),
            (
                "/mcp",
                &[
                    ("Host", "localhost"),
                    ("Origin", "http://localhost:3000"),
                    ("Origin", "http://attacker.example"),
                ],
                Err(Refused::BadOrigin),
            ),
            (
                "/mcp",
                &[
                    ("Host", "localhost"),
                    ("Origin", "http://evil@localhost:3000"),
                ],
                Err(Refused::BadOrigin),
            ),
            (
                "/mcp",
                &[("Host", "localhost"), ("Origin", "http://localhost:3000/")],
                Err(Refused::BadOrigin),
            ),
            (
                "/mcp",
                &[("Host", "localhost"), ("Origin", "null")],
                Err(Refused::ForeignOrigin),
            ),
            // Absolute form and the asterisk: the server answers for itself only.
            (
                "http://evil.com/mcp",
                &[("Host", "localhost")],
                Err(Refused::NotOriginForm),
            ),
            ("*", &[("Host", "localhost")], Err(Refused::NotOriginForm)),
        ];
        for (target, pairs, expected) in cases {
            let uri: Uri = target.parse().unwrap_or_else(|_| path.clone());
            assert_eq!(
                guard.check(&uri, &headers(pairs)),
                *expected,
                "{target} {pairs:?}"
            );
        }
    }

    #[test]
    fn an_entry_that_does_not_parse_is_refused_at_start() {
        for hosts in [
            vec!["evil@localhost".to_owned()],
            vec!["localhost:x".to_owned()],
        ] {
            assert!(Guard::new(&hosts, &[]).is_err(), "{hosts:?}");
        }
        for origins in [
            "localhost:3000",
            "https://app.example:443:*",
            "https://app.example/path",
            "ftp://files.example",
        ] {
            assert!(Guard::new(&[], &[origins.to_owned()]).is_err(), "{origins}");
        }
        let null = Guard::new(&["localhost".into()], &["null".into()]).expect("null listed");
        let uri: Uri = "/mcp".parse().expect("uri");
        assert_eq!(
            null.check(&uri, &headers(&[("Host", "localhost"), ("Origin", "null")])),
            Ok(())
        );
    }
}
