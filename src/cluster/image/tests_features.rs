//! Finalized features (KIP-584) as applied to the image: a new cluster's starting
//! levels, refused registrations, `FeatureLevel` records, and the snapshot's bytes.

use super::*;
use crate::cluster::features::{TRANSACTION_VERSION, supported};

/// `transaction.version` supported from 0 to `max` (none registered for 0).
fn tv(max: i16) -> Vec<SupportedFeature> {
    supported()
        .into_iter()
        .map(|f| SupportedFeature { max, ..f })
        .filter(|f| f.max > 0)
        .collect()
}

fn register(img: &mut MetadataImage, id: i32, features: Vec<SupportedFeature>) -> Outcome {
    let at = img.index + 1;
    img.apply(
        at,
        &MetadataRecord::RegisterBroker {
            broker_id: id,
            incarnation: img.index + 1000,
            listener: format!("h:{id}"),
            clean_shutdown_epoch: None,
            replication_listener: None,
            endpoints: vec![],
            rack: None,
            features,
        },
    )
}

fn init(img: &mut MetadataImage, features: Vec<(String, i16)>) -> Outcome {
    let at = img.index + 1;
    img.apply(
        at,
        &MetadataRecord::InitCluster {
            cluster_id: "c".into(),
            features,
        },
    )
}

fn level(img: &mut MetadataImage, level: i16) -> Outcome {
    let at = img.index + 1;
    img.apply(
        at,
        &MetadataRecord::FeatureLevel {
            name: TRANSACTION_VERSION.into(),
            level,
        },
    )
}

fn bootstrap() -> Vec<(String, i16)> {
    vec![(TRANSACTION_VERSION.into(), 2)]
}

#[test]
fn a_new_cluster_starts_at_its_levels_capped_by_the_brokers_registered_before() {
    let mut img = MetadataImage::default();
    init(&mut img, bootstrap()).unwrap();
    assert_eq!(img.finalized_level(TRANSACTION_VERSION), 2);
    // Brokers that registered before the cluster id was set cap the level.
    let mut img = MetadataImage::default();
    register(&mut img, 1, tv(2)).unwrap();
    register(&mut img, 2, tv(1)).unwrap();
    init(&mut img, bootstrap()).unwrap();
    assert_eq!(img.finalized_level(TRANSACTION_VERSION), 1);
    // A broker of a version without features: level 0, not finalized at all.
    let mut img = MetadataImage::default();
    register(&mut img, 1, vec![]).unwrap();
    init(&mut img, bootstrap()).unwrap();
    assert!(img.features.is_empty());
    // An InitCluster of version 0 (a cluster formed before features): level 0, and
    // the same id again changes nothing.
    let mut img = MetadataImage::default();
    init(&mut img, vec![]).unwrap();
    init(&mut img, bootstrap()).unwrap();
    assert_eq!(img.finalized_level(TRANSACTION_VERSION), 0);
}

#[test]
fn a_node_that_does_not_support_a_finalized_level_is_refused_registration() {
    let mut img = MetadataImage::default();
    init(&mut img, bootstrap()).unwrap();
    register(&mut img, 1, tv(2)).unwrap();
    for features in [tv(1), vec![]] {
        let e = register(&mut img, 2, features).unwrap_err();
        assert!(
            matches!(&e, Rejected::UnsupportedFeature { feature, reason }
                if feature == TRANSACTION_VERSION
                    && reason.contains("node 2 is unable to register")
                    && reason.contains("finalized version 2 of transaction.version")),
            "{e:?}"
        );
        assert!(!img.brokers.contains_key(&2));
    }
    // Refused to the proposer as an error naming the feature.
    let e = Error::from(register(&mut img, 2, tv(1)).unwrap_err());
    assert!(e.to_string().contains(TRANSACTION_VERSION), "{e}");
}

#[test]
fn a_feature_level_needs_every_registered_broker_and_level_0_removes_it() {
    let mut img = MetadataImage::default();
    init(&mut img, vec![]).unwrap();
    register(&mut img, 1, tv(2)).unwrap();
    register(&mut img, 2, vec![]).unwrap();
    // Broker 2 registered no features: it blocks any level above 0.
    let e = level(&mut img, 1).unwrap_err();
    assert!(
        matches!(&e, Rejected::UnsupportedFeature { reason, .. }
            if reason.contains("Broker 2 does not support this feature")),
        "{e:?}"
    );
    assert!(img.features.is_empty());
    // Broker 2 restarts on a version that supports level 1 only.
    register(&mut img, 2, tv(1)).unwrap();
    let e = level(&mut img, 2).unwrap_err();
    assert!(format!("{e:?}").contains("Broker 2 only supports versions 0-1"));
    level(&mut img, 1).unwrap();
    assert_eq!(img.finalized_level(TRANSACTION_VERSION), 1);
    // Now it cannot come back supporting none.
    assert!(register(&mut img, 2, vec![]).is_err());
    assert!(level(&mut img, -1).is_err());
    level(&mut img, 0).unwrap();
    assert!(img.features.is_empty());
    register(&mut img, 2, vec![]).unwrap();
}

#[test]
fn the_snapshot_keeps_the_levels_and_what_each_broker_supports() {
    let mut img = MetadataImage::default();
    init(&mut img, bootstrap()).unwrap();
    register(&mut img, 1, tv(2)).unwrap();
    let bytes = img.encode();
    assert_eq!(&bytes[..2], &[0, 12]);
    let back = MetadataImage::decode(&bytes, "snapshot").unwrap();
    assert_eq!(back, img);
    assert_eq!(back.brokers[&1].features, tv(2));
    // Last: one finalized level, "transaction.version" at 2.
    let mut tail = vec![0, 0, 0, 1, 0, 0, 0, TRANSACTION_VERSION.len() as u8];
    tail.extend_from_slice(TRANSACTION_VERSION.as_bytes());
    tail.extend_from_slice(&[0, 2]);
    assert!(bytes.ends_with(&tail), "{bytes:?}");
    // Version 10 had neither: its brokers support level 0 only, nothing is finalized.
    let v10 = MetadataImage::decode(&img.encode_v10(), "v10").unwrap();
    assert!(v10.features.is_empty());
    assert_eq!(v10.brokers[&1].features, vec![]);
    assert_eq!(v10.brokers[&1].listener, "h:1");
}
