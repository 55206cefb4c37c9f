//! What the kernel's memory management did during a `tidelog perf` run, from
//! `/proc/vmstat`: the figures that tell a run slowed by the machine from a slow build.
//!
//! A throughput run writes about a gigabyte of page cache. When free memory is short the
//! kernel finds pages for it on the writing thread itself: it reclaims page cache
//! synchronously (direct reclaim) and defragments memory to assemble larger pages
//! (direct compaction), and those stalls land inside the measured time. The same binary
//! then runs at a fraction of its rate, so a `perf pubsub --json` run carries the
//! machine-wide counts of them, taken before and after its throughput run.

/// Counters of `/proc/vmstat` (machine-wide, since boot), or their change over a run.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MachineCounters {
    /// Allocations that stalled to compact memory (`compact_stall`).
    pub(crate) compact_stalls: u64,
    /// Allocations that stalled to reclaim memory themselves (the `allocstall_*`
    /// counters of every zone, summed).
    pub(crate) direct_reclaims: u64,
    /// Pages reclaimed, by kswapd and by stalled allocations (the `pgsteal_*` counters
    /// by reclaimer, summed).
    pub(crate) reclaimed_pages: u64,
}

impl MachineCounters {
    /// The counters now; `None` where `/proc/vmstat` cannot be read (not Linux).
    pub(crate) fn read() -> Option<MachineCounters> {
        std::fs::read_to_string("/proc/vmstat")
            .ok()
            .map(|text| MachineCounters::parse(&text))
    }

    /// The counters of a `/proc/vmstat` text (`name value` lines); a counter this
    /// kernel does not have counts 0, a line that does not parse is skipped.
    fn parse(text: &str) -> MachineCounters {
        let mut c = MachineCounters::default();
        for line in text.lines() {
            let Some((name, value)) = line.split_once(' ') else {
                continue;
            };
            let Ok(value) = value.trim().parse::<u64>() else {
                continue;
            };
            match name {
                "compact_stall" => c.compact_stalls += value,
                // `pgsteal_anon` and `pgsteal_file` split the same pages by kind.
                "pgsteal_anon" | "pgsteal_file" => {}
                _ if name.starts_with("allocstall_") => c.direct_reclaims += value,
                _ if name.starts_with("pgsteal_") => c.reclaimed_pages += value,
                _ => {}
            }
        }
        c
    }

    /// What changed from `before` to `self` (0 where a counter went back).
    pub(crate) fn since(self, before: MachineCounters) -> MachineCounters {
        MachineCounters {
            compact_stalls: self.compact_stalls.saturating_sub(before.compact_stalls),
            direct_reclaims: self.direct_reclaims.saturating_sub(before.direct_reclaims),
            reclaimed_pages: self.reclaimed_pages.saturating_sub(before.reclaimed_pages),
        }
    }

    /// The change over a run as report fields (`machine_*`).
    pub(crate) fn fields(self) -> [(&'static str, String); 3] {
        [
            ("machine_compact_stalls", self.compact_stalls.to_string()),
            ("machine_direct_reclaims", self.direct_reclaims.to_string()),
            ("machine_reclaimed_pages", self.reclaimed_pages.to_string()),
        ]
    }
}

/// Runs `run`, returning its result and the change of the counters over it (`None`
/// where they cannot be read).
pub(crate) fn measured<T>(run: impl FnOnce() -> T) -> (T, Option<MachineCounters>) {
    let before = MachineCounters::read();
    let out = run();
    let change = before.zip(MachineCounters::read()).map(|(b, a)| a.since(b));
    (out, change)
}

#[cfg(test)]
mod tests {
    use super::*;

    const VMSTAT: &str = "nr_free_pages 1000\n\
        allocstall_dma 0\n\
        allocstall_normal 5\n\
        allocstall_movable 7\n\
        pgsteal_kswapd 100\n\
        pgsteal_direct 20\n\
        pgsteal_anon 3\n\
        pgsteal_file 117\n\
        compact_stall 4\n\
        compact_fail 2\n\
        broken line\n\
        pgscan_direct 40\n";

    #[test]
    fn vmstat_counters_are_summed_by_kind() {
        assert_eq!(
            MachineCounters::parse(VMSTAT),
            MachineCounters {
                compact_stalls: 4,
                direct_reclaims: 12,
                reclaimed_pages: 120,
            }
        );
        assert_eq!(MachineCounters::parse(""), MachineCounters::default());
    }

    #[test]
    fn a_run_reports_what_changed() {
        let before = MachineCounters::parse(VMSTAT);
        let after = MachineCounters {
            compact_stalls: 6,
            direct_reclaims: 12,
            reclaimed_pages: 1120,
        };
        let change = after.since(before);
        assert_eq!(
            change.fields(),
            [
                ("machine_compact_stalls", "2".to_string()),
                ("machine_direct_reclaims", "0".to_string()),
                ("machine_reclaimed_pages", "1000".to_string()),
            ]
        );
        // A counter that went back (another boot's file) reports 0, not a wrap.
        assert_eq!(before.since(after).reclaimed_pages, 0);
        #[cfg(target_os = "linux")]
        {
            let ((), change) = measured(|| ());
            assert!(change.is_some(), "/proc/vmstat is readable on Linux");
        }
    }
}
