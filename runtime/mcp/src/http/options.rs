//! How the server is set up ([`HttpOptions`]), and whether an address may be served as asked
//! ([`check_exposure`]): anything but loopback needs authentication and the names clients
//! reach it by. Connections are counted per peer ([`peer_key`]).

use crate::http::config_error::ConfigError;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

/// How the HTTP server is set up (`toolcell serve --http`).
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// The address to listen on (port 0: any free port, printed at start).
    pub addr: SocketAddr,
    /// The bearer tokens file ([`crate::http::auth`]); this or `oauth` is required unless `addr` is
    /// loopback.
    pub tokens: Option<PathBuf>,
    /// The OAuth resource server's configuration ([`crate::http::oauth`]).
    pub oauth: Option<PathBuf>,
    /// Hosts (`name` or `name:port`) the `Host` header may name; empty: loopback names only.
    pub allowed_hosts: Vec<String>,
    /// Origins (`scheme://host[:port|:*]`) a browser's `Origin` header may name; empty:
    /// loopback origins only.
    pub allowed_origins: Vec<String>,
    /// How long calls in flight may run on after SIGTERM.
    pub grace: Duration,
    /// The file holding the SHA-256 (hex) of the operator's token for `/metrics`. With tokens
    /// or OAuth, `/metrics` answers only its bearer (403 to everyone else, tenants included);
    /// without authentication (loopback), it is open unless this is given.
    pub metrics_token: Option<PathBuf>,
    /// The store replicas share quotas, approval answers and tasks through (`--state`); none:
    /// each process keeps its own.
    #[cfg(feature = "state")]
    pub state: Option<StateOptions>,
    /// Who an unauthenticated (loopback) caller is, for the fair shares.
    pub anonymous: AnonymousClients,
}

/// Who the callers of a server without tokens (loopback only) are, for the fair shares
/// ([`crate::http::share`]): nothing tells them apart but the address they call from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum AnonymousClients {
    /// Each peer address is a client of its own (the default): two local programs calling
    /// from different loopback addresses get a share each, and so does one program that
    /// uses several addresses.
    #[default]
    PerAddress,
    /// Every anonymous caller is one client, sharing one share however many addresses it
    /// calls from: no local program can take more than one client's part of the pool.
    One,
}

impl AnonymousClients {
    /// The client key of an anonymous caller from `peer`.
    pub(crate) fn client(self, peer: IpAddr) -> String {
        match self {
            AnonymousClients::PerAddress => format!("peer:{peer}"),
            AnonymousClients::One => "anonymous".to_owned(),
        }
    }
}

/// Where the shared store is (`toolcell serve --http --state URL`).
#[cfg(feature = "state")]
#[derive(Debug, Clone)]
pub struct StateOptions {
    /// `redis://` or `rediss://` (a database and a password may be in it).
    pub url: String,
    /// A file holding the store's password (trailing whitespace dropped), read at start.
    pub password_file: Option<PathBuf>,
    /// A PEM file of the CA certificates a `rediss://` store's certificate must chain to,
    /// instead of the system's and the web's roots (a store with a private CA).
    pub ca_file: Option<PathBuf>,
    /// A file holding the operator's seal key (64 hex digits), the same for every replica;
    /// without it, [`crate::state::SEAL_KEY_ENV`].
    pub seal_key_file: Option<PathBuf>,
}

/// Whether serving at `addr` is allowed: an address other than loopback needs authentication
/// (`auth_given`) and the names clients will reach it by (`hosts_given`), since the default
/// allow-list holds loopback names only.
pub fn check_exposure(
    addr: SocketAddr,
    auth_given: bool,
    hosts_given: bool,
) -> Result<(), ConfigError> {
    if is_loopback(addr.ip()) {
        return Ok(());
    }
    if !auth_given {
        return Err(ConfigError::NoAuthentication { addr });
    }
    if !hosts_given {
        return Err(ConfigError::NoAllowedHost { addr });
    }
    Ok(())
}

/// The key a peer's connections are counted under: its address, but an IPv6 address's /64
/// (what one host is usually given), so that one host cannot take a place per address of its
/// prefix. An IPv4 address mapped into IPv6 is the IPv4 address.
pub(super) fn peer_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let prefix = u128::from(v6) & !((1u128 << 64) - 1);
                IpAddr::V6(std::net::Ipv6Addr::from(prefix))
            }
        },
        v4 => v4,
    }
}

fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ipv6_host_is_one_peer_however_many_addresses_it_uses() {
        let key = |text: &str| peer_key(text.parse().expect("an address"));
        assert_eq!(key("2001:db8::1"), key("2001:db8::ffff:1234"));
        assert_ne!(key("2001:db8::1"), key("2001:db8:0:1::1"));
        assert_eq!(key("::ffff:10.0.0.1"), key("10.0.0.1"));
        assert_ne!(key("10.0.0.1"), key("10.0.0.2"));
    }

    #[test]
    fn only_loopback_may_go_without_authentication() {
        for addr in [
            "127.0.0.1:0",
            "127.8.9.10:80",
            "[::1]:0",
            "[::ffff:127.0.0.1]:0",
        ] {
            let addr: SocketAddr = addr.parse().expect("an address");
            assert_eq!(check_exposure(addr, false, false), Ok(()), "{addr}");
        }
        for addr in ["0.0.0.0:8080", "[::]:0", "10.0.0.1:80", "192.168.1.2:0"] {
            let addr: SocketAddr = addr.parse().expect("an address");
            let refused = check_exposure(addr, false, true).expect_err("refused");
            assert!(
                refused.to_string().contains("without authentication"),
                "{addr}: {refused}"
            );
            let refused = check_exposure(addr, true, false).expect_err("refused");
            assert!(
                refused.to_string().contains("--allow-host"),
                "{addr}: {refused}"
            );
            assert_eq!(check_exposure(addr, true, true), Ok(()), "{addr}");
        }
    }
}
