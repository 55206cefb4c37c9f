//! The memory an idle consumer group costs its coordinator stays small: bytes asked of
//! the allocator, counted (deterministic, unlike a process's resident size), per group
//! over many groups. The coordinator of 10,000 groups should hold them in well under
//! 2 KiB each (a Kafka broker's coordinator keeps one `GroupMetadata` per group too).

mod group_memory_support;

use group_memory_support::{Kind, bytes_per_idle_group};
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};
use std::alloc::System;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Groups measured: enough that the group table's share per group is as at scale.
const GROUPS: usize = 3_000;

/// One test only: the counter is global to the process, so nothing else may allocate
/// while it counts.
#[test]
fn an_idle_group_costs_its_coordinator_at_most_a_kilobyte_and_with_a_member_two() {
    let standalone = bytes_per_idle_group(GLOBAL, GROUPS, Kind::Standalone);
    let member = bytes_per_idle_group(GLOBAL, GROUPS, Kind::OneMember);
    eprintln!("bytes per idle group: standalone {standalone:.0}, one member {member:.0}");
    assert!(
        standalone > 0.0 && member > standalone,
        "{standalone} {member}"
    );
    assert!(
        standalone <= 1024.0,
        "a standalone group takes {standalone:.0} bytes"
    );
    assert!(
        member <= 2048.0,
        "a group with one member takes {member:.0} bytes"
    );
}
