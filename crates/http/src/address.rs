//! Which addresses a request may reach, decided without I/O: the class of every IP address
//! ([`classify`]), a URL's origin as the platform will reach it ([`Target`], [`Origin`]), and
//! `localhost` names.
//!
//! URLs are parsed by the WHATWG URL standard (the `url` crate), the parser `fetch` itself
//! applies, so a host here is the host the browser connects to: `http://0x7f.1/`,
//! `http://2130706433/`, `http://0177.0.0.1/`, `http://%31%32%37.0.0.1/` and fullwidth digits
//! all denote 127.0.0.1, and are classified as such. A caller sends [`Target::url`], the URL
//! as parsed, so no platform can read another host out of the text that was checked.
//!
//! What this cannot see is where a host *name* leads. Natively,
//! [`HttpClient::send_public`](crate::HttpClient::send_public) checks every address a name
//! resolves to as it connects (a `ureq` resolver), which also closes DNS rebinding between a
//! check and the connection. In the browser there is no DNS: only literal addresses and
//! `localhost` names are checked, and a name that resolves to a private address is not
//! caught here (Chromium's Private Network Access is the browser's own guard for that).
//! Natively through a proxy from the environment, the proxy resolves names, so there too
//! only what is written in the URL is checked.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::HttpError;

/// What an IP address is, for deciding whether a request may reach it. IPv4 and IPv6 alike;
/// an IPv6 address that embeds an IPv4 one (mapped `::ffff:a.b.c.d`, translated
/// `::ffff:0:a.b.c.d`, compatible `::a.b.c.d`, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`) is
/// the class of the address it embeds, since that is where it leads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AddressClass {
    /// Globally reachable unicast: IPv4 outside every range below, IPv6 in `2000::/3`
    /// outside them. The only class reached without being named.
    Public,
    /// `127.0.0.0/8`, `::1`, and the names `localhost` and `*.localhost`: this machine.
    Loopback,
    /// `169.254.0.0/16` (where cloud metadata services answer), `fe80::/10`.
    LinkLocal,
    /// `10.0.0.0/8`, `172.16.0.0/12`, `192.168.0.0/16`; `fc00::/7` (unique local),
    /// `fec0::/10` (site-local, deprecated but still routed by some networks) and
    /// `64:ff9b:1::/48` (local-use NAT64).
    Private,
    /// `0.0.0.0/8` ("this network": Linux connects `0.0.0.0` to this machine) and `::`.
    Unspecified,
    /// `224.0.0.0/4`, `ff00::/8`.
    Multicast,
    /// `255.255.255.255`.
    Broadcast,
    /// `192.0.2.0/24`, `198.51.100.0/24`, `203.0.113.0/24`, `2001:db8::/32`, `3fff::/20`.
    Documentation,
    /// `100.64.0.0/10`, the shared address space of carrier-grade NAT (RFC 6598).
    SharedCgnat,
    /// `198.18.0.0/15`, `2001:2::/48` (network benchmarking, RFC 2544 and 5180).
    Benchmarking,
    /// Not globally routable for any other reason: `240.0.0.0/4` (future use),
    /// `192.0.0.0/24` (IETF protocol assignments), `192.88.99.0/24` (the deprecated 6to4
    /// relay), `100::/64` (discard), `2001::/23` (IETF protocol assignments: Teredo, whose
    /// embedded client address is obfuscated, ORCHID, AMT...), and IPv6 outside `2000::/3`.
    Reserved,
}

impl AddressClass {
    /// Whether a request may reach an address of this class without the run naming it:
    /// [`AddressClass::Public`] only.
    #[must_use]
    pub fn reachable_without_naming(self) -> bool {
        self == Self::Public
    }

    /// The class in words, as messages name it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Public => "public",
            Self::Loopback => "loopback",
            Self::LinkLocal => "link-local",
            Self::Private => "private",
            Self::Unspecified => "unspecified",
            Self::Multicast => "multicast",
            Self::Broadcast => "broadcast",
            Self::Documentation => "documentation",
            Self::SharedCgnat => "shared (carrier-grade NAT)",
            Self::Benchmarking => "benchmarking",
            Self::Reserved => "reserved",
        }
    }
}

impl fmt::Display for AddressClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The class of `ip` (see [`AddressClass`] for every range).
#[must_use]
pub fn classify(ip: IpAddr) -> AddressClass {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

/// Whether `ip` is in `base/bits`.
fn in_v4(ip: Ipv4Addr, base: [u8; 4], bits: u32) -> bool {
    let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
    u32::from(ip) & mask == u32::from(Ipv4Addr::from(base)) & mask
}

fn classify_v4(ip: Ipv4Addr) -> AddressClass {
    use AddressClass::{
        Benchmarking, Broadcast, Documentation, LinkLocal, Loopback, Multicast, Private, Public,
        Reserved, SharedCgnat, Unspecified,
    };
    let ranges: [([u8; 4], u32, AddressClass); 17] = [
        ([0, 0, 0, 0], 8, Unspecified),
        ([127, 0, 0, 0], 8, Loopback),
        ([10, 0, 0, 0], 8, Private),
        ([172, 16, 0, 0], 12, Private),
        ([192, 168, 0, 0], 16, Private),
        ([169, 254, 0, 0], 16, LinkLocal),
        ([100, 64, 0, 0], 10, SharedCgnat),
        ([192, 0, 0, 0], 24, Reserved),
        ([192, 0, 2, 0], 24, Documentation),
        ([198, 51, 100, 0], 24, Documentation),
        ([203, 0, 113, 0], 24, Documentation),
        ([198, 18, 0, 0], 15, Benchmarking),
        ([192, 88, 99, 0], 24, Reserved),
        ([224, 0, 0, 0], 4, Multicast),
        // Before 240/4, which holds it.
        ([255, 255, 255, 255], 32, Broadcast),
        ([240, 0, 0, 0], 4, Reserved),
        // Unreachable guard: every address is in 0/0; kept last so the table reads whole.
        ([0, 0, 0, 0], 0, Public),
    ];
    ranges
        .iter()
        .find(|(base, bits, _)| in_v4(ip, *base, *bits))
        .map_or(Public, |(_, _, class)| *class)
}

/// Whether `ip` is in `base/bits`.
fn in_v6(ip: Ipv6Addr, base: [u16; 8], bits: u32) -> bool {
    let mask = u128::MAX.checked_shl(128 - bits).unwrap_or(0);
    u128::from(ip) & mask == u128::from(Ipv6Addr::from(base)) & mask
}

/// The IPv4 address in the low 32 bits.
fn low_v4(ip: Ipv6Addr) -> Ipv4Addr {
    Ipv4Addr::from(u32::try_from(u128::from(ip) & u128::from(u32::MAX)).unwrap_or(0))
}

fn classify_v6(ip: Ipv6Addr) -> AddressClass {
    use AddressClass::{
        Benchmarking, Documentation, LinkLocal, Loopback, Multicast, Private, Public, Reserved,
        Unspecified,
    };
    if ip == Ipv6Addr::UNSPECIFIED {
        return Unspecified;
    }
    if ip == Ipv6Addr::LOCALHOST {
        return Loopback;
    }
    // Forms that lead to an IPv4 address: mapped, translated (SIIT), compatible, NAT64.
    let embeds_low_v4 = [
        ([0, 0, 0, 0, 0, 0xffff, 0, 0], 96),
        ([0, 0, 0, 0, 0xffff, 0, 0, 0], 96),
        ([0, 0, 0, 0, 0, 0, 0, 0], 96),
        ([0x64, 0xff9b, 0, 0, 0, 0, 0, 0], 96),
    ];
    if embeds_low_v4
        .iter()
        .any(|(base, bits)| in_v6(ip, *base, *bits))
    {
        return classify_v4(low_v4(ip));
    }
    // 6to4: `2002:AABB:CCDD::/48` leads to AA.BB.CC.DD.
    if in_v6(ip, [0x2002, 0, 0, 0, 0, 0, 0, 0], 16) {
        let [_, high, low, ..] = ip.segments();
        return classify_v4(Ipv4Addr::from((u32::from(high) << 16) | u32::from(low)));
    }
    let ranges: [([u16; 8], u32, AddressClass); 11] = [
        ([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48, Private),
        ([0x100, 0, 0, 0, 0, 0, 0, 0], 64, Reserved),
        // Before 2001::/23, which holds it.
        ([0x2001, 2, 0, 0, 0, 0, 0, 0], 48, Benchmarking),
        ([0x2001, 0, 0, 0, 0, 0, 0, 0], 23, Reserved),
        ([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32, Documentation),
        ([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20, Documentation),
        ([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7, Private),
        ([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10, LinkLocal),
        ([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10, Private),
        ([0xff00, 0, 0, 0, 0, 0, 0, 0], 8, Multicast),
        ([0x2000, 0, 0, 0, 0, 0, 0, 0], 3, Public),
    ];
    ranges
        .iter()
        .find(|(base, bits, _)| in_v6(ip, *base, *bits))
        .map_or(Reserved, |(_, _, class)| *class)
}

/// Why `host` is not reached, in words: "`127.0.0.1` is a loopback address", "`db.internal`
/// resolves to 10.0.0.5, a private address", "`localhost` is a loopback name" (`address` is
/// `None` when no address was looked up).
#[must_use]
pub fn refusal_reason(host: &str, address: Option<IpAddr>, class: AddressClass) -> String {
    let article = match class.as_str().as_bytes().first() {
        Some(b'a' | b'e' | b'i' | b'o' | b'u') => "an",
        _ => "a",
    };
    match address {
        None => format!("`{host}` is {article} {class} name"),
        Some(ip) if host.trim_start_matches('[').trim_end_matches(']') == ip.to_string() => {
            format!("`{host}` is {article} {class} address")
        }
        Some(ip) => format!("`{host}` resolves to {ip}, {article} {class} address"),
    }
}

/// `http` or `https`: the only schemes a request goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    Http,
    Https,
}

impl Scheme {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Http => "http",
            Self::Https => "https",
        }
    }

    /// 80 or 443.
    #[must_use]
    pub fn default_port(self) -> u16 {
        match self {
            Self::Http => 80,
            Self::Https => 443,
        }
    }
}

/// A URL's host as the platform reaches it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Host {
    /// An address written in the URL, in whatever form the URL standard reads as one
    /// (`[::1]`, `127.1`, `0x7f.0.0.1`, `2130706433`...).
    Ip(IpAddr),
    /// A domain name, lower-cased, international names in their ASCII (`xn--`) form.
    Name(String),
}

impl Host {
    /// The host's class when it is known without DNS: an address's own, or
    /// [`AddressClass::Loopback`] for `localhost` and `*.localhost` (with or without a
    /// trailing dot; RFC 6761, and browsers resolve them to loopback themselves). `None`
    /// for any other name: only resolving it can tell.
    #[must_use]
    pub fn class(&self) -> Option<AddressClass> {
        match self {
            Self::Ip(ip) => Some(classify(*ip)),
            Self::Name(name) => {
                let name = name.strip_suffix('.').unwrap_or(name);
                (name == "localhost" || name.ends_with(".localhost"))
                    .then_some(AddressClass::Loopback)
            }
        }
    }
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]"),
            Self::Ip(IpAddr::V4(ip)) => write!(f, "{ip}"),
            Self::Name(name) => f.write_str(name),
        }
    }
}

/// Scheme, host and port (the scheme's default filled in): what "the same server" means.
/// Displays as `scheme://host[:port]`, the port left out when it is the default.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Origin {
    pub scheme: Scheme,
    pub host: Host,
    pub port: u16,
}

impl Origin {
    /// An origin as a person writes one: `scheme://host[:port]`, with or without a trailing
    /// `/`; no user, path, query or fragment. The error says what was wrong with `text`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let target = Target::parse(text).map_err(|error| match error {
            HttpError::InvalidUrl { reason, .. } => format!("`{text}` is not an origin: {reason}"),
            other => other.to_string(),
        })?;
        let url = &target.url;
        let extra = if !url.username().is_empty() || url.password().is_some() {
            Some("a user name or password")
        } else if url.path() != "/" {
            Some("a path")
        } else if url.query().is_some() {
            Some("a query")
        } else if url.fragment().is_some() {
            Some("a fragment")
        } else {
            None
        };
        match extra {
            Some(what) => Err(format!(
                "`{text}` is not an origin: it has {what}; write scheme://host[:port], as in \
                 `{}`",
                target.origin
            )),
            None => Ok(target.origin),
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", self.scheme.as_str(), self.host)?;
        if self.port != self.scheme.default_port() {
            write!(f, ":{}", self.port)?;
        }
        Ok(())
    }
}

/// An absolute `http` or `https` URL, parsed as `fetch` parses it, with its [`Origin`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    url: url::Url,
    origin: Origin,
}

impl Target {
    /// Parses `text` by the URL standard. Refused with [`HttpError::InvalidUrl`]: a relative
    /// or malformed URL, a scheme other than `http` and `https`, a host that is not a valid
    /// domain or address (an IPv4-looking host out of range, an IPv6 zone).
    pub fn parse(text: &str) -> Result<Self, HttpError> {
        let invalid = |reason: String| HttpError::InvalidUrl {
            url: text.to_owned(),
            reason,
        };
        // Before the parser, which would read `localhost:80` as scheme `localhost`.
        crate::check_scheme(text)?;
        let url = url::Url::parse(text).map_err(|error| invalid(error.to_string()))?;
        Self::from_url(url).map_err(invalid)
    }

    fn from_url(url: url::Url) -> Result<Self, String> {
        let scheme = match url.scheme() {
            "http" => Scheme::Http,
            "https" => Scheme::Https,
            other => {
                return Err(format!(
                    "scheme `{other}` is not allowed: only http and https are"
                ));
            }
        };
        let host = match url.host() {
            Some(url::Host::Ipv4(ip)) => Host::Ip(IpAddr::V4(ip)),
            Some(url::Host::Ipv6(ip)) => Host::Ip(IpAddr::V6(ip)),
            Some(url::Host::Domain(name)) if !name.is_empty() => Host::Name(name.to_owned()),
            _ => return Err("no host after the scheme".to_owned()),
        };
        let port = url.port().unwrap_or_else(|| scheme.default_port());
        Ok(Self {
            url,
            origin: Origin { scheme, host, port },
        })
    }

    /// The URL as parsed and serialized: the one to send.
    #[must_use]
    pub fn url(&self) -> &str {
        self.url.as_str()
    }

    #[must_use]
    pub fn origin(&self) -> &Origin {
        &self.origin
    }

    /// `location` (a redirect's `Location`, absolute or relative) resolved against this URL,
    /// as `fetch` resolves it; the same refusals as [`Target::parse`].
    pub fn join(&self, location: &str) -> Result<Self, HttpError> {
        let invalid = |reason: String| HttpError::InvalidUrl {
            url: location.to_owned(),
            reason,
        };
        let url = self
            .url
            .join(location)
            .map_err(|error| invalid(error.to_string()))?;
        Self::from_url(url).map_err(invalid)
    }

    /// Refuses, with [`HttpError::AddressRefused`], a host whose class is known without DNS
    /// (an address, a `localhost` name) and is not reachable without naming. A name only
    /// DNS can place passes: see the module docs for who checks it.
    pub fn check_public(&self) -> Result<(), HttpError> {
        let host = &self.origin.host;
        match host.class() {
            Some(class) if !class.reachable_without_naming() => Err(HttpError::AddressRefused {
                url: self.url().to_owned(),
                host: host.to_string(),
                address: match host {
                    Host::Ip(ip) => Some(*ip),
                    Host::Name(_) => None,
                },
                class,
            }),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use AddressClass::*;

    #[test]
    fn every_address_has_its_class() {
        let cases: &[(&str, AddressClass)] = &[
            // IPv4
            ("8.8.8.8", Public),
            ("1.1.1.1", Public),
            ("93.184.215.14", Public),
            ("0.0.0.0", Unspecified),
            ("0.255.255.255", Unspecified),
            ("1.0.0.0", Public),
            ("127.0.0.1", Loopback),
            ("127.255.255.254", Loopback),
            ("126.255.255.255", Public),
            ("128.0.0.0", Public),
            ("10.0.0.1", Private),
            ("10.255.255.255", Private),
            ("11.0.0.0", Public),
            ("9.255.255.255", Public),
            ("172.16.0.1", Private),
            ("172.31.255.255", Private),
            ("172.15.255.255", Public),
            ("172.32.0.0", Public),
            ("192.168.1.1", Private),
            ("192.169.0.0", Public),
            ("169.254.169.254", LinkLocal),
            ("169.254.0.0", LinkLocal),
            ("169.255.0.0", Public),
            ("100.64.0.1", SharedCgnat),
            ("100.127.255.255", SharedCgnat),
            ("100.63.255.255", Public),
            ("100.128.0.0", Public),
            ("192.0.0.8", Reserved),
            ("192.0.2.1", Documentation),
            ("198.51.100.7", Documentation),
            ("203.0.113.200", Documentation),
            ("203.0.114.0", Public),
            ("198.18.0.1", Benchmarking),
            ("198.19.255.255", Benchmarking),
            ("198.20.0.0", Public),
            ("198.17.255.255", Public),
            ("192.88.99.1", Reserved),
            ("224.0.0.1", Multicast),
            ("239.255.255.255", Multicast),
            ("240.0.0.1", Reserved),
            ("255.255.255.254", Reserved),
            ("255.255.255.255", Broadcast),
            // IPv6
            ("2606:4700:4700::1111", Public),
            ("2a00:1450:4001:80e::200e", Public),
            ("::", Unspecified),
            ("::1", Loopback),
            ("::2", Unspecified),
            ("fe80::1", LinkLocal),
            ("febf:ffff::1", LinkLocal),
            ("fec0::1", Private),
            ("feff::1", Private),
            ("fc00::1", Private),
            ("fd12:3456:789a::1", Private),
            ("fe00::1", Reserved),
            ("ff02::1", Multicast),
            ("ff0e::1", Multicast),
            ("2001:db8::1", Documentation),
            ("2001:db9::1", Public),
            ("3fff:fff::1", Documentation),
            ("3fff:1000::1", Public),
            ("2001:2::1", Benchmarking),
            ("2001::1", Reserved),
            ("2001:0:4136:e378:8000:63bf:3fff:fdd2", Reserved),
            ("2001:1ff::1", Reserved),
            ("2001:200::1", Public),
            ("100::1", Reserved),
            ("100:0:0:1::1", Reserved),
            ("5f00::1", Reserved),
            ("4000::1", Reserved),
            ("1fff::1", Reserved),
            ("64:ff9b:1::a00:1", Private),
            // IPv6 that leads to IPv4: classified by what it embeds.
            ("::ffff:127.0.0.1", Loopback),
            ("::ffff:7f00:1", Loopback),
            ("::ffff:10.0.0.1", Private),
            ("::ffff:169.254.169.254", LinkLocal),
            ("::ffff:8.8.8.8", Public),
            ("::ffff:0.0.0.0", Unspecified),
            ("::ffff:0:127.0.0.1", Loopback),
            ("::ffff:0:8.8.8.8", Public),
            ("::127.0.0.1", Loopback),
            ("::192.168.0.1", Private),
            ("::8.8.8.8", Public),
            ("64:ff9b::127.0.0.1", Loopback),
            ("64:ff9b::169.254.169.254", LinkLocal),
            ("64:ff9b::8.8.8.8", Public),
            ("2002:7f00:1::", Loopback),
            ("2002:a9fe:a9fe::1", LinkLocal),
            ("2002:c0a8:101::", Private),
            ("2002:808:808::1", Public),
        ];
        for (text, expected) in cases {
            let ip: IpAddr = text.parse().unwrap();
            assert_eq!(classify(ip), *expected, "{text}");
            assert_eq!(
                expected.reachable_without_naming(),
                *expected == Public,
                "{text}"
            );
        }
    }

    #[test]
    fn hosts_are_read_as_fetch_reads_them() {
        let ip = |text: &str| Host::Ip(text.parse().unwrap());
        let name = |text: &str| Host::Name(text.to_owned());
        // (URL, host, port, class known without DNS)
        let cases: Vec<(&str, Host, u16, Option<AddressClass>)> = vec![
            (
                "http://127.0.0.1:8080/x",
                ip("127.0.0.1"),
                8080,
                Some(Loopback),
            ),
            ("http://[::1]/", ip("::1"), 80, Some(Loopback)),
            (
                "https://[::ffff:127.0.0.1]/",
                ip("::ffff:127.0.0.1"),
                443,
                Some(Loopback),
            ),
            ("http://[0:0:0:0:0:0:0:1]:9/", ip("::1"), 9, Some(Loopback)),
            // Numeric forms browsers and resolvers accept: the address they denote.
            ("http://2130706433/", ip("127.0.0.1"), 80, Some(Loopback)),
            ("http://0x7f.1/", ip("127.0.0.1"), 80, Some(Loopback)),
            ("http://0x7F000001/", ip("127.0.0.1"), 80, Some(Loopback)),
            ("http://0177.0.0.1/", ip("127.0.0.1"), 80, Some(Loopback)),
            ("http://127.1/", ip("127.0.0.1"), 80, Some(Loopback)),
            ("http://127.0.0.1./", ip("127.0.0.1"), 80, Some(Loopback)),
            ("http://0/", ip("0.0.0.0"), 80, Some(Unspecified)),
            (
                "http://%31%32%37.0.0.1/",
                ip("127.0.0.1"),
                80,
                Some(Loopback),
            ),
            (
                "http://\u{ff11}\u{ff12}\u{ff17}.0.0.1/",
                ip("127.0.0.1"),
                80,
                Some(Loopback),
            ),
            (
                "http://169.254.169.254/latest/meta-data/",
                ip("169.254.169.254"),
                80,
                Some(LinkLocal),
            ),
            (
                "http://0xa9.0xfe.0xa9.0xfe/",
                ip("169.254.169.254"),
                80,
                Some(LinkLocal),
            ),
            ("http://3232235777/", ip("192.168.1.1"), 80, Some(Private)),
            ("http://012.0.0.1/", ip("10.0.0.1"), 80, Some(Private)),
            ("http://[fe80::1]/", ip("fe80::1"), 80, Some(LinkLocal)),
            ("http://8.8.8.8/", ip("8.8.8.8"), 80, Some(Public)),
            // `localhost` names are loopback without asking DNS.
            (
                "http://localhost:3000/",
                name("localhost"),
                3000,
                Some(Loopback),
            ),
            ("http://LOCALHOST/", name("localhost"), 80, Some(Loopback)),
            ("http://localhost./", name("localhost."), 80, Some(Loopback)),
            (
                "http://app.localhost/",
                name("app.localhost"),
                80,
                Some(Loopback),
            ),
            (
                "http://a.b.LocalHost./",
                name("a.b.localhost."),
                80,
                Some(Loopback),
            ),
            ("http://notlocalhost/", name("notlocalhost"), 80, None),
            (
                "http://localhost.example.com/",
                name("localhost.example.com"),
                80,
                None,
            ),
            // Other names: only DNS can place them.
            ("https://Example.COM/a?b#c", name("example.com"), 443, None),
            ("http://example.com:443/", name("example.com"), 443, None),
            (
                "https://bücher.example/",
                name("xn--bcher-kva.example"),
                443,
                None,
            ),
            // Backslashes and user info do not hide the host.
            (
                "http://user:pw@127.0.0.1/",
                ip("127.0.0.1"),
                80,
                Some(Loopback),
            ),
            (
                "http://example.com@127.0.0.1/",
                ip("127.0.0.1"),
                80,
                Some(Loopback),
            ),
            (
                "http://127.0.0.1\\@example.com/",
                ip("127.0.0.1"),
                80,
                Some(Loopback),
            ),
            (
                "http://127.0.0.1#@example.com/",
                ip("127.0.0.1"),
                80,
                Some(Loopback),
            ),
        ];
        for (url, host, port, class) in cases {
            let target = Target::parse(url).unwrap_or_else(|error| panic!("{url}: {error}"));
            assert_eq!(
                (
                    &target.origin().host,
                    target.origin().port,
                    target.origin().host.class()
                ),
                (&host, port, class),
                "{url}"
            );
            // What is sent is what was read: parsing the sent URL gives the same origin.
            assert_eq!(
                Target::parse(target.url()).unwrap().origin(),
                target.origin(),
                "{url}"
            );
        }
    }

    #[test]
    fn urls_that_reach_no_http_server_are_refused() {
        let cases = [
            ("ftp://example.com/", "scheme `ftp` is not allowed"),
            ("file:///etc/passwd", "scheme `file` is not allowed"),
            ("localhost:8080", "scheme `localhost` is not allowed"),
            ("/relative", "no scheme"),
            ("http://", "no host after the scheme"),
            // `fetch` reads this as http://127.0.0.1/x; refused before the parser sees it.
            ("http:\\\\127.0.0.1\\x", "no host after the scheme"),
            ("http://256.0.0.1/", "invalid IPv4 address"),
            ("http://0x100000000/", "invalid IPv4 address"),
            ("http://1.2.3.4.5/", "invalid IPv4 address"),
            ("http://[fe80::1%25eth0]/", "invalid IPv6 address"),
            ("http://exa mple.com/", "invalid international domain name"),
            ("http://example.com:99999/", "invalid port number"),
        ];
        for (url, expected) in cases {
            let error = Target::parse(url).unwrap_err().to_string();
            assert!(error.contains(expected), "{url}: {error}");
        }
    }

    #[test]
    fn literal_hosts_outside_public_are_refused_without_dns() {
        let cases = [
            ("http://8.8.8.8/", None),
            ("https://example.com/", None),
            (
                "http://127.0.0.1:8080/",
                Some(
                    "refused `http://127.0.0.1:8080/` before connecting: `127.0.0.1` is a loopback address",
                ),
            ),
            (
                "http://localhost:1/?token=k",
                Some(
                    "refused `http://localhost:1/?token=k` before connecting: `localhost` is a loopback name",
                ),
            ),
            (
                "http://[::ffff:a9fe:a9fe]/",
                Some("`[::ffff:169.254.169.254]` is a link-local address"),
            ),
            ("http://10.0.0.1/", Some("`10.0.0.1` is a private address")),
        ];
        for (url, expected) in cases {
            let got = Target::parse(url).unwrap().check_public().err();
            match (got, expected) {
                (None, None) => {}
                (Some(error), Some(expected)) => {
                    assert!(matches!(error, HttpError::AddressRefused { .. }), "{url}");
                    assert!(error.to_string().contains(expected), "{url}: {error}");
                }
                (got, _) => panic!("{url}: {got:?}"),
            }
        }
    }

    #[test]
    fn origins_are_written_scheme_host_port() {
        let cases = [
            ("http://127.0.0.1:8080", Ok("http://127.0.0.1:8080")),
            ("HTTP://LOCALHOST:80/", Ok("http://localhost")),
            ("https://[::1]:443", Ok("https://[::1]")),
            ("http://0x7f.1:9", Ok("http://127.0.0.1:9")),
            ("https://api.example.com", Ok("https://api.example.com")),
            (
                "http://127.0.0.1:8080/path",
                Err(
                    "`http://127.0.0.1:8080/path` is not an origin: it has a path; write scheme://host[:port], as in `http://127.0.0.1:8080`",
                ),
            ),
            (
                "http://u:p@example.com",
                Err("`http://u:p@example.com` is not an origin: it has a user name or password"),
            ),
            ("http://example.com/?q", Err("it has a query")),
            ("http://example.com#f", Err("it has a fragment")),
            (
                "example.com",
                Err("`example.com` is not an origin: no scheme"),
            ),
            ("ws://example.com", Err("scheme `ws` is not allowed")),
        ];
        for (text, expected) in cases {
            match (Origin::parse(text), expected) {
                (Ok(origin), Ok(shown)) => assert_eq!(origin.to_string(), shown, "{text}"),
                (Err(error), Err(part)) => assert!(error.contains(part), "{text}: {error}"),
                (got, _) => panic!("{text}: {got:?}"),
            }
        }
    }

    #[test]
    fn a_redirect_location_is_resolved_against_the_url() {
        let base = Target::parse("http://127.0.0.1:8080/a/b?q=1").unwrap();
        let cases = [
            ("/c", "http://127.0.0.1:8080/c"),
            ("c", "http://127.0.0.1:8080/a/c"),
            ("?z", "http://127.0.0.1:8080/a/b?z"),
            ("//127.0.0.1:9/x", "http://127.0.0.1:9/x"),
            ("https://example.com/", "https://example.com/"),
            ("http://0x7f.1:9/", "http://127.0.0.1:9/"),
        ];
        for (location, expected) in cases {
            assert_eq!(base.join(location).unwrap().url(), expected, "{location}");
        }
        let refused = base.join("file:///etc/passwd").unwrap_err().to_string();
        assert!(
            refused.contains("scheme `file` is not allowed"),
            "{refused}"
        );
    }
}
