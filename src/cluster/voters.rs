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
        let port = addr
            .rsplit_once(':')
            .and_then(|(_, p)| p.parse::<u16>().ok())
            .ok_or_else(|| bad(format!("{addr:?} in {entry:?} is not HOST:PORT")))?;
        if port == 0 {
            return Err(bad(format!(
                "{entry:?} has port 0; voters need fixed addresses"
            )));
        }
        if voters.iter().any(|v| v.id == id) {
            return Err(bad(format!("node id {id} is listed twice")));
        }
        voters.push(Voter {
            id,
            addr: addr.trim().to_string(),
        });
    }
    if voters.is_empty() {
        return Err(bad(
            "no voter listed; expected 1@HOST:PORT,2@HOST:PORT,...".into()
        ));
    }
    Ok(voters)
}
