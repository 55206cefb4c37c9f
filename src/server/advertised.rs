//! Kafka's `advertised.listeners`: the address clients are told for each listener, as
//! `NAME://HOST:PORT` entries separated by commas. A bare `HOST:PORT` entry stands for
//! the first listener (what `--advertised HOST:PORT` always meant); a bare `HOST` keeps
//! the listener's bound port. A listener without an entry advertises its bound address
//! (a wildcard one: the address the client reached on a single node, the node's quorum
//! host in a cluster).

use crate::error::{Error, Result};

/// The advertised host and port (None: the listener's bound port) of one listener.
pub(crate) type Advertised = (String, Option<u16>);

fn invalid(reason: String) -> Error {
    Error::InvalidConfig {
        key: "advertised.listeners".into(),
        reason,
    }
}

/// `HOST`, `HOST:PORT` or `[IPV6]:PORT`.
fn host_port(entry: &str, address: &str) -> Result<Advertised> {
    let (host, port) = if let Some(rest) = address.strip_prefix('[') {
        let Some((host, after)) = rest.split_once(']') else {
            return Err(invalid(format!(
                "{entry:?}: an IPv6 host needs its closing ]"
            )));
        };
        match after {
            "" => (host, None),
            _ => match after.strip_prefix(':') {
                Some(port) => (host, Some(port)),
                None => return Err(invalid(format!("{entry:?}: expected :PORT after ]"))),
            },
        }
    } else {
        match address.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (address, None),
        }
    };
    if host.is_empty() {
        return Err(invalid(format!("{entry:?} has no host")));
    }
    let port = port
        .map(|p| {
            p.parse::<u16>().map_err(|_| {
                invalid(format!(
                    "{entry:?}: the port {p:?} is not a number from 0 to 65535"
                ))
            })
        })
        .transpose()?;
    Ok((host.to_string(), port))
}

/// The advertised address of each of `names` (the listeners' names in order, the first
/// being the first listener) from `spec`; None for a listener without an entry. An
/// entry naming no listener, two entries for one listener and a malformed address are
/// `Error::InvalidConfig` for `advertised.listeners`.
pub(crate) fn resolve(spec: &str, names: &[String]) -> Result<Vec<Option<Advertised>>> {
    let mut out: Vec<Option<Advertised>> = vec![None; names.len()];
    for entry in spec.split(',').map(str::trim) {
        if entry.is_empty() {
            return Err(invalid(format!(
                "{spec:?} has an empty entry; give NAME://HOST:PORT entries separated by commas"
            )));
        }
        let (index, address) = match entry.split_once("://") {
            Some((name, address)) => {
                let upper = name.to_ascii_uppercase();
                let Some(i) = names.iter().position(|n| *n == upper) else {
                    return Err(invalid(format!(
                        "{entry:?} names listener {upper}, which is not one of this server's \
                         listeners ({})",
                        names.join(", ")
                    )));
                };
                (i, address)
            }
            None => (0, entry),
        };
        if out[index].is_some() {
            return Err(invalid(format!(
                "listener {} is advertised twice (a bare HOST:PORT stands for the first \
                 listener)",
                names[index]
            )));
        }
        out[index] = Some(host_port(entry, address)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<String> {
        vec!["PLAINTEXT".into(), "EXTERNAL".into(), "INTERNAL".into()]
    }

    #[test]
    fn named_entries_go_to_their_listener_and_a_bare_one_to_the_first() {
        let got = resolve(
            "broker1:9092, external://public.example:19094,[::1]:7",
            &["PLAINTEXT".into(), "EXTERNAL".into()],
        );
        assert!(got.is_err(), "two entries for the first listener");
        let got = resolve("broker1:9092, external://public.example:19094", &names()).unwrap();
        assert_eq!(
            got,
            vec![
                Some(("broker1".into(), Some(9092))),
                Some(("public.example".into(), Some(19094))),
                None,
            ]
        );
        let got = resolve("INTERNAL://[::1]:7,EXTERNAL://host", &names()).unwrap();
        assert_eq!(
            got,
            vec![
                None,
                Some(("host".into(), None)),
                Some(("::1".into(), Some(7))),
            ]
        );
    }

    #[test]
    fn bad_entries_are_config_errors_naming_them() {
        for (spec, says) in [
            ("OTHER://h:1", "OTHER"),
            ("h:1,PLAINTEXT://h:2", "twice"),
            ("h:1,,EXTERNAL://h:2", "empty entry"),
            ("EXTERNAL://:1", "no host"),
            ("EXTERNAL://h:99999", "99999"),
            ("[::1:5", "closing"),
        ] {
            let e = resolve(spec, &names()).unwrap_err();
            assert!(
                matches!(&e, Error::InvalidConfig { key, reason } if key == "advertised.listeners" && reason.contains(says)),
                "{spec}: {e}"
            );
        }
    }
}
