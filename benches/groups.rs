//! The memory of idle consumer groups in the group coordinator: bytes asked of the
//! allocator (counted by `stats_alloc`, so the figure does not depend on the machine or
//! its load), per group, for standalone groups (committed offsets only) and for groups
//! with one classic member, at several group counts (the group table's share per
//! group depends on how full it is).
//!
//! Run with `cargo bench --bench groups`.

#[path = "../tests/group_memory_support/mod.rs"]
mod support;

use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};
use std::alloc::System;
use support::{Kind, bytes_per_idle_group};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn main() {
    // `cargo test --benches` runs this with `--bench` absent: a quick pass then.
    let full = std::env::args().any(|a| a == "--bench");
    let counts: &[usize] = if full {
        &[1_000, 10_000, 100_000]
    } else {
        &[1_000]
    };
    println!("groups\tstandalone bytes/group\tone member bytes/group");
    for &n in counts {
        let standalone = bytes_per_idle_group(GLOBAL, n, Kind::Standalone);
        let member = bytes_per_idle_group(GLOBAL, n, Kind::OneMember);
        println!("{n}\t{standalone:.0}\t{member:.0}");
    }
}
