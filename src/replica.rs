//! The leader's view of one partition's replicas: the in-sync replica set (ISR), each
//! follower's log end offset and when it last caught up, and the high-watermark rule.
//!
//! Pure logic: no threads, no clock, no I/O. Every method takes the leader's log end and
//! an explicit `now`, so `tests` (and the model test below) drive it with any
//! interleaving of follower fetches and clock moves. The cluster's replica manager keeps
//! one [`LeaderState`] per partition this node leads (inside the [`Partition`]'s role),
//! feeds it every replica fetch, moves the log's high watermark to what it computes, and
//! proposes the ISR changes it asks for.
//!
//! The rules (Kafka's `Partition` and `Replica`):
//! - A follower's log end offset is the fetch offset of its latest fetch.
//! - It *caught up* at the time of a fetch whose offset reached the leader's log end at
//!   that fetch, or at the time of the previous fetch if this one reached the leader's
//!   log end as it was then (`lastCaughtUpTime`).
//! - **High watermark** = the smallest log end offset over the *maximal* ISR (the
//!   committed ISR plus every addition a proposal not settled may still commit; a
//!   pending removal still counts), the leader
//!   included; unknown while a member has not fetched since this leadership began. It
//!   never moves backwards.
//! - **Shrink**: a follower in the ISR whose log end is not the leader's and that has
//!   not caught up for `replica.lag.time.max.ms` leaves it.
//! - **Expand**: a replica outside the ISR whose log end is at least the high watermark
//!   and at least the start offset of the leader's current epoch joins it.
//! - One ISR change is in flight at a time; the committed ISR changes only when the
//!   metadata log says so ([`LeaderState::update`]).
//! - Proposals are tracked by id. A refused one is forgotten; one that timed out locally
//!   may still be committed later (its record can sit in the metadata log), so it keeps
//!   counting in the maximal ISR until a committed change of the partition fences it (a
//!   newer partition epoch) or the leadership ends. Another change may be proposed
//!   meanwhile.
//!
//! [`Partition`]: crate::Partition

// Only a cluster node (feature `server`) has leaders and followers.
#![cfg_attr(not(feature = "server"), allow(dead_code))]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// What the leader knows of one follower.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FollowerState {
    /// Its log end offset (its latest fetch offset); -1 until it fetches.
    pub log_end: i64,
    /// When it last caught up with the leader.
    pub last_caught_up: Instant,
    /// The leader's log end when it last fetched (-1 before).
    last_fetch_leader_end: i64,
    /// When it last fetched.
    last_fetch: Instant,
    /// The high watermark last sent to it (a fetch answers at once when it moved past).
    pub last_sent_high_watermark: i64,
}

impl FollowerState {
    fn new(now: Instant) -> FollowerState {
        FollowerState {
            log_end: -1,
            last_caught_up: now,
            last_fetch_leader_end: -1,
            last_fetch: now,
            last_sent_high_watermark: -1,
        }
    }
}

/// A replica fetch from a broker that is not a replica of the partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NotAReplica(pub i32);

/// An ISR change this leader proposed that the metadata log has not settled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IsrProposal {
    /// This leadership's id of the proposal.
    pub id: u64,
    /// The partition epoch it was computed from (the controller applies it only at
    /// that epoch).
    pub partition_epoch: i32,
    /// The proposed ISR.
    pub isr: Vec<i32>,
    /// It timed out locally: no answer is awaited, but it may still be committed.
    pub timed_out: bool,
}

/// How a proposed ISR change ended without being seen applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IsrProposalEnd {
    /// The controller refused it, or it was never proposed: it can never be applied.
    Refused,
    /// No answer in time: it may still be committed.
    TimedOut,
}

/// The leader's replica state of one partition. See the module documentation.
#[derive(Debug, Clone)]
pub(crate) struct LeaderState {
    /// This node (the leader).
    pub node_id: i32,
    /// The leader epoch this state belongs to.
    pub leader_epoch: i32,
    /// The partition epoch of the committed ISR (an ISR change is computed from it).
    pub partition_epoch: i32,
    /// Every replica, in assignment order.
    pub replicas: Vec<i32>,
    /// The committed ISR (from the metadata log).
    pub isr: Vec<i32>,
    /// The ISR changes proposed and not settled by the metadata log, oldest first: at
    /// most one awaiting an answer, the others timed out but still able to commit.
    pub proposals: Vec<IsrProposal>,
    /// The id of the next proposal.
    next_proposal: u64,
    /// The leader's log end when it became leader of this epoch: where its epoch
    /// starts.
    pub epoch_start_offset: i64,
    /// The high watermark computed so far (never decreases).
    pub high_watermark: i64,
    /// `replica.lag.time.max.ms`.
    pub lag_max: Duration,
    followers: BTreeMap<i32, FollowerState>,
}

impl LeaderState {
    /// The state of a new leadership: every follower unknown, and (as Kafka does) caught
    /// up "now", so that none leaves the ISR before it had `lag_max` to fetch.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        node_id: i32,
        leader_epoch: i32,
        partition_epoch: i32,
        replicas: Vec<i32>,
        isr: Vec<i32>,
        epoch_start_offset: i64,
        high_watermark: i64,
        lag_max: Duration,
        now: Instant,
    ) -> LeaderState {
        let followers = replicas
            .iter()
            .filter(|r| **r != node_id)
            .map(|r| (*r, FollowerState::new(now)))
            .collect();
        LeaderState {
            node_id,
            leader_epoch,
            partition_epoch,
            replicas,
            isr,
            proposals: Vec::new(),
            next_proposal: 0,
            epoch_start_offset,
            high_watermark,
            lag_max,
            followers,
        }
    }

    /// The metadata log committed a new ISR (or replica set) for the same leader epoch:
    /// the proposals made from an older partition epoch can no longer be applied and
    /// are settled; follower states are kept.
    pub(crate) fn update(
        &mut self,
        partition_epoch: i32,
        replicas: Vec<i32>,
        isr: Vec<i32>,
        now: Instant,
    ) {
        self.partition_epoch = partition_epoch;
        self.isr = isr;
        self.proposals
            .retain(|p| p.partition_epoch == partition_epoch);
        for r in &replicas {
            if *r != self.node_id {
                self.followers
                    .entry(*r)
                    .or_insert_with(|| FollowerState::new(now));
            }
        }
        self.followers.retain(|id, _| replicas.contains(id));
        self.replicas = replicas;
    }

    /// Proposal `id` ended without being seen applied: a new change may be proposed. A
    /// refused one is forgotten; one that timed out still counts in the maximal ISR
    /// until a committed change fences it. Only that proposal is touched, never a newer
    /// one.
    pub(crate) fn proposal_ended(&mut self, id: u64, end: IsrProposalEnd) {
        match end {
            IsrProposalEnd::Refused => self.proposals.retain(|p| p.id != id),
            IsrProposalEnd::TimedOut => {
                if let Some(p) = self.proposals.iter_mut().find(|p| p.id == id) {
                    p.timed_out = true;
                }
            }
        }
    }

    /// True while a proposal awaits its answer (no other may be made).
    pub(crate) fn awaiting_answer(&self) -> bool {
        self.proposals.iter().any(|p| !p.timed_out)
    }

    /// The committed ISR plus every addition a proposal not settled may still commit:
    /// the members the high watermark waits for.
    pub(crate) fn maximal_isr(&self) -> Vec<i32> {
        let mut m = self.isr.clone();
        for p in &self.proposals {
            for r in &p.isr {
                if !m.contains(r) {
                    m.push(*r);
                }
            }
        }
        m
    }

    /// A follower's state, if it is a replica.
    pub(crate) fn follower(&self, id: i32) -> Option<&FollowerState> {
        self.followers.get(&id)
    }

    /// Records a fetch from `follower` at `fetch_offset` (its log end) while the leader's
    /// log end is `leader_end`, and recomputes the high watermark. Returns the new high
    /// watermark if it moved.
    pub(crate) fn on_fetch(
        &mut self,
        follower: i32,
        fetch_offset: i64,
        leader_end: i64,
        now: Instant,
    ) -> Result<Option<i64>, NotAReplica> {
        let f = self
            .followers
            .get_mut(&follower)
            .ok_or(NotAReplica(follower))?;
        if fetch_offset >= leader_end {
            f.last_caught_up = f.last_caught_up.max(now);
        } else if fetch_offset >= f.last_fetch_leader_end {
            f.last_caught_up = f.last_caught_up.max(f.last_fetch);
        }
        f.log_end = fetch_offset;
        f.last_fetch_leader_end = leader_end;
        f.last_fetch = now;
        Ok(self.advance(leader_end))
    }

    /// Notes the high watermark a fetch response told `follower`.
    pub(crate) fn sent_high_watermark(&mut self, follower: i32, hw: i64) {
        if let Some(f) = self.followers.get_mut(&follower) {
            f.last_sent_high_watermark = hw;
        }
    }

    /// The high watermark the maximal ISR allows now, if every member's log end is
    /// known: the smallest one (the leader's is `leader_end`).
    pub(crate) fn candidate(&self, leader_end: i64) -> Option<i64> {
        let mut hw = leader_end;
        for r in self.maximal_isr() {
            if r == self.node_id {
                continue;
            }
            let end = self.followers.get(&r).map_or(-1, |f| f.log_end);
            if end < 0 {
                return None;
            }
            hw = hw.min(end);
        }
        Some(hw)
    }

    /// Moves the high watermark forward to the candidate, if that is higher. Returns the
    /// new high watermark if it moved.
    pub(crate) fn advance(&mut self, leader_end: i64) -> Option<i64> {
        let c = self.candidate(leader_end)?;
        if c > self.high_watermark {
            self.high_watermark = c;
            Some(c)
        } else {
            None
        }
    }

    /// True if `follower` (an ISR member) is caught up at `now`: its log end is the
    /// leader's, or it caught up within `lag_max`.
    fn is_caught_up(&self, f: &FollowerState, leader_end: i64, now: Instant) -> bool {
        f.log_end == leader_end || now.saturating_duration_since(f.last_caught_up) <= self.lag_max
    }

    /// True if `follower` (outside the ISR) may join it: its log end reached the high
    /// watermark and the start of the leader's epoch.
    fn may_join(&self, f: &FollowerState) -> bool {
        f.log_end >= 0 && f.log_end >= self.high_watermark && f.log_end >= self.epoch_start_offset
    }

    /// The ISR change the rules ask for at `now`, if any and none is in flight: the
    /// committed ISR less the members that fell behind, plus the replicas that caught
    /// up and are `eligible` (the controller refuses a fenced broker). The caller
    /// proposes it and marks it pending ([`LeaderState::propose`]).
    pub(crate) fn isr_change(
        &self,
        leader_end: i64,
        now: Instant,
        eligible: impl Fn(i32) -> bool,
    ) -> Option<Vec<i32>> {
        if self.awaiting_answer() {
            return None;
        }
        let mut next: Vec<i32> = Vec::with_capacity(self.replicas.len());
        for r in &self.replicas {
            let keep = if *r == self.node_id {
                true
            } else {
                match self.followers.get(r) {
                    None => false,
                    Some(f) if self.isr.contains(r) => self.is_caught_up(f, leader_end, now),
                    Some(f) => self.may_join(f) && eligible(*r),
                }
            };
            if keep {
                next.push(*r);
            }
        }
        let same = next.len() == self.isr.len() && next.iter().all(|r| self.isr.contains(r));
        (!same).then_some(next)
    }

    /// Forgets what is known of `follower` (its broker was fenced or restarted: its log
    /// may not be what it last reported); it counts again from its next fetch.
    pub(crate) fn reset_follower(&mut self, follower: i32, now: Instant) {
        if let Some(f) = self.followers.get_mut(&follower) {
            *f = FollowerState::new(now);
        }
    }

    /// Marks `isr` as proposed (from the current partition epoch); returns its id.
    pub(crate) fn propose(&mut self, isr: Vec<i32>) -> u64 {
        let id = self.next_proposal;
        self.next_proposal += 1;
        self.proposals.push(IsrProposal {
            id,
            partition_epoch: self.partition_epoch,
            isr,
            timed_out: false,
        });
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const LAG: Duration = Duration::from_millis(1000);

    fn leader(now: Instant) -> LeaderState {
        LeaderState::new(1, 5, 7, vec![1, 2, 3], vec![1, 2, 3], 10, 10, LAG, now)
    }

    #[test]
    fn the_high_watermark_waits_for_every_isr_member() {
        let t0 = Instant::now();
        let mut s = leader(t0);
        assert_eq!(s.on_fetch(2, 15, 20, t0), Ok(None), "3 has not fetched");
        assert_eq!(s.on_fetch(3, 12, 20, t0), Ok(Some(12)));
        assert_eq!(s.on_fetch(3, 20, 20, t0), Ok(Some(15)));
        assert_eq!(s.on_fetch(2, 20, 20, t0), Ok(Some(20)));
        assert_eq!(s.on_fetch(4, 20, 20, t0), Err(NotAReplica(4)));
    }

    #[test]
    fn a_lagging_follower_leaves_after_the_lag_time_and_rejoins_when_caught_up() {
        let t0 = Instant::now();
        let mut s = leader(t0);
        s.on_fetch(2, 20, 20, t0).unwrap();
        s.on_fetch(3, 20, 20, t0).unwrap();
        // The leader appends; 3 stops fetching.
        let t1 = t0 + LAG / 2;
        s.on_fetch(2, 30, 30, t1).unwrap();
        assert_eq!(s.isr_change(30, t1, |_| true), None);
        let t2 = t0 + LAG + Duration::from_millis(1);
        assert_eq!(s.isr_change(30, t2, |_| true), Some(vec![1, 2]));
        s.propose(vec![1, 2]);
        assert_eq!(s.isr_change(30, t2, |_| true), None, "one change in flight");
        // While the shrink is pending the high watermark still waits for 3.
        assert_eq!(s.candidate(30), Some(20));
        s.update(8, vec![1, 2, 3], vec![1, 2], t2);
        assert_eq!(s.advance(30), Some(30));
        // 3 comes back below the high watermark: not yet.
        s.on_fetch(3, 25, 30, t2).unwrap();
        assert_eq!(s.isr_change(30, t2, |_| true), None);
        s.on_fetch(3, 30, 30, t2).unwrap();
        assert_eq!(s.isr_change(30, t2, |_| true), Some(vec![1, 2, 3]));
        s.propose(vec![1, 2, 3]);
        // A pending addition counts for the high watermark at once.
        assert_eq!(s.candidate(40), Some(30));
    }

    #[test]
    fn a_timed_out_expansion_that_commits_late_admits_no_member_below_the_high_watermark() {
        let t0 = Instant::now();
        let mut s = LeaderState::new(1, 5, 7, vec![1, 2, 3], vec![1, 2], 10, 10, LAG, t0);
        s.on_fetch(2, 10, 10, t0).unwrap();
        s.on_fetch(3, 10, 10, t0).unwrap();
        let expand = s.isr_change(10, t0, |_| true).unwrap();
        assert_eq!(expand, vec![1, 2, 3]);
        let id = s.propose(expand.clone());
        // The proposal times out locally; its record may still be in the metadata log.
        s.proposal_ended(id, IsrProposalEnd::TimedOut);
        assert!(!s.awaiting_answer(), "another change may be proposed");
        // A newer proposal is not settled by the end of an older one.
        let newer = s.propose(expand.clone());
        s.proposal_ended(id, IsrProposalEnd::Refused);
        assert!(s.awaiting_answer());
        s.proposal_ended(newer, IsrProposalEnd::TimedOut);
        // The leader appends; 2 follows, 3 does not.
        s.on_fetch(2, 20, 20, t0).unwrap();
        s.advance(20);
        // The timed-out record commits after all.
        s.update(8, vec![1, 2, 3], expand, t0);
        let end3 = s.follower(3).unwrap().log_end;
        assert!(
            end3 >= s.high_watermark,
            "ISR member 3 at {end3} is below the high watermark {}",
            s.high_watermark
        );
    }

    #[test]
    fn a_follower_behind_the_epoch_start_does_not_join() {
        let t0 = Instant::now();
        let mut s = LeaderState::new(1, 5, 7, vec![1, 2, 3], vec![1, 2], 50, 40, LAG, t0);
        assert_eq!(s.on_fetch(2, 45, 60, t0), Ok(Some(45)));
        s.on_fetch(3, 47, 60, t0).unwrap();
        assert_eq!(
            s.isr_change(60, t0, |_| true),
            None,
            "47 >= hw 45 but < epoch start 50"
        );
        s.on_fetch(3, 50, 60, t0).unwrap();
        assert_eq!(s.isr_change(60, t0, |_| true), Some(vec![1, 2, 3]));
    }

    /// One step of the model: a follower fetches, the leader appends, or time passes;
    /// sometimes the metadata log commits a proposed ISR change (the awaited one or one
    /// that timed out), refuses the awaited one, or it times out.
    #[derive(Debug, Clone)]
    enum Step {
        Fetch {
            follower: usize,
            ahead: i64,
        },
        Append(i64),
        Tick(u64),
        /// The metadata log commits the proposal at this index (modulo their number)
        /// among those still able to commit: late, if it timed out.
        Commit(usize),
        Reject,
        /// The awaited proposal times out locally.
        TimeOut,
        /// The controller fences (false) or unfences (true) broker 4; fencing resets
        /// what the leader knows of it.
        Eligible4(bool),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            4 => (0usize..3, 0i64..40).prop_map(|(follower, ahead)| Step::Fetch { follower, ahead }),
            3 => (1i64..20).prop_map(Step::Append),
            2 => (0u64..800).prop_map(Step::Tick),
            1 => (0usize..4).prop_map(Step::Commit),
            1 => Just(Step::Reject),
            1 => Just(Step::TimeOut),
            1 => proptest::bool::ANY.prop_map(Step::Eligible4),
        ]
    }

    proptest! {
        /// Random fetches (follower log ends only grow and never pass the leader's),
        /// appends, clock moves and ISR commits: after every step the high watermark
        /// never went backwards, is at most every maximal-ISR member's log end, and the
        /// proposed ISR changes are exactly the rules'.
        #[test]
        fn high_watermark_and_isr_rules_hold(steps in proptest::collection::vec(step(), 1..120)) {
            let t0 = Instant::now();
            let mut now = t0;
            let followers = [2, 3, 4];
            // The leader's epoch starts at 30 (its log end when it took over); the
            // followers had reached 10, the high watermark it inherited; 4 is out of
            // sync.
            let mut s = LeaderState::new(1, 3, 0, vec![1, 2, 3, 4], vec![1, 2, 3], 30, 10, LAG, t0);
            let mut leader_end = 30i64;
            let mut ends = [10i64; 3];
            // The model's own record of each follower: log end, last caught up, leader
            // end and time at its previous fetch.
            let mut caught = [t0; 3];
            let mut prev: [(i64, Instant); 3] = [(-1, t0); 3];
            let mut fetched = [false; 3];
            let mut last_hw = 10i64;
            let mut eligible4 = true;
            for st in steps {
                match st {
                    Step::Fetch { follower, ahead } => {
                        let off = (ends[follower] + ahead).min(leader_end);
                        ends[follower] = off;
                        fetched[follower] = true;
                        if off >= leader_end {
                            caught[follower] = caught[follower].max(now);
                        } else if off >= prev[follower].0 {
                            caught[follower] = caught[follower].max(prev[follower].1);
                        }
                        prev[follower] = (leader_end, now);
                        s.on_fetch(followers[follower], off, leader_end, now).unwrap();
                    }
                    Step::Append(n) => {
                        leader_end += n;
                        s.advance(leader_end);
                    }
                    Step::Tick(ms) => now += Duration::from_millis(ms),
                    Step::Commit(i) => {
                        // The controller applies a proposal only at its partition epoch.
                        let live: Vec<IsrProposal> = s
                            .proposals
                            .iter()
                            .filter(|p| p.partition_epoch == s.partition_epoch)
                            .cloned()
                            .collect();
                        if !live.is_empty() {
                            let p = live[i % live.len()].clone();
                            let epoch = s.partition_epoch + 1;
                            s.update(epoch, vec![1, 2, 3, 4], p.isr, now);
                            prop_assert!(s.proposals.is_empty(), "every other proposal is fenced");
                            s.advance(leader_end);
                        }
                    }
                    Step::Reject | Step::TimeOut => {
                        let awaited = s.proposals.iter().find(|p| !p.timed_out).map(|p| p.id);
                        if let Some(id) = awaited {
                            let end = if matches!(st, Step::Reject) {
                                IsrProposalEnd::Refused
                            } else {
                                IsrProposalEnd::TimedOut
                            };
                            s.proposal_ended(id, end);
                            s.advance(leader_end);
                        }
                    }
                    Step::Eligible4(e) => {
                        eligible4 = e;
                        if !e {
                            s.reset_follower(4, now);
                            fetched[2] = false;
                            caught[2] = now;
                            prev[2] = (-1, now);
                        }
                    }
                }
                // High watermark: never backwards, never above a maximal-ISR member's
                // log end, and equal to the minimum once every member fetched.
                prop_assert!(s.high_watermark >= last_hw);
                let before = last_hw;
                last_hw = s.high_watermark;
                let maximal = s.maximal_isr();
                prop_assert!(maximal.contains(&1));
                prop_assert!(s.high_watermark <= leader_end);
                let mut min = leader_end;
                let mut all_known = true;
                for (i, f) in followers.iter().enumerate() {
                    if maximal.contains(f) {
                        if fetched[i] {
                            prop_assert!(s.high_watermark <= ends[i], "hw {} above {}'s log end {}", s.high_watermark, f, ends[i]);
                            min = min.min(ends[i]);
                        } else {
                            all_known = false;
                        }
                    }
                }
                if all_known {
                    prop_assert_eq!(s.high_watermark, min.max(before));
                }
                // ISR change: exactly the rules.
                let expected = if s.awaiting_answer() {
                    None
                } else {
                    let mut next = vec![1];
                    for (i, f) in followers.iter().enumerate() {
                        let in_isr = s.isr.contains(f);
                        let keep = if in_isr {
                            (fetched[i] && ends[i] == leader_end)
                                || now.duration_since(caught[i]) <= LAG
                        } else {
                            fetched[i]
                                && ends[i] >= s.high_watermark
                                && ends[i] >= s.epoch_start_offset
                                && (*f != 4 || eligible4)
                        };
                        if keep {
                            next.push(*f);
                        }
                    }
                    let same = next.len() == s.isr.len() && next.iter().all(|r| s.isr.contains(r));
                    (!same).then_some(next)
                };
                let got = s.isr_change(leader_end, now, |r| r != 4 || eligible4);
                prop_assert_eq!(&got, &expected);
                if let Some(isr) = got {
                    s.propose(isr);
                }
            }
        }
    }
}
