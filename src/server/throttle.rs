//! Client quotas on the wire: before a request is handled its client's usage is
//! recorded (a produce's size; a fetch's and any request's past usage) and the throttle
//! time computed; the handler writes it in the response's `throttle_time_ms` (Produce,
//! Fetch); after it, a fetch's response size and the request's time are recorded, and
//! the response is held for the throttle time. The connection's thread holds it, so the
//! channel is muted meanwhile: nothing more is read from the client, which is never
//! disconnected for its quota (Kafka's behaviour before KIP-219, which its clients of
//! every version accept). A follower's fetch is not a client's: it is never throttled.

use std::cell::Cell;
use std::time::{Duration, Instant};

use kafka_protocol::messages::ApiKey;

use super::api::{Ctx, Reply, Request};
use crate::security::quota::QuotaKind;

thread_local! {
    /// The throttle time of the request this thread handles, in ms.
    static THROTTLE_MS: Cell<i32> = const { Cell::new(0) };
    /// Set by the Fetch handler when the request is a follower's.
    static FOLLOWER: Cell<bool> = const { Cell::new(false) };
    /// This thread's CPU time when the request's handling began.
    static CPU_START: Cell<Option<Duration>> = const { Cell::new(None) };
}

/// CPU time of the calling thread: a request's time is the time its handling used, as
/// Kafka's request quota counts its handler threads' time, not a long poll's wait.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn thread_cpu() -> Option<Duration> {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Some(Duration::new(
        u64::try_from(t.tv_sec).ok()?,
        u32::try_from(t.tv_nsec).ok()?,
    ))
}

/// Elsewhere the request's time is its wall time (waits included).
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn thread_cpu() -> Option<Duration> {
    None
}

/// The throttle time, in ms, for the `throttle_time_ms` of the response being built.
pub(crate) fn current_ms() -> i32 {
    THROTTLE_MS.with(Cell::get)
}

/// Marks the request being handled as a follower's fetch (not throttled).
pub(crate) fn follower() {
    FOLLOWER.with(|f| f.set(true));
}

/// Longest step of a held response, so a stopping server or a client that left is
/// noticed.
const HOLD_STEP: Duration = Duration::from_millis(100);

/// The quota user of a principal (`User:alice` is `alice`, as Kafka's sanitized user).
fn user(principal: &str) -> &str {
    principal.strip_prefix("User:").unwrap_or(principal)
}

/// Records what `req` costs before it is handled and sets the throttle time its
/// response carries.
pub(crate) fn before(ctx: &Ctx<'_>, req: &Request) {
    FOLLOWER.with(|f| f.set(false));
    let quotas = &ctx.security().quotas;
    if !quotas.active() {
        THROTTLE_MS.with(|t| t.set(0));
        CPU_START.with(|c| c.set(None));
        return;
    }
    let who = (user(ctx.principal), req.client_id());
    let now = Instant::now();
    let bytes = match ApiKey::try_from(req.header.request_api_key) {
        Ok(ApiKey::Produce) => quotas.record(QuotaKind::Produce, who, req.body.len() as f64, now),
        Ok(ApiKey::Fetch) => quotas.record(QuotaKind::Fetch, who, 0.0, now),
        _ => Duration::ZERO,
    };
    let time = quotas.record(QuotaKind::Request, who, 0.0, now);
    CPU_START.with(|c| c.set(thread_cpu()));
    let ms = bytes.max(time).as_millis().min(i32::MAX as u128) as i32;
    THROTTLE_MS.with(|t| t.set(ms));
}

/// Records a fetch's response size and the request's time (`started` to now), then
/// holds the response for the throttle time set by [`before`] (not a follower's).
pub(crate) fn after(ctx: &Ctx<'_>, req: &Request, reply: &Reply, started: Instant) {
    let hold = Duration::from_millis(THROTTLE_MS.with(|t| t.replace(0)).max(0) as u64);
    if FOLLOWER.with(|f| f.replace(false)) || !ctx.security().quotas.active() {
        return;
    }
    let quotas = &ctx.security().quotas;
    let who = (user(ctx.principal), req.client_id());
    let now = Instant::now();
    if req.header.request_api_key == ApiKey::Fetch as i16
        && let Reply::Parts(parts) = reply
    {
        let size: usize = parts.iter().map(super::api::Part::len).sum();
        quotas.record(QuotaKind::Fetch, who, size as f64, now);
    }
    // Percent-seconds of one thread: 100 for a second of work.
    let used = match (CPU_START.with(Cell::take), thread_cpu()) {
        (Some(start), Some(end)) => end.saturating_sub(start),
        _ => now.duration_since(started),
    };
    let percent = used.as_secs_f64() * 100.0;
    quotas.record(QuotaKind::Request, who, percent, now);
    let until = now + hold;
    while !ctx.shared.is_stopping() && !ctx.client_gone() {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        std::thread::sleep(left.min(HOLD_STEP));
    }
}
