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

/// Parses `max.connections.per.ip.overrides`: `ADDRESS:LIMIT` pairs separated by commas
/// (an IPv6 address in brackets, `[::1]:5`); empty for none.
pub fn parse_overrides(s: &str) -> Result<HashMap<IpAddr, usize>> {
    let bad = |reason: String| Error::InvalidConfig {
        key: "max.connections.per.ip.overrides".into(),
        reason,
    };
    let mut out = HashMap::new();
    for entry in s.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (host, limit) = entry
            .rsplit_once(':')
            .ok_or_else(|| bad(format!("{entry:?} is not ADDRESS:LIMIT")))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let ip: IpAddr = host
            .parse()
            .map_err(|_| bad(format!("{host:?} in {entry:?} is not an IP address")))?;
        let limit: usize = limit
            .parse()
            .map_err(|_| bad(format!("{limit:?} in {entry:?} is not a connection count")))?;
        if out.insert(ip, limit).is_some() {
            return Err(bad(format!("{ip} is given twice")));
        }
    }
    Ok(out)
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
        for bad in ["127.0.0.1", "host:3", "127.0.0.1:x", "1.2.3.4:1,1.2.3.4:2"] {
            let e = parse_overrides(bad).unwrap_err().to_string();
            assert!(e.contains("max.connections.per.ip.overrides"), "{bad}: {e}");
        }
    }
}
