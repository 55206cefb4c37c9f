//! SASL on a connection: the mechanisms (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), the
//! per-connection state between SaslHandshake and a completed SaslAuthenticate, and the
//! slow-down of clients that keep failing to log in.
//!
//! States: `Start` (nothing but ApiVersions and SaslHandshake is served) -> a mechanism
//! chosen by SaslHandshake (then SaslAuthenticate tokens, or raw tokens after a v0
//! handshake) -> `Authenticated` (every API, as the user's principal). A failure ends
//! the connection after its answer.

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::credentials::CredentialStore;
use super::scram::{ScramError, ScramMechanism, ScramServer, Step};

/// A SASL mechanism the server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SaslMechanism {
    /// `PLAIN` (RFC 4616): the password travels in the clear, so use it over TLS; it is
    /// checked against the user's SCRAM credential (SHA-512 if there is one, else
    /// SHA-256).
    Plain,
    /// `SCRAM-SHA-256` or `SCRAM-SHA-512`.
    Scram(ScramMechanism),
}

impl SaslMechanism {
    /// Every mechanism, in the order ApiVersions-era clients see them listed.
    pub const ALL: [SaslMechanism; 3] = [
        SaslMechanism::Plain,
        SaslMechanism::Scram(ScramMechanism::Sha256),
        SaslMechanism::Scram(ScramMechanism::Sha512),
    ];

    /// The SASL name (`PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512`).
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::Scram(m) => m.name(),
        }
    }

    /// The mechanism of this SASL name.
    pub fn from_name(name: &str) -> Option<SaslMechanism> {
        SaslMechanism::ALL.into_iter().find(|m| m.name() == name)
    }
}

impl fmt::Display for SaslMechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a connection's SASL authentication stands.
#[derive(Debug)]
pub(crate) enum SaslState {
    /// No mechanism chosen yet.
    Start,
    /// SaslHandshake chose a mechanism; `raw` after a v0 handshake (the tokens then come
    /// as bare size-prefixed frames, not SaslAuthenticate requests).
    Exchange {
        mechanism: SaslMechanism,
        raw: bool,
        scram: Option<Box<ScramServer>>,
    },
    /// Done: the principal is set.
    Authenticated,
}

/// What one authentication token led to.
#[derive(Debug)]
pub(crate) enum AuthStep {
    /// Send these bytes back; more tokens follow.
    Continue(Vec<u8>),
    /// Authenticated as `User:<user>`; send these bytes back.
    Done {
        /// The user name.
        user: String,
        /// The last server message (empty for PLAIN).
        reply: Vec<u8>,
    },
    /// Authentication failed: `log` says why (with the user, never a password), the
    /// client gets Kafka's generic message.
    Failed {
        /// For the log.
        log: String,
        /// For the client's error message.
        client: String,
    },
}

/// Parses a PLAIN message `[authzid] NUL authcid NUL passwd` (RFC 4616).
pub(crate) fn parse_plain(token: &[u8]) -> Result<(String, String), String> {
    let text = std::str::from_utf8(token).map_err(|_| "the PLAIN message is not UTF-8")?;
    let mut parts = text.split('\0');
    let (Some(authzid), Some(user), Some(password), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("a PLAIN message is authzid NUL user NUL password".into());
    };
    if user.is_empty() {
        return Err("empty user name".into());
    }
    if password.is_empty() {
        return Err("empty password".into());
    }
    if !authzid.is_empty() && authzid != user {
        return Err(format!(
            "authorization id {authzid:?} differs from the user name {user:?}"
        ));
    }
    Ok((user.to_string(), password.to_string()))
}

/// Takes one authentication token of `mechanism` (in `scram`'s exchange for SCRAM).
pub(crate) fn step(
    mechanism: SaslMechanism,
    scram: &mut Option<Box<ScramServer>>,
    decoy_key: [u8; 32],
    credentials: &dyn CredentialStore,
    token: &[u8],
) -> AuthStep {
    let generic = |m: SaslMechanism| {
        format!(
            "Authentication failed during authentication due to invalid credentials with SASL mechanism {m}"
        )
    };
    match mechanism {
        SaslMechanism::Plain => match parse_plain(token) {
            Err(why) => AuthStep::Failed {
                log: format!("malformed PLAIN message: {why}"),
                client: format!("Authentication failed: {why}"),
            },
            Ok((user, password)) => {
                let credential = [ScramMechanism::Sha512, ScramMechanism::Sha256]
                    .into_iter()
                    .find_map(|m| credentials.credential(&user, m));
                match credential {
                    Some(c) if c.verify_password(&password) => AuthStep::Done {
                        user,
                        reply: Vec::new(),
                    },
                    Some(_) => AuthStep::Failed {
                        log: format!("wrong password for user {user:?} (PLAIN)"),
                        client: "Authentication failed: Invalid username or password".into(),
                    },
                    None => AuthStep::Failed {
                        log: format!("unknown user {user:?} (PLAIN)"),
                        client: "Authentication failed: Invalid username or password".into(),
                    },
                }
            }
        },
        SaslMechanism::Scram(m) => {
            let server = scram.get_or_insert_with(|| Box::new(ScramServer::new(m, decoy_key)));
            let mut user_seen = None;
            let result = server.step(token, |user| {
                user_seen = Some(user.to_string());
                credentials.credential(user, m)
            });
            match result {
                Ok(Step::Continue(reply)) => AuthStep::Continue(reply),
                Ok(Step::Success { user, reply }) => AuthStep::Done { user, reply },
                Err(ScramError::InvalidCredentials) => AuthStep::Failed {
                    log: format!("wrong password or unknown user ({m})"),
                    client: generic(mechanism),
                },
                Err(e) => AuthStep::Failed {
                    log: format!(
                        "{e} ({m}{})",
                        user_seen
                            .map(|u| format!(", user {u:?}"))
                            .unwrap_or_default()
                    ),
                    client: generic(mechanism),
                },
            }
        }
    }
}

/// Failed logins per client address, to slow down a client that keeps failing (its own
/// answers are delayed; nobody else's are).
///
/// Each failure doubles the delay of that address's next failure answer, from 100 ms
/// (Kafka's `connection.failed.authentication.delay.ms`) up to [`MAX_DELAY`]; an address
/// with no failure for [`FORGET_AFTER`] starts over, as does one that logs in.
#[derive(Debug, Default)]
pub(crate) struct FailedLogins {
    by_addr: Mutex<HashMap<IpAddr, (u32, Instant)>>,
}

/// The first failure's delay.
const BASE_DELAY: Duration = Duration::from_millis(100);
/// The longest delay.
pub(crate) const MAX_DELAY: Duration = Duration::from_secs(5);
/// Failures older than this are forgotten.
const FORGET_AFTER: Duration = Duration::from_secs(60);
/// Addresses tracked at most; past that the oldest are dropped.
const MAX_ADDRS: usize = 4096;

impl FailedLogins {
    /// Records a failure from `ip` at `now`; how long to wait before answering it.
    pub(crate) fn failed(&self, ip: IpAddr, now: Instant) -> Duration {
        let mut map = self.by_addr.lock();
        if map.len() >= MAX_ADDRS && !map.contains_key(&ip) {
            map.retain(|_, (_, last)| now.saturating_duration_since(*last) < FORGET_AFTER);
            if map.len() >= MAX_ADDRS
                && let Some(oldest) = map.iter().min_by_key(|(_, (_, t))| *t).map(|(k, _)| *k)
            {
                map.remove(&oldest);
            }
        }
        let entry = map.entry(ip).or_insert((0, now));
        if now.saturating_duration_since(entry.1) >= FORGET_AFTER {
            entry.0 = 0;
        }
        entry.0 = entry.0.saturating_add(1);
        entry.1 = now;
        let doublings = (entry.0 - 1).min(16);
        (BASE_DELAY * (1u32 << doublings)).min(MAX_DELAY)
    }

    /// A successful login from `ip`: its count starts over.
    pub(crate) fn succeeded(&self, ip: IpAddr) {
        self.by_addr.lock().remove(&ip);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::credentials::{CredentialChange, FileCredentialStore};
    use crate::security::scram::ScramCredential;

    #[test]
    fn plain_messages() {
        assert_eq!(
            parse_plain(b"\0alice\0pw").unwrap(),
            ("alice".into(), "pw".into())
        );
        assert_eq!(
            parse_plain(b"alice\0alice\0pw").unwrap(),
            ("alice".into(), "pw".into())
        );
        for bad in [
            &b""[..],
            b"alice",
            b"\0alice",
            b"\0\0pw",
            b"\0alice\0",
            b"eve\0alice\0pw",
            b"\0a\0b\0c",
            b"\0\xff\0pw",
        ] {
            assert!(parse_plain(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn plain_checks_the_password_against_the_scram_credential() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileCredentialStore::open(dir.path()).unwrap();
        store
            .apply(&[CredentialChange::Upsert {
                user: "alice".into(),
                credential: ScramCredential::new(ScramMechanism::Sha256, "pw", 4096),
            }])
            .unwrap();
        let mut none = None;
        let ok = step(
            SaslMechanism::Plain,
            &mut none,
            [0; 32],
            &store,
            b"\0alice\0pw",
        );
        assert!(
            matches!(ok, AuthStep::Done { ref user, .. } if user == "alice"),
            "{ok:?}"
        );
        let bad = step(
            SaslMechanism::Plain,
            &mut none,
            [0; 32],
            &store,
            b"\0alice\0px",
        );
        assert!(matches!(bad, AuthStep::Failed { .. }));
        let unknown = step(
            SaslMechanism::Plain,
            &mut none,
            [0; 32],
            &store,
            b"\0bob\0pw",
        );
        assert!(matches!(unknown, AuthStep::Failed { .. }));
    }

    #[test]
    fn failures_slow_down_one_address_and_are_forgotten() {
        let f = FailedLogins::default();
        let t = Instant::now();
        let a: IpAddr = [10, 0, 0, 1].into();
        let b: IpAddr = [10, 0, 0, 2].into();
        assert_eq!(f.failed(a, t), Duration::from_millis(100));
        assert_eq!(f.failed(a, t), Duration::from_millis(200));
        assert_eq!(f.failed(a, t), Duration::from_millis(400));
        for _ in 0..20 {
            f.failed(a, t);
        }
        assert_eq!(f.failed(a, t), MAX_DELAY);
        // Another address is not slowed down by the first one's failures.
        assert_eq!(f.failed(b, t), Duration::from_millis(100));
        // A minute later the first starts over; a success resets too.
        assert_eq!(f.failed(a, t + FORGET_AFTER), Duration::from_millis(100));
        f.succeeded(b);
        assert_eq!(f.failed(b, t), Duration::from_millis(100));
    }
}
