//! The metadata image's snapshot codec: [`MetadataImage::encode`] writes a snapshot's
//! data, [`MetadataImage::decode`] reads it back (versions 1 to [`IMAGE_VERSION`]).
//!
//! Layout: version (`u16`), index (`u64`), cluster id (optional string), next producer
//! id (`i64`), then a count (`u32`) and the entries of each of: brokers, topics (with
//! their partitions), SCRAM credentials, ACL bindings, proposers' applied proposals
//! (version 4), voters' directory ids (version 5), client quotas (version 7: entities
//! with their keys and values, as the `client-quotas` file of a single node); each
//! partition's adding and removing replicas since version 6; each broker's rack since
//! version 8; groups' config overrides (version 9, as the `group-configs` file of a
//! single node); the dynamic broker configs since version 10 (a count (`u32`), each as an
//! `AlterBrokerConfig` record's fields: broker id, -1 for the cluster-wide default, and
//! its keys with their values); each broker's supported features and the finalized
//! feature levels since version 11 (a count (`u32`), each: name, level (`i16`)); each
//! partition's offline replicas since version 12.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::{
    BrokerConfigs, BrokerRegistration, MetadataImage, PartitionImage, ProposerWindow, TopicImage,
};
use crate::cluster::records::codec::{
    get_endpoints, get_levels, get_opt_str, get_supported_features, put_endpoints, put_levels,
    put_opt_str, put_supported_features,
};
use crate::coordinator::group_configs;
use crate::error::Result;
use crate::security::acl::{self, AclBinding};
use crate::security::credentials::{self, Users};
use crate::security::quota::{self, QuotaTable};
use crate::storage::codec::{Reader, Writer};

/// Image encoding version written by this code (version 1, without users and ACLs,
/// version 2, without the brokers' named listeners, and version 3, without the
/// proposers' applied proposals, version 4, without the voters' directory ids, and
/// version 5, without the partitions' reassignments, version 6, without client
/// quotas, version 7, without the brokers' racks, version 8, without group configs,
/// version 9, without the dynamic broker configs, version 10, without features, and
/// version 11, without the partitions' offline replicas, are still read).
const IMAGE_VERSION: u16 = 12;

impl MetadataImage {
    /// Encodes the image (a snapshot's data).
    pub(crate) fn encode(&self) -> Vec<u8> {
        self.encode_as(IMAGE_VERSION)
    }

    /// Encodes the image in version 10's layout (without features), from which the
    /// tests of older versions cut what those lacked.
    #[cfg(test)]
    pub(crate) fn encode_v10(&self) -> Vec<u8> {
        self.encode_as(10)
    }

    /// Encodes the image in version 11's layout (without the partitions' offline
    /// replicas).
    #[cfg(test)]
    pub(crate) fn encode_v11(&self) -> Vec<u8> {
        self.encode_as(11)
    }

    /// Encodes the image at `version`: [`IMAGE_VERSION`], or 10 or 11 in tests.
    fn encode_as(&self, version: u16) -> Vec<u8> {
        let mut w = Writer::new();
        w.u16(version);
        w.u64(self.index);
        put_opt_str(&mut w, self.cluster_id.as_deref());
        w.i64(self.next_producer_id);
        w.u32(self.brokers.len() as u32);
        for b in self.brokers.values() {
            put_broker(&mut w, b, version);
        }
        w.u32(self.topics.len() as u32);
        for t in self.topics.values() {
            put_topic(&mut w, t, version);
        }
        let credentials: Vec<_> = self
            .users
            .iter()
            .flat_map(|(u, creds)| creds.values().map(move |c| (u, c)))
            .collect();
        w.u32(credentials.len() as u32);
        for (user, c) in credentials {
            credentials::put_credential(&mut w, user, c);
        }
        w.u32(self.acls.len() as u32);
        for b in self.acls.iter() {
            acl::put_binding(&mut w, b);
        }
        w.u32(self.proposals.len() as u32);
        for ((node, incarnation), p) in &self.proposals {
            put_proposer(&mut w, *node, *incarnation, p);
        }
        w.u32(self.directories.len() as u32);
        for (node, id) in &self.directories {
            w.i32(*node);
            w.str(id);
        }
        quota::put_quotas(&mut w, &self.client_quotas.0);
        group_configs::put_configs(&mut w, &self.group_configs);
        super::broker_configs::put_configs(&mut w, &self.broker_configs);
        if version >= 11 {
            let levels: Vec<(String, i16)> = self
                .features
                .iter()
                .map(|(name, level)| (name.clone(), *level))
                .collect();
            put_levels(&mut w, &levels);
        }
        w.into_bytes()
    }

    /// Decodes an image written by [`MetadataImage::encode`].
    pub(crate) fn decode(bytes: &[u8], location: &str) -> Result<MetadataImage> {
        let mut r = Reader::new(bytes, location);
        let version = r.u16()?;
        if !(1..=IMAGE_VERSION).contains(&version) {
            return Err(r.error(format!(
                "metadata image version {version}; this node reads versions 1 to {IMAGE_VERSION}"
            )));
        }
        let index = r.u64()?;
        let cluster_id = get_opt_str(&mut r)?;
        let next_producer_id = r.i64()?;
        let mut brokers = BTreeMap::new();
        for _ in 0..r.count(26)? {
            let b = get_broker(&mut r, version)?;
            brokers.insert(b.id, b);
        }
        let mut topics = BTreeMap::new();
        for _ in 0..r.count(29)? {
            let t = get_topic(&mut r, version)?;
            topics.insert(t.name.clone(), Arc::new(t));
        }
        let (users, acls) = if version >= 2 {
            get_security(&mut r)?
        } else {
            (Users::new(), BTreeSet::new())
        };
        let mut proposals = BTreeMap::new();
        if version >= 4 {
            for _ in 0..r.count(32)? {
                let (key, p) = get_proposer(&mut r)?;
                proposals.insert(key, p);
            }
        }
        let mut directories = BTreeMap::new();
        if version >= 5 {
            for _ in 0..r.count(8)? {
                let node = r.i32()?;
                directories.insert(node, r.str()?);
            }
        }
        let client_quotas = if version >= 7 {
            quota::get_quotas(&mut r)?
        } else {
            Default::default()
        };
        let group_configs = if version >= 9 {
            group_configs::get_configs(&mut r)?
        } else {
            Default::default()
        };
        let broker_configs = if version >= 10 {
            super::broker_configs::get_configs(&mut r)?
        } else {
            BrokerConfigs::default()
        };
        let features = if version >= 11 {
            get_levels(&mut r)?.into_iter().collect()
        } else {
            BTreeMap::new()
        };
        r.finish()?;
        Ok(MetadataImage {
            index,
            cluster_id,
            brokers,
            topics,
            next_producer_id,
            users: Arc::new(users),
            acls: Arc::new(acls),
            proposals,
            directories,
            client_quotas: QuotaTable(Arc::new(client_quotas)),
            group_configs: Arc::new(group_configs),
            broker_configs,
            features,
        })
    }
}

/// One proposing process: node id (`i32`), incarnation (`u64`), index of its first
/// applied proposal (`u64`), latest issue time (`u64`), then a count (`u32`) of applied
/// request ids, each with its expiry (`u64`, `u64`).
fn put_proposer(w: &mut Writer, node: i32, incarnation: u64, p: &ProposerWindow) {
    w.i32(node);
    w.u64(incarnation);
    w.u64(p.first_index);
    w.u64(p.latest_issued_ms);
    w.u32(p.applied.len() as u32);
    for (id, expires) in &p.applied {
        w.u64(*id);
        w.u64(*expires);
    }
}

/// Reads what [`put_proposer`] wrote.
fn get_proposer(r: &mut Reader<'_>) -> Result<((i32, u64), ProposerWindow)> {
    let node = r.i32()?;
    let incarnation = r.u64()?;
    let first_index = r.u64()?;
    let latest_issued_ms = r.u64()?;
    let mut applied = BTreeMap::new();
    for _ in 0..r.count(16)? {
        let id = r.u64()?;
        applied.insert(id, r.u64()?);
    }
    Ok((
        (node, incarnation),
        ProposerWindow {
            first_index,
            latest_issued_ms,
            applied,
        },
    ))
}

/// A registration: id, epoch, incarnation, listener, fenced, shut down, replication
/// listener (version 2), endpoints (version 3), rack (version 8), supported features
/// (version 11).
fn put_broker(w: &mut Writer, b: &BrokerRegistration, version: u16) {
    w.i32(b.id);
    w.i64(b.epoch);
    w.u64(b.incarnation);
    w.str(&b.listener);
    w.bool(b.fenced);
    w.bool(b.shut_down);
    put_opt_str(w, b.replication_listener.as_deref());
    put_endpoints(w, &b.endpoints);
    put_opt_str(w, b.rack.as_deref());
    if version >= 11 {
        put_supported_features(w, &b.features);
    }
}

/// Reads what [`put_broker`] wrote in image `version`.
fn get_broker(r: &mut Reader<'_>, version: u16) -> Result<BrokerRegistration> {
    let mut b = BrokerRegistration {
        id: r.i32()?,
        epoch: r.i64()?,
        incarnation: r.u64()?,
        listener: r.str()?,
        replication_listener: None,
        endpoints: Vec::new(),
        rack: None,
        features: Vec::new(),
        fenced: r.bool()?,
        shut_down: r.bool()?,
    };
    if version >= 2 {
        b.replication_listener = get_opt_str(r)?;
    }
    if version >= 3 {
        b.endpoints = get_endpoints(r)?;
    }
    if version >= 8 {
        b.rack = get_opt_str(r)?;
    }
    if version >= 11 {
        b.features = get_supported_features(r)?;
    }
    Ok(b)
}

/// A topic: name, id, internal, config overrides, then a count (`u32`) of partitions,
/// each: replicas, ISR, leader, leader epoch, partition epoch, adding and removing
/// replicas (image version 6), offline replicas (image version 12).
fn put_topic(w: &mut Writer, t: &TopicImage, version: u16) {
    w.str(&t.name);
    w.raw(&t.id);
    w.bool(t.internal);
    w.pairs(t.configs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    w.u32(t.partitions.len() as u32);
    for p in &t.partitions {
        w.i32s(&p.replicas);
        w.i32s(&p.isr);
        w.i32(p.leader);
        w.i32(p.leader_epoch);
        w.i32(p.partition_epoch);
        w.i32s(&p.adding_replicas);
        w.i32s(&p.removing_replicas);
        if version >= 12 {
            w.i32s(&p.offline);
        }
    }
}

/// Reads what [`put_topic`] wrote.
fn get_topic(r: &mut Reader<'_>, version: u16) -> Result<TopicImage> {
    let name = r.str()?;
    let id = r.fixed()?;
    let internal = r.bool()?;
    let configs = r.pairs()?.into_iter().collect();
    let n = r.count(20)?;
    let mut partitions = Vec::with_capacity(n);
    for _ in 0..n {
        let mut p = PartitionImage {
            replicas: r.i32s()?,
            isr: r.i32s()?,
            leader: r.i32()?,
            leader_epoch: r.i32()?,
            partition_epoch: r.i32()?,
            adding_replicas: Vec::new(),
            removing_replicas: Vec::new(),
            offline: Vec::new(),
        };
        if version >= 6 {
            p.adding_replicas = r.i32s()?;
            p.removing_replicas = r.i32s()?;
        }
        if version >= 12 {
            p.offline = r.i32s()?;
        }
        partitions.push(p);
    }
    Ok(TopicImage {
        id,
        name,
        internal,
        configs,
        partitions,
    })
}

/// Reads the credentials and the ACL bindings (image version 2 on).
fn get_security(r: &mut Reader<'_>) -> Result<(Users, BTreeSet<AclBinding>)> {
    let mut users = Users::new();
    for _ in 0..r.count(21)? {
        let (user, c) = credentials::get_credential(r)?;
        users.entry(user).or_default().insert(c.mechanism, c);
    }
    let mut acls = BTreeSet::new();
    for _ in 0..r.count(14)? {
        acls.insert(acl::get_binding(r)?);
    }
    Ok((users, acls))
}
