//! Progress of long work on stderr, drawn by `indicatif`: `perf` runs, `consume -e` of
//! a range, `dump` of a segment, `topics delete`, and opening a data directory whose
//! unflushed bytes recovery must validate.
//!
//! When it shows (`--quiet` and `TIDELOG_PROGRESS` decide, see [`init`]):
//! - `auto` (the default): only when stderr is a terminal. Work done in one library
//!   call (opening, deleting) shows once it has lasted [`DELAY`], so quick commands never
//!   flash a bar; commands that print records (`consume`, `dump`) show it only when
//!   their stdout is not that terminal (`> file`, `| ...`), where it would garble them.
//! - `always`: on stderr whatever it is, from the first update, without delay (for
//!   logs of long runs, and for the tests).
//! - `never`, or `--quiet`: never.
//!
//! Every bar is cleared when its work ends, so nothing is left on the terminal and
//! nothing else the command prints to stderr changes.

use std::borrow::Cow;
use std::io::{IsTerminal, Write};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle, TermLike};

/// How long work done in one call runs before its progress shows (in `auto` mode).
pub(crate) const DELAY: Duration = Duration::from_millis(700);
/// How often a watcher thread looks at work done in one call.
const POLL: Duration = Duration::from_millis(100);

/// When progress shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Auto,
    Always,
    Never,
}

static MODE: OnceLock<Mode> = OnceLock::new();
static MULTI: OnceLock<Option<MultiProgress>> = OnceLock::new();

/// Decides when progress shows: `--quiet` turns it off; otherwise the environment
/// variable `TIDELOG_PROGRESS` (`auto`, `always`, `never`; anything else is `auto`).
pub(crate) fn init(quiet: bool) {
    let mode = if quiet {
        Mode::Never
    } else {
        match std::env::var("TIDELOG_PROGRESS").as_deref() {
            Ok("always") => Mode::Always,
            Ok("never") => Mode::Never,
            _ => Mode::Auto,
        }
    };
    let _ = MODE.set(mode);
}

fn mode() -> Mode {
    *MODE.get().unwrap_or(&Mode::Auto)
}

/// Where bars are drawn, None when progress does not show. One `MultiProgress` for the
/// process, so that two bars at once (perf pubsub's producer and consumer) share the
/// screen.
fn multi() -> Option<&'static MultiProgress> {
    MULTI
        .get_or_init(|| match mode() {
            Mode::Never => None,
            Mode::Auto if !std::io::stderr().is_terminal() => None,
            Mode::Auto => Some(MultiProgress::with_draw_target(
                ProgressDrawTarget::stderr_with_hz(10),
            )),
            Mode::Always => Some(MultiProgress::with_draw_target(
                ProgressDrawTarget::term_like_with_hz(Box::new(Stderr), 10),
            )),
        })
        .as_ref()
}

/// Runs `f`, which writes to stdout, with the bars hidden if stdout is the terminal they
/// are drawn on (so that its lines are not drawn over).
pub(crate) fn suspend<R>(f: impl FnOnce() -> R) -> R {
    static STDOUT_IS_TERMINAL: OnceLock<bool> = OnceLock::new();
    match multi() {
        Some(m) if *STDOUT_IS_TERMINAL.get_or_init(|| std::io::stdout().is_terminal()) => {
            m.suspend(f)
        }
        _ => f(),
    }
}

/// True if a command printing records to stdout may show progress: in `auto` mode,
/// only when stdout is not a terminal.
pub(crate) fn beside_stdout() -> bool {
    match mode() {
        Mode::Auto => !std::io::stdout().is_terminal(),
        Mode::Always => true,
        Mode::Never => false,
    }
}

/// What a progress counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unit {
    Records,
    Bytes,
}

/// One bar (or spinner, without a total); cleared when dropped.
#[derive(Debug)]
pub(crate) struct Progress {
    bar: Option<ProgressBar>,
    calls: u64,
}

impl Progress {
    /// Counts records, with no total: `perf`'s progress.
    pub(crate) fn new(label: &'static str) -> Progress {
        Progress::with(label, Unit::Records, None)
    }

    /// A bar counting `unit` up to `total` (a spinner when None), labelled `label`.
    pub(crate) fn with(
        label: impl Into<Cow<'static, str>>,
        unit: Unit,
        total: Option<u64>,
    ) -> Progress {
        Progress {
            bar: multi().map(|m| m.add(bar(label.into(), unit, total, true))),
            calls: 0,
        }
    }

    /// A bar that shows only if `show` (e.g. [`beside_stdout`]).
    pub(crate) fn when(
        show: bool,
        label: impl Into<Cow<'static, str>>,
        unit: Unit,
        total: Option<u64>,
    ) -> Progress {
        if show {
            Progress::with(label, unit, total)
        } else {
            Progress {
                bar: None,
                calls: 0,
            }
        }
    }

    /// Notes that `done` is reached; updates the bar on the first call and every 256th
    /// (an update reads the clock: a tenth of the cost of a single-record append).
    #[inline]
    pub(crate) fn tick(&mut self, done: u64) {
        self.calls = self.calls.wrapping_add(1);
        if self.calls % 256 == 1 {
            self.set(done);
        }
    }

    /// Replaces the label (`forward`'s records behind).
    #[cfg(feature = "server")]
    pub(crate) fn label(&self, label: impl Into<Cow<'static, str>>) {
        if let Some(bar) = &self.bar {
            bar.set_message(label);
        }
    }

    /// Shows `done` now.
    pub(crate) fn set(&self, done: u64) {
        if let Some(bar) = &self.bar {
            bar.set_position(done);
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
            if let Some(m) = multi() {
                m.remove(&bar);
            }
        }
    }
}

/// A bar or spinner in tidelog's style; with `rate`, the rate and the time left or
/// spent too.
fn bar(label: Cow<'static, str>, unit: Unit, total: Option<u64>, rate: bool) -> ProgressBar {
    let (pos, len, per_sec, what) = match unit {
        Unit::Records => ("{human_pos}", "{human_len}", "{rate}", " records"),
        Unit::Bytes => ("{bytes}", "{total_bytes}", "{bytes_per_sec}", ""),
    };
    let (bar, template) = match total {
        Some(n) => (
            ProgressBar::new(n),
            format!("{{msg}}: [{{wide_bar}}] {pos}/{len}{what}"),
        ),
        None => (
            ProgressBar::new_spinner(),
            format!("{{spinner}} {{msg}}: {pos}{what}"),
        ),
    };
    let template = match (rate, total) {
        (false, _) => template,
        (true, Some(_)) => format!("{template} ({per_sec}, {{eta}} left)"),
        (true, None) => format!("{template} ({per_sec}, {{elapsed}})"),
    };
    let style = ProgressStyle::with_template(&template)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .with_key(
            "rate",
            |s: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{}/s", indicatif::HumanCount(s.per_sec() as u64));
            },
        );
    bar.set_style(style.progress_chars("=> "));
    bar.set_message(label);
    bar
}

/// Runs `work` (one call that takes a while) while a thread shows `label` with what
/// `done()` says has been done, once `work` has lasted [`DELAY`] and `done()` is above 0.
/// In `always` mode it shows at once, and, if `work` ended before a first look found
/// anything done, once with the final count (a log then says what was done).
pub(crate) fn while_running<T>(
    label: impl Into<Cow<'static, str>>,
    unit: Unit,
    total: Option<u64>,
    done: impl Fn() -> u64 + Sync,
    work: impl FnOnce() -> T,
) -> T {
    if multi().is_none() {
        return work();
    }
    let label = label.into();
    let always = mode() == Mode::Always;
    let delay = if always { Duration::ZERO } else { DELAY };
    let finished = AtomicBool::new(false);
    let show = |d: u64| {
        // No rate: the bar starts late, with much already done.
        let p = Progress {
            bar: multi().map(|m| m.add(bar(label.clone(), unit, total, false))),
            calls: 0,
        };
        p.set(d);
        if let Some(bar) = &p.bar {
            bar.force_draw();
        }
        p
    };
    std::thread::scope(|scope| {
        let watcher = scope.spawn(|| {
            let start = Instant::now();
            let mut progress: Option<Progress> = None;
            loop {
                let over = finished.load(Ordering::Acquire);
                let d = done();
                match &progress {
                    Some(p) => p.set(d),
                    None if d > 0 && (always || (!over && start.elapsed() >= delay)) => {
                        progress = Some(show(d));
                    }
                    None => {}
                }
                if over {
                    break;
                }
                std::thread::park_timeout(POLL);
            }
        });
        let out = work();
        finished.store(true, Ordering::Release);
        watcher.thread().unpark();
        out
    })
}

/// stderr as a terminal for `always` mode: indicatif's own terminal target draws
/// nothing when stderr is not a terminal.
#[derive(Debug)]
struct Stderr;

impl Stderr {
    fn put(&self, s: &str) -> std::io::Result<()> {
        std::io::stderr().lock().write_all(s.as_bytes())
    }
}

impl TermLike for Stderr {
    fn width(&self) -> u16 {
        100
    }
    fn move_cursor_up(&self, n: usize) -> std::io::Result<()> {
        if n > 0 {
            self.put(&format!("\x1b[{n}A"))
        } else {
            Ok(())
        }
    }
    fn move_cursor_down(&self, n: usize) -> std::io::Result<()> {
        if n > 0 {
            self.put(&format!("\x1b[{n}B"))
        } else {
            Ok(())
        }
    }
    fn move_cursor_right(&self, n: usize) -> std::io::Result<()> {
        if n > 0 {
            self.put(&format!("\x1b[{n}C"))
        } else {
            Ok(())
        }
    }
    fn move_cursor_left(&self, n: usize) -> std::io::Result<()> {
        if n > 0 {
            self.put(&format!("\x1b[{n}D"))
        } else {
            Ok(())
        }
    }
    fn write_line(&self, s: &str) -> std::io::Result<()> {
        self.put(s)?;
        self.put("\n")
    }
    fn write_str(&self, s: &str) -> std::io::Result<()> {
        self.put(s)
    }
    fn clear_line(&self) -> std::io::Result<()> {
        self.put("\r\x1b[2K")
    }
    fn flush(&self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}
