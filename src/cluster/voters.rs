//! The quorum's voters: who they are and Kafka's `controller.quorum.voters` syntax.

use crate::error::{Error, Result};

/// One voter of the quorum: node id and `host:port` of its quorum listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Voter {
    /// Node id.
    pub id: i32,
    /// Quorum address, `host:port`.
    pub addr: String,
}

/// Parses Kafka's `controller.quorum.voters` syntax: `1@host:port,2@host:port,...`.
pub(crate) fn parse_quorum(s: &str) -> Result<Vec<Voter>> {
    let bad = |reason: String| Error::InvalidConfig {
        key: "controller.quorum.voters".into(),
        reason,
    };
    let mut voters: Vec<Voter> = Vec::new();
    // Each voter's entry, to name it beside a later one that clashes with it.
    let mut entries: Vec<&str> = Vec::new();
    for entry in s.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (id, addr) = entry
            .split_once('@')
            .ok_or_else(|| bad(format!("{entry:?} is not ID@HOST:PORT")))?;
        let id: i32 = id
            .trim()
            .parse()
            .ok()
            .filter(|id| *id >= 0 && *id < i32::MAX)
            .ok_or_else(|| {
                bad(format!(
                    "node id {id:?} in {entry:?} is not a number from 0"
                ))
            })?;
        let addr = addr.trim();
        let port = addr
            .rsplit_once(':')
            .filter(|(host, _)| !host.is_empty())
            .and_then(|(_, p)| p.parse::<u16>().ok())
            .ok_or_else(|| bad(format!("{addr:?} in {entry:?} is not HOST:PORT")))?;
        if port == 0 {
            return Err(bad(format!(
                "{entry:?} has port 0; voters need fixed addresses"
            )));
        }
        if let Some(i) = voters.iter().position(|v| v.id == id) {
            return Err(bad(format!(
                "node id {id} is listed twice ({:?} and {entry:?})",
                entries[i]
            )));
        }
        // Host names are case-insensitive: two voters at one address could not both
        // listen there, and each would take the other's messages as its own.
        if let Some(i) = voters
            .iter()
            .position(|v| v.addr.eq_ignore_ascii_case(addr))
        {
            return Err(bad(format!(
                "{entry:?} has the address of {:?}: each voter needs an address of its own",
                entries[i]
            )));
        }
        voters.push(Voter {
            id,
            addr: addr.to_string(),
        });
        entries.push(entry);
    }
    if voters.is_empty() {
        return Err(bad(
            "no voter listed; expected 1@HOST:PORT,2@HOST:PORT,...".into()
        ));
    }
    Ok(voters)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(list: &str) -> String {
        parse_quorum(list).unwrap_err().to_string()
    }

    #[test]
    fn a_bad_voter_list_names_the_entry_and_why() {
        let e = refused("1@h:1,2@h:2,1@h:3");
        assert!(
            e.contains("node id 1 is listed twice (\"1@h:1\" and \"1@h:3\")"),
            "{e}"
        );
        // Two voters at one address: the second could never listen there.
        let e = refused("1@h:1, 2@H:1");
        assert!(
            e.contains("\"2@H:1\" has the address of \"1@h:1\"")
                && e.contains("an address of its own"),
            "{e}"
        );
        let e = refused("1@:9093");
        assert!(
            e.contains("\":9093\" in \"1@:9093\" is not HOST:PORT"),
            "{e}"
        );
        // The same host on other ports, and other hosts on one port, are voters apart.
        assert_eq!(parse_quorum("1@h:1,2@h:2,3@g:1").unwrap().len(), 3);
    }
}
