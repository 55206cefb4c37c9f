//! Where users' SCRAM credentials are kept: the [`CredentialStore`] trait and its file
//! implementation in a data directory (`users`, a crash-safe TLCP file; see
//! docs/format.md). Only salted keys are stored (see the `scram` module), never a
//! password.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use parking_lot::RwLock;

use super::scram::{MAX_ITERATIONS, MIN_ITERATIONS, ScramCredential, ScramMechanism};
use crate::error::{Error, Result};
use crate::storage::codec::{Reader, Writer};

/// The file of the credentials in a single node's data directory.
pub(crate) const USERS_FILE: &str = "users";

/// Payload version of the `users` file.
const USERS_VERSION: u8 = 1;

/// A change to the credentials, applied with others in one durable step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialChange {
    /// Adds or replaces `user`'s credential for the credential's mechanism.
    Upsert {
        /// The user name.
        user: String,
        /// The new credential.
        credential: ScramCredential,
    },
    /// Removes `user`'s credential for `mechanism` (nothing if there is none).
    Delete {
        /// The user name.
        user: String,
        /// The mechanism whose credential goes.
        mechanism: ScramMechanism,
    },
}

/// Users' SCRAM credentials.
pub trait CredentialStore: Send + Sync + fmt::Debug {
    /// `user`'s credential for `mechanism`.
    fn credential(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential>;
    /// Every user with a credential, and for each its mechanisms and iterations, sorted by
    /// user name.
    fn users(&self) -> Vec<(String, Vec<(ScramMechanism, u32)>)>;
    /// Applies `changes` in order, durably, all or none.
    fn apply(&self, changes: &[CredentialChange]) -> Result<()>;
}

/// Checks a user name and a credential's iterations as Kafka does (a non-empty name,
/// 4096 to 16384 iterations). The error names the field.
pub fn validate_credential(user: &str, iterations: u32) -> Result<()> {
    if user.is_empty() {
        return Err(Error::InvalidConfig {
            key: "user".into(),
            reason: "a user name must not be empty".into(),
        });
    }
    if iterations < MIN_ITERATIONS {
        return Err(Error::InvalidConfig {
            key: "iterations".into(),
            reason: format!("{iterations} is too few; at least {MIN_ITERATIONS}"),
        });
    }
    if iterations > MAX_ITERATIONS {
        return Err(Error::InvalidConfig {
            key: "iterations".into(),
            reason: format!("{iterations} is too many; at most {MAX_ITERATIONS}"),
        });
    }
    Ok(())
}

/// The credentials of a data directory, in its `users` file.
///
/// One process at a time: the one that has the directory's broker open (the server, or
/// `tidelog users` with the server stopped).
#[derive(Debug)]
pub struct FileCredentialStore {
    path: PathBuf,
    users: RwLock<Users>,
}

impl FileCredentialStore {
    /// Reads `<dir>/users` (none yet: no user). A damaged file is `Error::Corrupt`.
    pub fn open(dir: impl AsRef<Path>) -> Result<FileCredentialStore> {
        let path = dir.as_ref().join(USERS_FILE);
        let users = match crate::storage::read_checkpoint(&path)? {
            None => Users::new(),
            Some(payload) => decode_users(&payload, &path.display().to_string())?,
        };
        Ok(FileCredentialStore {
            path,
            users: RwLock::new(users),
        })
    }
}

impl CredentialStore for FileCredentialStore {
    fn credential(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential> {
        self.users.read().get(user)?.get(&mechanism).cloned()
    }

    fn users(&self) -> Vec<(String, Vec<(ScramMechanism, u32)>)> {
        list_users(&self.users.read())
    }

    fn apply(&self, changes: &[CredentialChange]) -> Result<()> {
        let mut users = self.users.write();
        let mut next = users.clone();
        apply_changes(&mut next, changes)?;
        crate::storage::write_checkpoint(&self.path, &encode_users(&next))?;
        *users = next;
        Ok(())
    }
}

/// Users' credentials by user name and mechanism.
pub(crate) type Users = BTreeMap<String, BTreeMap<ScramMechanism, ScramCredential>>;

/// Every user with a credential, and for each its mechanisms and iterations, sorted by
/// user name ([`CredentialStore::users`] of a map).
pub(crate) fn list_users(users: &Users) -> Vec<(String, Vec<(ScramMechanism, u32)>)> {
    users
        .iter()
        .map(|(u, creds)| {
            (
                u.clone(),
                creds
                    .values()
                    .map(|c| (c.mechanism, c.iterations))
                    .collect(),
            )
        })
        .collect()
}

/// Applies `changes` to `users` in order; on an invalid change (the error names it)
/// `users` may be partly changed, so callers apply to a copy.
pub(crate) fn apply_changes(users: &mut Users, changes: &[CredentialChange]) -> Result<()> {
    for change in changes {
        match change {
            CredentialChange::Upsert { user, credential } => {
                validate_credential(user, credential.iterations)?;
                users
                    .entry(user.clone())
                    .or_default()
                    .insert(credential.mechanism, credential.clone());
            }
            CredentialChange::Delete { user, mechanism } => {
                if let Some(creds) = users.get_mut(user) {
                    creds.remove(mechanism);
                    if creds.is_empty() {
                        users.remove(user);
                    }
                }
            }
        }
    }
    Ok(())
}

/// Writes one user's credential: user (string), mechanism (`u8`, Kafka's type: 1
/// SCRAM-SHA-256, 2 SCRAM-SHA-512), iterations (`u32`), salt, StoredKey, ServerKey (each
/// a `u32` length and bytes).
pub(crate) fn put_credential(w: &mut Writer, user: &str, c: &ScramCredential) {
    w.str(user);
    w.u8(c.mechanism.kafka_type() as u8);
    w.u32(c.iterations);
    w.bytes(&c.salt);
    w.bytes(&c.stored_key);
    w.bytes(&c.server_key);
}

/// Reads what [`put_credential`] wrote, checking the name and iterations.
pub(crate) fn get_credential(r: &mut Reader<'_>) -> Result<(String, ScramCredential)> {
    let user = r.str()?;
    let mechanism = get_mechanism(r, &user)?;
    let iterations = r.u32()?;
    let salt = r.bytes()?.to_vec();
    let stored_key = r.bytes()?.to_vec();
    let server_key = r.bytes()?.to_vec();
    validate_credential(&user, iterations).map_err(|e| r.error(format!("user {user:?}: {e}")))?;
    Ok((
        user,
        ScramCredential {
            mechanism,
            salt,
            iterations,
            stored_key,
            server_key,
        },
    ))
}

/// Reads a mechanism's Kafka type (`u8`); `user` names the credential in errors.
pub(crate) fn get_mechanism(r: &mut Reader<'_>, user: &str) -> Result<ScramMechanism> {
    let kind = r.u8()?;
    ScramMechanism::from_kafka_type(kind as i8)
        .ok_or_else(|| r.error(format!("user {user:?} has unknown mechanism type {kind}")))
}

/// The payload of the `users` file: version (`u8`, 1), count (`u32`), then each
/// credential as [`put_credential`] writes it.
fn encode_users(users: &Users) -> Vec<u8> {
    let mut w = Writer::new();
    w.u8(USERS_VERSION);
    let all: Vec<(&String, &ScramCredential)> = users
        .iter()
        .flat_map(|(u, creds)| creds.values().map(move |c| (u, c)))
        .collect();
    w.u32(all.len() as u32);
    for (user, c) in all {
        put_credential(&mut w, user, c);
    }
    w.into_bytes()
}

fn decode_users(payload: &[u8], location: &str) -> Result<Users> {
    let mut r = Reader::new(payload, location);
    let version = r.u8()?;
    if version != USERS_VERSION {
        return Err(r.error(format!(
            "credentials payload version {version}; this build reads version {USERS_VERSION}"
        )));
    }
    let n = r.count(21)?;
    let mut users = Users::new();
    for _ in 0..n {
        let (user, credential) = get_credential(&mut r)?;
        users
            .entry(user)
            .or_default()
            .insert(credential.mechanism, credential);
    }
    r.finish()?;
    Ok(users)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_survive_a_reopen_and_deletes_remove_them() {
        let dir = tempfile::tempdir().unwrap();
        let a = ScramCredential::new(ScramMechanism::Sha256, "pw-a", 4096);
        let b = ScramCredential::new(ScramMechanism::Sha512, "pw-b", 8192);
        {
            let s = FileCredentialStore::open(dir.path()).unwrap();
            s.apply(&[
                CredentialChange::Upsert {
                    user: "alice".into(),
                    credential: a.clone(),
                },
                CredentialChange::Upsert {
                    user: "alice".into(),
                    credential: b.clone(),
                },
            ])
            .unwrap();
        }
        let s = FileCredentialStore::open(dir.path()).unwrap();
        assert_eq!(s.credential("alice", ScramMechanism::Sha256), Some(a));
        assert_eq!(
            s.users(),
            vec![(
                "alice".into(),
                vec![
                    (ScramMechanism::Sha256, 4096),
                    (ScramMechanism::Sha512, 8192)
                ]
            )]
        );
        let bytes = std::fs::read(dir.path().join(USERS_FILE)).unwrap();
        for secret in [&b"pw-a"[..], b"pw-b"] {
            assert!(
                !bytes.windows(secret.len()).any(|w| w == secret),
                "a password is in the file"
            );
        }
        s.apply(&[CredentialChange::Delete {
            user: "alice".into(),
            mechanism: ScramMechanism::Sha256,
        }])
        .unwrap();
        drop(s);
        let s = FileCredentialStore::open(dir.path()).unwrap();
        assert_eq!(s.credential("alice", ScramMechanism::Sha256), None);
        assert_eq!(s.credential("alice", ScramMechanism::Sha512), Some(b));
    }

    #[test]
    fn a_bad_change_applies_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let s = FileCredentialStore::open(dir.path()).unwrap();
        let good = ScramCredential::new(ScramMechanism::Sha256, "pw", 4096);
        let mut weak = good.clone();
        weak.iterations = 100;
        let err = s
            .apply(&[
                CredentialChange::Upsert {
                    user: "a".into(),
                    credential: good,
                },
                CredentialChange::Upsert {
                    user: "b".into(),
                    credential: weak,
                },
            ])
            .unwrap_err();
        assert!(err.to_string().contains("too few"), "{err}");
        assert!(s.users().is_empty());
        assert!(!dir.path().join(USERS_FILE).exists());
    }

    #[test]
    fn damaged_payloads_are_errors() {
        let mut users = Users::new();
        users.entry("u".into()).or_default().insert(
            ScramMechanism::Sha512,
            ScramCredential::new(ScramMechanism::Sha512, "x", 4096),
        );
        let bytes = encode_users(&users);
        assert_eq!(decode_users(&bytes, "t").unwrap(), users);
        for cut in 0..bytes.len() {
            assert!(decode_users(&bytes[..cut], "t").is_err());
        }
        let mut bad = bytes.clone();
        bad[1 + 4 + 4 + 1] = 7; // the mechanism type
        assert!(decode_users(&bad, "t").is_err());
    }
}
