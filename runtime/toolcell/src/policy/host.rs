//! The hosts a policy's network rule names ([`HostPattern`]), and which addresses are not
//! public ([`is_non_public`]). Plain data and its checks: the sender that honours them is the
//! wasm executor's (`wasm/net.rs`).

use crate::policy::PolicyError;
use std::net::IpAddr;

/// One host a policy allows: `[scheme://]host[:port]`, where host may start with `*.` to cover
/// its subdomains. Without a scheme only HTTPS is covered; without a port, the scheme's
/// default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPattern {
    scheme: String,
    host: String,
    port: Option<u16>,
    /// The rule says `allow_private`: this pattern may reach non-public addresses.
    allow_private: bool,
}

impl HostPattern {
    /// Parse a pattern from a policy.
    pub fn parse(text: &str) -> Result<HostPattern, PolicyError> {
        let (scheme, rest) = match text.split_once("://") {
            Some((scheme, rest)) => (scheme.to_ascii_lowercase(), rest),
            None => ("https".to_owned(), text),
        };
        if scheme != "http" && scheme != "https" {
            return Err(PolicyError::new(format!(
                "host {text:?}: only http and https are supported"
            )));
        }
        let (host, port) = match rest.rsplit_once(':') {
            Some((host, port)) if !host.ends_with(']') || rest.starts_with('[') => {
                let port = port.parse::<u16>().map_err(|_| {
                    PolicyError::new(format!("host {text:?}: {port:?} is not a port"))
                })?;
                (host, Some(port))
            }
            _ => (rest, None),
        };
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        if host.is_empty() || host.contains('/') {
            return Err(PolicyError::new(format!(
                "host {text:?} is not [scheme://]host[:port]"
            )));
        }
        // A wildcard is `*` (every host) or `*.` before a domain: `*.` alone would match every
        // name written with a trailing dot, and `*x` nothing.
        if host != "*" && host.starts_with('*') && (!host.starts_with("*.") || host.len() <= 2) {
            return Err(PolicyError::new(format!(
                "host {text:?}: a wildcard is `*` or `*.domain`"
            )));
        }
        Ok(HostPattern {
            scheme,
            host,
            port,
            allow_private: false,
        })
    }

    /// This pattern, allowed to reach non-public addresses (a policy rule's `allow_private`).
    pub fn allowing_private(mut self, allow: bool) -> HostPattern {
        self.allow_private = allow;
        self
    }

    /// True when a request matched by this pattern may reach `addresses`: all public, or the
    /// pattern is the one IP address they are, or it is `localhost` and they are all loopback,
    /// or the rule allows private addresses.
    pub fn may_reach(&self, addresses: &[IpAddr]) -> bool {
        if self.allow_private || !addresses.iter().any(|ip| is_non_public(*ip)) {
            return true;
        }
        if let Ok(named) = self.host.parse::<IpAddr>() {
            return addresses.iter().all(|ip| *ip == named);
        }
        self.host == "localhost" && addresses.iter().all(IpAddr::is_loopback)
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
}

/// True for addresses a tool must not reach unless a policy names them: every range the IANA
/// special-purpose registries mark as not globally reachable, and the IPv6 forms that carry an
/// IPv4 address (mapped, compatible, NAT64, 6to4) judged by that address. Teredo
/// (2001::/32) hides its address and is refused whole.
pub fn is_non_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            a == 0                                        // 0.0.0.0/8 "this network"
                || a == 10                                // 10.0.0.0/8 private
                || a == 127                               // loopback
                || (a == 100 && (64..128).contains(&b))   // 100.64.0.0/10 shared (CGNAT)
                || (a == 169 && b == 254)                 // link-local (cloud metadata)
                || (a == 172 && (16..32).contains(&b))    // 172.16.0.0/12 private
                || (a == 192 && b == 0 && c == 0)         // 192.0.0.0/24 protocol assignments
                || (a == 192 && b == 0 && c == 2)         // 192.0.2.0/24 documentation
                || (a == 192 && b == 88 && c == 99)       // 6to4 relay anycast
                || (a == 192 && b == 168)                 // 192.168.0.0/16 private
                || (a == 198 && (18..20).contains(&b))    // 198.18.0.0/15 benchmarking
                || (a == 198 && b == 51 && c == 100)      // 198.51.100.0/24 documentation
                || (a == 203 && b == 0 && c == 113)       // 203.0.113.0/24 documentation
                || a >= 224 // multicast 224/4, reserved 240/4, broadcast
        }
        IpAddr::V6(v6) => {
            let segments = v6.segments();
            let [.., a, b, c, d] = v6.octets();
            let last_32_bits = IpAddr::V4(std::net::Ipv4Addr::new(a, b, c, d));
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_non_public(IpAddr::V4(v4));
            }
            // ::/96, IPv4-compatible (deprecated), including :: and ::1.
            if segments[..6].iter().all(|&s| s == 0) {
                return true;
            }
            // 64:ff9b::/96 NAT64: judged by the IPv4 address it carries.
            if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
                return is_non_public(last_32_bits);
            }
            // 2002::/16 6to4: the IPv4 address is in the second and third segments.
            if segments[0] == 0x2002 {
                let [hi, lo] = [segments[1], segments[2]];
                let v4 = std::net::Ipv4Addr::new(
                    (hi >> 8) as u8,
                    (hi & 0xff) as u8,
                    (lo >> 8) as u8,
                    (lo & 0xff) as u8,
                );
                return is_non_public(IpAddr::V4(v4));
            }
            let first = segments[0];
            (first & 0xfe00) == 0xfc00                           // fc00::/7 unique local
                || (first & 0xffc0) == 0xfe80                    // fe80::/10 link-local
                || (first & 0xffc0) == 0xfec0                    // fec0::/10 site-local
                || (first & 0xff00) == 0xff00                    // ff00::/8 multicast
                || (segments[0] == 0x64 && segments[1] == 0xff9b) // 64:ff9b:1::/48 local NAT64
                || (segments[0] == 0x100 && segments[1..4] == [0, 0, 0]) // 100::/64 discard
                || (segments[0] == 0x2001 && segments[1] == 0)   // 2001::/32 Teredo
                || (segments[0] == 0x2001 && segments[1] == 0xdb8) // documentation
                || (segments[0] == 0x2001 && segments[1] < 0x200) // 2001::/23 IETF protocols
                || segments[0] == 0x3fff && segments[1] < 0x1000 // 3fff::/20 documentation
        }
    }
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
    }

    /// Which patterns may reach which addresses: only the address itself, `localhost` on
    /// loopback, or a rule that allows private addresses, ever reaches a non-public one. These
    /// are classified, never connected to.
    #[test]
    fn only_the_address_itself_or_allow_private_reaches_a_private_address() {
        let ips = |list: &[&str]| -> Vec<IpAddr> {
            list.iter().map(|ip| ip.parse().expect(ip)).collect()
        };
        let pattern = |text: &str| HostPattern::parse(text).expect(text);
        let rows: &[(&str, bool, &[&str], bool)] = &[
            ("metadata.internal", false, &["169.254.169.254"], false),
            ("db.corp.example", false, &["10.0.0.5"], false),
            ("db.corp.example", true, &["10.0.0.5"], true),
            ("api.example.org", false, &["93.184.216.34"], true),
            (
                "api.example.org",
                false,
                &["93.184.216.34", "127.0.0.1"],
                false,
            ),
            ("http://127.0.0.1:8080", false, &["127.0.0.1"], true),
            ("http://127.0.0.1:8080", false, &["127.0.0.2"], false),
            ("http://[::1]:8080", false, &["::1"], true),
            ("http://localhost:8080", false, &["127.0.0.1", "::1"], true),
            ("http://localhost:8080", false, &["10.0.0.1"], false),
            ("*.example.org", false, &["10.0.0.1"], false),
            ("*", false, &["192.168.0.1"], false),
        ];
        for &(text, allow, addresses, expected) in rows {
            assert_eq!(
                pattern(text)
                    .allowing_private(allow)
                    .may_reach(&ips(addresses)),
                expected,
                "{text} (allow_private {allow}) to {addresses:?}"
            );
        }
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
            "0.1.2.3",
            "100.127.255.255",
            "192.0.0.8",
            "192.0.2.1",
            "198.18.0.1",
            "198.19.255.255",
            "198.51.100.7",
            "203.0.113.9",
            "224.0.0.1",
            "240.0.0.1",
            "255.255.255.255",
            "::",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b::10.0.0.1",
            "64:ff9b:1::1",
            "2002:a9fe:a9fe::1",
            "2002:7f00:1::1",
            "2001:0:4136:e378::1",
            "2001:db8::1",
            "ff02::1",
            "fec0::1",
            "100::1",
        ] {
            assert!(is_non_public(ip.parse().expect(ip)), "{ip}");
        }
        for ip in [
            "93.184.216.34",
            "2606:4700::1111",
            "8.8.8.8",
            "100.128.0.1",
            "198.20.0.1",
            "64:ff9b::5db8:d822",
            "2002:5db8:d822::1",
            "2a00:1450::1",
        ] {
            assert!(!is_non_public(ip.parse().expect(ip)), "{ip}");
        }
    }
}
