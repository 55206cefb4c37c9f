//! Connections per client address (Kafka's `max.connections.per.ip` and
//! `max.connections.per.ip.overrides`): a connection accepted from an address that has
//! its limit open already is closed at once, as Kafka's acceptor closes it.

use std::collections::HashMap;
use std::net::IpAddr;

use parking_lot::Mutex;

use crate::error::{Error, Result};

/// The open connections of each client address and the limits.
#[derive(Debug, Default)]
pub(crate) struct IpConnections {
    /// Connections per address unless overridden (`usize::MAX`: no limit).
    limit: usize,
    /// Limits of given addresses.
    overrides: HashMap<IpAddr, usize>,
    /// Open connections by address (addresses with none are removed).
    open: Mutex<HashMap<IpAddr, usize>>,
}

impl IpConnections {
    pub(crate) fn new(limit: usize, overrides: HashMap<IpAddr, usize>) -> IpConnections {
        IpConnections {
            limit,
            overrides,
            open: Mutex::default(),
        }
    }

    /// The limit of `ip`.
    pub(crate) fn limit_of(&self, ip: IpAddr) -> usize {
        self.overrides.get(&ip).copied().unwrap_or(self.limit)
    }

    /// Counts a new connection from `ip`, or returns the limit it would exceed.
    pub(crate) fn acquire(&self, ip: IpAddr) -> std::result::Result<(), usize> {
        let limit = self.limit_of(ip);
        let mut open = self.open.lock();
        let n = open.entry(ip).or_insert(0);
        if *n >= limit {
            if *n == 0 {
                open.remove(&ip);
            }
            return Err(limit);
        }
        *n += 1;
        Ok(())
    }

    /// Uncounts a connection from `ip` that [`IpConnections::acquire`] counted.
    pub(crate) fn release(&self, ip: IpAddr) {
        let mut open = self.open.lock();
        if let Some(n) = open.get_mut(&ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&ip);
            }
        }
    }
}

/// Parses `max.connections.per.ip.overrides`: `HOST:LIMIT` pairs separated by commas
/// (an IPv6 address in brackets, `[::1]:5`); empty for none. A host is an IP address or
/// a host name, resolved once here as Kafka resolves it when the config is read; a name
/// holds every address it resolves to (`localhost`: 127.0.0.1 and, where the resolver
/// says so, ::1) to its limit. An address two entries name is refused, naming both.
pub fn parse_overrides(s: &str) -> Result<HashMap<IpAddr, usize>> {
    let bad = |reason: String| Error::InvalidConfig {
        key: "max.connections.per.ip.overrides".into(),
        reason,
    };
    let mut out = HashMap::new();
    let mut named_by: HashMap<IpAddr, &str> = HashMap::new();
    for entry in s.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (host, limit) = entry
            .rsplit_once(':')
            .ok_or_else(|| bad(format!("{entry:?} is not HOST:LIMIT")))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let limit: usize = limit
            .parse()
            .map_err(|_| bad(format!("{limit:?} in {entry:?} is not a connection count")))?;
        let ips = resolve(host).map_err(|reason| bad(format!("{host:?} in {entry:?} {reason}")))?;
        for ip in ips {
            if let Some(first) = named_by.insert(ip, entry) {
                return Err(bad(format!(
                    "{ip} is given twice (by {first:?} and {entry:?})"
                )));
            }
            out.insert(ip, limit);
        }
    }
    Ok(out)
}

/// The addresses of `host`: itself if it is an IP address, else what the system
/// resolver answers for the name (why not, if it is not a host name or does not
/// resolve).
fn resolve(host: &str) -> std::result::Result<Vec<IpAddr>, String> {
    use std::net::ToSocketAddrs;
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(vec![ip]);
    }
    // RFC 1123 host names: labels of letters, digits and '-', not starting or ending
    // with '-', separated by dots.
    let label = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if host.is_empty() || host.len() > 253 || !host.split('.').all(label) {
        return Err("is neither an IP address nor a host name".into());
    }
    let mut ips: Vec<IpAddr> = (host, 0)
        .to_socket_addrs()
        .map_err(|e| format!("does not resolve: {e}"))?
        .map(|a| a.ip())
        .collect();
    ips.sort_unstable();
    ips.dedup();
    if ips.is_empty() {
        return Err("resolves to no address".into());
    }
    Ok(ips)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_address_is_held_to_its_own_limit() {
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let c = IpConnections::new(2, HashMap::from([(b, 0)]));
        assert_eq!(c.acquire(a), Ok(()));
        assert_eq!(c.acquire(a), Ok(()));
        assert_eq!(c.acquire(a), Err(2));
        assert_eq!(c.acquire(b), Err(0));
        c.release(a);
        assert_eq!(c.acquire(a), Ok(()));
        assert!(c.open.lock().get(&b).is_none());
    }

    #[test]
    fn overrides_parse_as_kafka_writes_them_and_bad_ones_are_named() {
        let m = parse_overrides("127.0.0.1:5, [::1]:0,").unwrap();
        assert_eq!(m[&"127.0.0.1".parse::<IpAddr>().unwrap()], 5);
        assert_eq!(m[&"::1".parse::<IpAddr>().unwrap()], 0);
        assert!(parse_overrides("").unwrap().is_empty());
        for (bad, named) in [
            ("127.0.0.1", "\"127.0.0.1\" is not HOST:LIMIT"),
            ("bad_host!:3", "\"bad_host!\" in \"bad_host!:3\" is neither"),
            ("-x.example:3", "\"-x.example\" in"),
            ("127.0.0.1:x", "\"x\" in \"127.0.0.1:x\""),
            ("1.2.3.4:1,1.2.3.4:2", "1.2.3.4 is given twice"),
        ] {
            let e = parse_overrides(bad).unwrap_err().to_string();
            assert!(e.contains("max.connections.per.ip.overrides"), "{bad}: {e}");
            assert!(e.contains(named), "{bad}: {e}");
        }
    }

    #[test]
    fn a_host_name_holds_the_addresses_it_resolves_to() {
        let m = parse_overrides("localhost:3").unwrap();
        let v4: IpAddr = "127.0.0.1".parse().unwrap();
        assert_eq!(m.get(&v4), Some(&3), "{m:?}");
        assert!(m.keys().all(|ip| ip.is_loopback()), "{m:?}");
        // The same address by its name and by itself: refused, naming both entries.
        let e = parse_overrides("localhost:3,127.0.0.1:4")
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"localhost:3\" and \"127.0.0.1:4\""), "{e}");
    }
}
