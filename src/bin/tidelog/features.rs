//! `tidelog features describe|upgrade|downgrade --bootstrap ADDRS`: a running cluster's
//! feature levels (KIP-584), as kafka-features shows and changes them.

use std::path::Path;

use clap::{Args, Subcommand};
use tidelog::admin::{FeatureMetadata, FeatureUpgradeType};

use crate::cli::Bootstrap;
use crate::common::admin_client;
use crate::out::Out;
use crate::{CliResult, fail};

/// `tidelog features --bootstrap ADDRS ...`.
#[derive(Debug, Args)]
pub(crate) struct FeaturesArgs {
    #[command(flatten)]
    pub target: Bootstrap,
    #[command(subcommand)]
    pub cmd: FeaturesCmd,
}

/// `tidelog features ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum FeaturesCmd {
    /// Each feature: the levels the answering node supports, the cluster's finalized
    /// level and its epoch.
    Describe,
    /// Raise features to higher levels, all or none (refused, naming the node, while a
    /// node does not support a level).
    Upgrade(Change),
    /// Lower features to lower levels (0 disables a feature), all or none.
    Downgrade {
        #[command(flatten)]
        change: Change,
        /// Downgrade even if metadata could be lost (UNSAFE_DOWNGRADE).
        #[arg(long = "unsafe")]
        unsafe_downgrade: bool,
    },
}

/// The features to change.
#[derive(Debug, Args)]
pub(crate) struct Change {
    /// A feature and its new level, as transaction.version=2; repeatable.
    #[arg(long, value_name = "NAME=LEVEL", required = true)]
    pub feature: Vec<String>,
    /// Only check that the change would be taken.
    #[arg(long)]
    pub dry_run: bool,
}

/// The `(name, level)` of each `NAME=LEVEL`.
fn parse(features: &[String]) -> Result<Vec<(String, i16)>, crate::Fail> {
    features
        .iter()
        .map(|f| {
            let (name, level) = f.split_once('=').ok_or_else(|| {
                fail!("--feature {f:?}: expected NAME=LEVEL, as transaction.version=2")
            })?;
            let level = level
                .trim()
                .parse::<i16>()
                .map_err(|_| fail!("--feature {f:?}: the level {level:?} is not a number"))?;
            Ok((name.trim().to_string(), level))
        })
        .collect()
}

pub(crate) fn run(given: Option<&Path>, args: &FeaturesArgs) -> CliResult {
    let Some(bootstrap) = &args.target.bootstrap else {
        return Err(fail!(
            "tidelog features acts on a running node or cluster: give --bootstrap HOST:PORT"
        ));
    };
    let admin = admin_client(bootstrap, &args.target, given)?;
    let mut out = Out::new();
    let (change, upgrade, verb) = match &args.cmd {
        FeaturesCmd::Describe => {
            describe(&mut out, &admin.describe_features()?)?;
            return out.flush();
        }
        FeaturesCmd::Upgrade(change) => (change, FeatureUpgradeType::Upgrade, "upgraded"),
        FeaturesCmd::Downgrade {
            change,
            unsafe_downgrade,
        } => (
            change,
            if *unsafe_downgrade {
                FeatureUpgradeType::UnsafeDowngrade
            } else {
                FeatureUpgradeType::SafeDowngrade
            },
            "downgraded",
        ),
    };
    let levels = parse(&change.feature)?;
    let updates: Vec<(&str, i16, FeatureUpgradeType)> = levels
        .iter()
        .map(|(name, level)| (name.as_str(), *level, upgrade))
        .collect();
    admin.update_features(&updates, change.dry_run)?;
    for (name, level) in &levels {
        if change.dry_run {
            out.line(format!("{name} can be {verb} to {level}."))?;
        } else {
            out.line(format!("{name} was {verb} to {level}."))?;
        }
    }
    out.flush()
}

/// kafka-features' `describe`: one line per feature the node supports or the cluster
/// finalized.
fn describe(out: &mut Out, f: &FeatureMetadata) -> CliResult {
    let mut names: Vec<&String> = f.supported.keys().chain(f.finalized.keys()).collect();
    names.sort();
    names.dedup();
    for name in names {
        let (min, max) = f
            .supported
            .get(name)
            .map_or(("-".to_string(), "-".to_string()), |(a, b)| {
                (a.to_string(), b.to_string())
            });
        let level = f.finalized.get(name).copied().unwrap_or(0);
        out.line(format!(
            "Feature: {name}\tSupportedMinVersion: {min}\tSupportedMaxVersion: {max}\tFinalizedVersionLevel: {level}\tEpoch: {}",
            f.finalized_epoch
        ))?;
    }
    Ok(())
}
