//! Throttling and logging of failed logons.
//!
//! NTLM checks a password in one round trip and SMB2 lets a client retry SESSION_SETUP on the
//! same connection at once, so without this a client tests hundreds of passwords a second.
//! Windows answers with account lockout (the "account lockout threshold" and "reset account
//! lockout counter after" policies), which lets anyone lock a known account out; here failures
//! are slowed instead, and only the failing side pays:
//!
//! - Failures are counted per source (an IPv4 address, or an IPv6 /64, which is what one host
//!   usually gets) and per account name (lower-cased, as account look-up is case-insensitive).
//!   A counter is forgotten after `window` without a failure, like Windows' lockout counter.
//! - After `failures_before_delay` failures of either counter, the LOGON_FAILURE answer is held
//!   back: `first_delay`, doubling per further failure up to `max_delay`. The larger of the
//!   two counters' delays applies.
//! - Successful logons are never delayed by the account counter, so the owner of an account
//!   under attack logs in at once from elsewhere.
//! - Since a success is answered at once, a client could take "no answer yet" for a failure and
//!   open another connection instead of waiting. Each delayed failure therefore holds one of
//!   `max_pending_per_source` slots of its source until it is answered (whether or not the
//!   client is still there), and while they are all taken every logon answer to that source,
//!   successes included, waits for one. One source thus tests at most
//!   `max_pending_per_source / max_delay` passwords a second however many connections it uses.
//! - A success clears a counter only if every failure it holds was for that account from that
//!   source (a user who mistyped): an attacker logging in to its own account clears nothing.
//!
//! Failed logons are logged one line each up to `log_per_minute`; past that a background task
//! logs one summary (counts per source and account) once failures stop for `summary_after`,
//! and every [`SUMMARY_EVERY`] while they go on.

use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use smbq_proto::engine::Action;
use tokio::sync::Notify;
use tracing::warn;

/// Entries per counter table; the oldest go first when a client makes up more names or
/// addresses than this.
const TABLE_CAP: usize = 4096;
/// Distinct sources and accounts a summary counts one by one; the rest are counted together.
const TALLY_CAP: usize = 256;
/// Entries named in a summary line.
const SUMMARY_TOP: usize = 5;
/// Account names are kept (and logged in summaries) up to this many characters.
const NAME_CHARS: usize = 64;
/// A summary is also logged this often while failures go on without a pause.
pub const SUMMARY_EVERY: Duration = Duration::from_secs(15 * 60);
/// The per-minute window of individually logged failures.
const LOG_WINDOW: Duration = Duration::from_secs(60);

/// The `[logon]` settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogonPolicy {
    /// Failures (per source and per account) answered without delay.
    pub failures_before_delay: u32,
    /// The delay of the first delayed failure; it doubles with each further failure.
    pub first_delay: Duration,
    /// The longest delay. Zero turns throttling off (failures are still logged).
    pub max_delay: Duration,
    /// A counter is forgotten after this long without a failure.
    pub window: Duration,
    /// Delayed failures a source may have waiting at once before its logon answers queue.
    pub max_pending_per_source: u32,
    /// Failures logged one by one per minute.
    pub log_per_minute: u32,
    /// Quiet time after which the summary of unlogged failures is written.
    pub summary_after: Duration,
}

impl Default for LogonPolicy {
    fn default() -> Self {
        Self {
            failures_before_delay: 5,
            first_delay: Duration::from_millis(250),
            max_delay: Duration::from_secs(5),
            window: Duration::from_secs(15 * 60),
            max_pending_per_source: 4,
            log_per_minute: 20,
            summary_after: Duration::from_secs(60),
        }
    }
}

impl LogonPolicy {
    fn throttles(&self) -> bool {
        !self.max_delay.is_zero() && !self.first_delay.is_zero()
    }

    /// The delay owed by the `n`th failure of a counter.
    fn delay_for(&self, n: u32) -> Duration {
        let Some(k) = n.checked_sub(self.failures_before_delay.saturating_add(1)) else {
            return Duration::ZERO;
        };
        // 2^20 times any useful first delay is past any useful maximum.
        let d = self.first_delay.saturating_mul(1u32 << k.min(20));
        d.min(self.max_delay)
    }
}

/// Where failures are counted: the client's IPv4 address, or the /64 of its IPv6 address
/// (IPv4-mapped addresses from a dual-stack listener count as IPv4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Source {
    V4(Ipv4Addr),
    V6(u64),
}

impl Source {
    /// The same unit the connection table counts (crate::admission::address_key).
    pub fn of(ip: IpAddr) -> Self {
        match crate::admission::address_key(ip) {
            IpAddr::V4(a) => Self::V4(a),
            IpAddr::V6(a) => Self::V6((a.to_bits() >> 64) as u64),
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::V4(a) => write!(f, "{a}"),
            Self::V6(p) => {
                let s = p.to_be_bytes();
                let seg = |i: usize| {
                    u16::from_be_bytes([
                        s.get(i).copied().unwrap_or(0),
                        s.get(i + 1).copied().unwrap_or(0),
                    ])
                };
                write!(
                    f,
                    "{:x}:{:x}:{:x}:{:x}::/64",
                    seg(0),
                    seg(2),
                    seg(4),
                    seg(6)
                )
            }
        }
    }
}

/// The account key: lower-cased and cut to [`NAME_CHARS`], so a client cannot make entries
/// of any size.
fn account_key(user: &str) -> String {
    user.chars()
        .take(NAME_CHARS)
        .flat_map(char::to_lowercase)
        .collect()
}

/// The single key on the other side of a counter's failures, or several.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Other<K> {
    One(K),
    Many,
}

#[derive(Debug)]
struct Counter<O> {
    failures: u32,
    last: Instant,
    other: Other<O>,
    /// Delayed failure answers not yet sent (sources only).
    pending: u32,
}

impl<O> Counter<O> {
    fn stale(&self, now: Instant, window: Duration) -> bool {
        now.saturating_duration_since(self.last) >= window
    }
}

/// A bounded map of counters.
#[derive(Debug)]
struct Table<K, O> {
    map: HashMap<K, Counter<O>>,
    cap: usize,
}

impl<K: Hash + Eq + Clone, O: Eq + Clone> Table<K, O> {
    fn new(cap: usize) -> Self {
        Self {
            map: HashMap::new(),
            cap,
        }
    }

    /// The failures still counted against `k`.
    fn failures(&self, k: &K, now: Instant, window: Duration) -> u32 {
        self.map
            .get(k)
            .filter(|c| !c.stale(now, window))
            .map_or(0, |c| c.failures)
    }

    /// Counts a failure of `k` against `other`; returns the failures now counted.
    fn fail(&mut self, k: &K, other: &O, now: Instant, window: Duration) -> u32 {
        if !self.map.contains_key(k) {
            self.make_room(now, window);
        }
        let c = self.map.entry(k.clone()).or_insert_with(|| Counter {
            failures: 0,
            last: now,
            other: Other::One(other.clone()),
            pending: 0,
        });
        if c.stale(now, window) {
            c.failures = 0;
            c.other = Other::One(other.clone());
        }
        c.failures = c.failures.saturating_add(1);
        c.last = now;
        if c.other != Other::One(other.clone()) {
            c.other = Other::Many;
        }
        c.failures
    }

    /// Forgets `k`'s failures if they were all against `other`.
    fn clear_if_only(&mut self, k: &K, other: &O) {
        if let Some(c) = self.map.get_mut(k)
            && c.other == Other::One(other.clone())
        {
            c.failures = 0;
            c.other = Other::Many;
            if c.pending == 0 {
                self.map.remove(k);
            }
        }
    }

    /// Drops stale entries, then the least recently failing one, so one more fits. Entries with
    /// pending answers are kept while any other can go: their slots must be given back.
    fn make_room(&mut self, now: Instant, window: Duration) {
        if self.map.len() < self.cap {
            return;
        }
        self.map
            .retain(|_, c| c.pending > 0 || !c.stale(now, window));
        while self.map.len() >= self.cap {
            let oldest = self
                .map
                .iter()
                .min_by_key(|(_, c)| (c.pending > 0, c.last))
                .map(|(k, _)| k.clone());
            match oldest {
                Some(k) => self.map.remove(&k),
                None => break,
            };
        }
    }
}

/// The throttle's decisions, on an explicit clock.
#[derive(Debug)]
pub struct Throttle {
    policy: LogonPolicy,
    sources: Table<Source, String>,
    accounts: Table<String, Source>,
}

impl Throttle {
    pub fn new(policy: LogonPolicy) -> Self {
        Self::with_cap(policy, TABLE_CAP)
    }

    fn with_cap(policy: LogonPolicy, cap: usize) -> Self {
        Self {
            policy,
            sources: Table::new(cap),
            accounts: Table::new(cap),
        }
    }

    /// Whether a logon answer to `src` may go out: not while all its slots hold delayed
    /// failures, else a client could learn the outcome from the absence of a quick answer.
    pub fn may_answer(&self, src: Source) -> bool {
        self.sources
            .map
            .get(&src)
            .is_none_or(|c| c.pending < self.policy.max_pending_per_source.max(1))
    }

    /// Counts a failure; returns how long its answer waits. A non-zero delay takes one of
    /// `src`'s slots, to be given back with [`Throttle::answered`].
    pub fn failed(&mut self, src: Source, user: &str, now: Instant) -> Duration {
        if !self.policy.throttles() {
            return Duration::ZERO;
        }
        let account = account_key(user);
        let window = self.policy.window;
        let by_source = self.sources.fail(&src, &account, now, window);
        let by_account = self.accounts.fail(&account, &src, now, window);
        let delay = self
            .policy
            .delay_for(by_source)
            .max(self.policy.delay_for(by_account));
        if !delay.is_zero()
            && let Some(c) = self.sources.map.get_mut(&src)
        {
            c.pending = c.pending.saturating_add(1);
        }
        delay
    }

    /// Gives back the slot of a delayed failure answer.
    pub fn answered(&mut self, src: Source, now: Instant) {
        let window = self.policy.window;
        if let Some(c) = self.sources.map.get_mut(&src) {
            c.pending = c.pending.saturating_sub(1);
            if c.pending == 0 && (c.failures == 0 || c.stale(now, window)) {
                self.sources.map.remove(&src);
            }
        }
    }

    /// A logon succeeded: a user who mistyped its own password gets a clean slate, nobody else.
    pub fn succeeded(&mut self, src: Source, user: &str) {
        if user.is_empty() {
            return;
        }
        let account = account_key(user);
        self.sources.clear_if_only(&src, &account);
        self.accounts.clear_if_only(&account, &src);
    }

    /// Failures counted against a source and an account (for tests and diagnostics).
    pub fn counts(&self, src: Source, user: &str, now: Instant) -> (u32, u32) {
        let window = self.policy.window;
        (
            self.sources.failures(&src, now, window),
            self.accounts.failures(&account_key(user), now, window),
        )
    }
}

/// Counts per key, up to [`TALLY_CAP`] keys; the rest add up in `rest`.
#[derive(Debug)]
struct Tally<K> {
    counts: HashMap<K, u64>,
    rest: u64,
}

impl<K: Hash + Eq + fmt::Debug> Tally<K> {
    fn new() -> Self {
        Self {
            counts: HashMap::new(),
            rest: 0,
        }
    }

    fn add(&mut self, k: K) {
        if let Some(n) = self.counts.get_mut(&k) {
            *n += 1;
        } else if self.counts.len() < TALLY_CAP {
            self.counts.insert(k, 1);
        } else {
            self.rest += 1;
        }
    }

    /// The largest counts first, e.g. `10.0.0.9=180 10.0.0.7=3 (2 more: 5)`.
    fn top(&self, show: impl Fn(&K) -> String) -> String {
        let mut v: Vec<(&K, &u64)> = self.counts.iter().collect();
        v.sort_by(|a, b| b.1.cmp(a.1).then_with(|| show(a.0).cmp(&show(b.0))));
        let mut out: Vec<String> = v
            .iter()
            .take(SUMMARY_TOP)
            .map(|(k, n)| format!("{}={n}", show(k)))
            .collect();
        let more = v.len().saturating_sub(SUMMARY_TOP);
        let more_n: u64 = v.iter().skip(SUMMARY_TOP).map(|(_, n)| **n).sum::<u64>() + self.rest;
        if more_n > 0 {
            out.push(format!("(others: {more_n} in {more}+ entries)"));
        }
        out.join(" ")
    }
}

/// Failures since the log last went quiet.
#[derive(Debug)]
struct Episode {
    started: Instant,
    last: Instant,
    failures: u64,
    unlogged: u64,
    sources: Tally<Source>,
    accounts: Tally<String>,
}

/// One summary line.
#[derive(Debug, PartialEq, Eq)]
pub struct Summary {
    pub failures: u64,
    pub unlogged: u64,
    pub seconds: u64,
    pub sources: String,
    pub accounts: String,
    /// Failures stopped (else they go on and another summary follows).
    pub stopped: bool,
}

impl Summary {
    fn log(&self) {
        let msg = if self.stopped {
            "logon failures stopped"
        } else {
            "logon failures continue"
        };
        warn!(
            target: crate::AUDIT,
            event = "logon_failures",
            failures = self.failures,
            unlogged = self.unlogged,
            seconds = self.seconds,
            sources = %self.sources,
            accounts = %self.accounts,
            "{msg}"
        );
    }
}

/// What the summary task does next.
#[derive(Debug, PartialEq, Eq)]
pub enum SummaryStep {
    Sleep(Duration),
    Log(Summary),
    /// Nothing left to report; the task ends.
    Done,
}

/// Rate-limited logging of failures, on an explicit clock.
#[derive(Debug)]
pub struct FailureLog {
    per_minute: u32,
    quiet: Duration,
    window_start: Option<Instant>,
    logged: u32,
    episode: Option<Episode>,
    /// A summary task exists (it ends when it has nothing left to report).
    summarizing: bool,
}

/// What the caller of [`FailureLog::record`] does.
#[derive(Debug, PartialEq, Eq)]
pub struct Recorded {
    /// Log this failure on its own line.
    pub log: bool,
    /// Start the summary task.
    pub start_summary: bool,
}

impl FailureLog {
    pub fn new(per_minute: u32, quiet: Duration) -> Self {
        Self {
            per_minute,
            quiet,
            window_start: None,
            logged: 0,
            episode: None,
            summarizing: false,
        }
    }

    pub fn record(&mut self, src: Source, user: &str, now: Instant) -> Recorded {
        if self
            .window_start
            .is_none_or(|w| now.saturating_duration_since(w) >= LOG_WINDOW)
        {
            self.window_start = Some(now);
            self.logged = 0;
        }
        // An episode with every failure logged has nothing to summarise once quiet.
        if let Some(e) = &self.episode
            && e.unlogged == 0
            && now.saturating_duration_since(e.last) >= self.quiet
        {
            self.episode = None;
        }
        let e = self.episode.get_or_insert_with(|| Episode {
            started: now,
            last: now,
            failures: 0,
            unlogged: 0,
            sources: Tally::new(),
            accounts: Tally::new(),
        });
        e.last = now;
        e.failures += 1;
        e.sources.add(src);
        e.accounts.add(account_key(user));
        let log = self.logged < self.per_minute;
        if log {
            self.logged += 1;
        } else {
            e.unlogged += 1;
        }
        let start_summary = e.unlogged > 0 && !self.summarizing;
        if start_summary {
            self.summarizing = true;
        }
        Recorded { log, start_summary }
    }

    /// The summary task's next step.
    pub fn step(&mut self, now: Instant) -> SummaryStep {
        let Some(e) = &self.episode else {
            self.summarizing = false;
            return SummaryStep::Done;
        };
        let quiet_at = e.last + self.quiet;
        let interim_at = e.started + SUMMARY_EVERY;
        if now < quiet_at && now < interim_at {
            return SummaryStep::Sleep(quiet_at.min(interim_at) - now);
        }
        let stopped = now >= quiet_at;
        let Some(e) = self.episode.take() else {
            return SummaryStep::Done;
        };
        if !stopped {
            // The attack goes on: the next summary counts from here.
            self.episode = Some(Episode {
                started: now,
                last: e.last,
                failures: 0,
                unlogged: 0,
                sources: Tally::new(),
                accounts: Tally::new(),
            });
        }
        if e.unlogged == 0 {
            // Every failure since the last summary had its own line.
            return self.step(now);
        }
        SummaryStep::Log(Summary {
            failures: e.failures,
            unlogged: e.unlogged,
            seconds: e.last.saturating_duration_since(e.started).as_secs(),
            sources: e.sources.top(|s| s.to_string()),
            accounts: e.accounts.top(|a| format!("{a:?}")),
            stopped,
        })
    }
}

/// What a frame's actions say about a logon.
enum Outcome<'a> {
    /// The user, and why (empty: a wrong password or unknown user).
    Failed(&'a str, &'a str),
    Succeeded(&'a str),
}

fn outcome(actions: &[Action]) -> Option<Outcome<'_>> {
    actions.iter().find_map(|a| match a {
        Action::AuthFailed { user, reason } => Some(Outcome::Failed(user, reason)),
        Action::SessionStarted { user, .. } => Some(Outcome::Succeeded(user)),
        _ => None,
    })
}

/// The throttle and the failure log, shared by all connections.
pub struct LogonGuard {
    throttle: Mutex<Throttle>,
    log: Mutex<FailureLog>,
    /// Woken whenever a slot is given back.
    released: Notify,
}

/// A delayed failure's slot, given back when the answer goes (or the connection goes away).
struct Slot<'a> {
    guard: &'a LogonGuard,
    src: Source,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.guard
            .throttle
            .lock()
            .answered(self.src, Instant::now());
        self.guard.released.notify_waiters();
    }
}

impl LogonGuard {
    pub fn new(policy: LogonPolicy) -> Arc<Self> {
        let log = FailureLog::new(policy.log_per_minute, policy.summary_after);
        Arc::new(Self {
            throttle: Mutex::new(Throttle::new(policy)),
            log: Mutex::new(log),
            released: Notify::new(),
        })
    }

    /// Called with the actions of each frame before its answer is sent: returns when the
    /// answer may go. Only the connection that sent the frame waits.
    pub async fn answer(self: &Arc<Self>, peer: IpAddr, transport: &str, actions: &[Action]) {
        let Some(outcome) = outcome(actions) else {
            return;
        };
        let src = Source::of(peer);
        let (delay, slot) = loop {
            let released = self.released.notified();
            tokio::pin!(released);
            // Registered before the check, so a slot given back in between still wakes us.
            released.as_mut().enable();
            {
                let mut t = self.throttle.lock();
                if t.may_answer(src) {
                    let delay = match outcome {
                        Outcome::Failed(user, _) => t.failed(src, user, Instant::now()),
                        Outcome::Succeeded(user) => {
                            t.succeeded(src, user);
                            Duration::ZERO
                        }
                    };
                    // Made only for a real delay: dropping a slot gives one back (and takes this lock).
                    let slot = (!delay.is_zero()).then(|| Slot { guard: self, src });
                    break (delay, slot);
                }
            }
            released.await;
        };
        if let Outcome::Failed(user, reason) = outcome {
            let rec = self.log.lock().record(src, user, Instant::now());
            if rec.log {
                warn!(
                    target: crate::AUDIT,
                    event = "logon",
                    result = "failure",
                    user,
                    reason = if reason.is_empty() { "bad password or unknown user" } else { reason },
                    peer = %peer,
                    transport,
                    delay_ms = delay.as_millis() as u64,
                    "logon failure"
                );
            }
            if rec.start_summary {
                self.start_summary();
            }
        }
        if slot.is_some() {
            tokio::time::sleep(delay).await;
        }
        drop(slot);
    }

    /// Logs the summaries from a task of its own, so they come when failures stop rather than
    /// with the next failure, and outside any connection's span.
    fn start_summary(self: &Arc<Self>) {
        let me = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                let Some(guard) = me.upgrade() else { return };
                let step = guard.log.lock().step(Instant::now());
                drop(guard);
                match step {
                    SummaryStep::Sleep(d) => tokio::time::sleep(d).await,
                    SummaryStep::Log(s) => s.log(),
                    SummaryStep::Done => return,
                }
            }
        });
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use std::net::Ipv6Addr;

    const MS: Duration = Duration::from_millis(1);

    fn policy() -> LogonPolicy {
        LogonPolicy {
            failures_before_delay: 3,
            first_delay: 100 * MS,
            max_delay: 1000 * MS,
            window: Duration::from_secs(600),
            max_pending_per_source: 2,
            log_per_minute: 5,
            summary_after: Duration::from_secs(60),
        }
    }

    fn v4(last: u8) -> Source {
        Source::of(IpAddr::V4(Ipv4Addr::new(192, 0, 2, last)))
    }

    /// The delays of `n` failures in a row, without giving back their slots' effect on counts.
    fn delays(t: &mut Throttle, src: Source, user: &str, n: usize, now: Instant) -> Vec<u64> {
        (0..n)
            .map(|_| {
                let d = t.failed(src, user, now);
                t.answered(src, now);
                d.as_millis() as u64
            })
            .collect()
    }

    #[test]
    fn delay_starts_after_the_free_failures_doubles_and_is_capped() {
        let mut t = Throttle::new(policy());
        let now = Instant::now();
        assert_eq!(
            delays(&mut t, v4(1), "alice", 9, now),
            [0, 0, 0, 100, 200, 400, 800, 1000, 1000]
        );
        // Very many failures neither overflow nor exceed the maximum.
        for _ in 0..100 {
            t.failed(v4(1), "alice", now);
            t.answered(v4(1), now);
        }
        assert_eq!(t.failed(v4(1), "alice", now), 1000 * MS);
    }

    #[test]
    fn counters_are_forgotten_after_a_quiet_window() {
        let mut t = Throttle::new(policy());
        let now = Instant::now();
        delays(&mut t, v4(1), "alice", 6, now);
        let almost = now + Duration::from_secs(599);
        assert_eq!(t.failed(v4(1), "alice", almost), 800 * MS);
        t.answered(v4(1), almost);
        // The window runs from the last failure.
        let later = almost + Duration::from_secs(600);
        assert_eq!(t.counts(v4(1), "alice", later), (0, 0));
        assert_eq!(delays(&mut t, v4(1), "alice", 4, later), [0, 0, 0, 100]);
    }

    #[test]
    fn an_account_is_throttled_across_sources_and_a_source_across_accounts() {
        let mut t = Throttle::new(policy());
        let now = Instant::now();
        // One guess from each of many addresses, all at one account.
        let d: Vec<u64> = (1..=6)
            .map(|i| {
                let d = t.failed(v4(i), "Admin", now);
                t.answered(v4(i), now);
                d.as_millis() as u64
            })
            .collect();
        assert_eq!(d, [0, 0, 0, 100, 200, 400]);
        // The account name is compared without case.
        assert_eq!(t.counts(v4(9), "ADMIN", now), (0, 6));
        // A fresh source guessing a fresh account is not slowed.
        assert_eq!(t.failed(v4(50), "bob", now), Duration::ZERO);
        // One source spraying many accounts is.
        let d: Vec<u64> = (0..5)
            .map(|i| {
                let d = t.failed(v4(60), &format!("user{i}"), now);
                t.answered(v4(60), now);
                d.as_millis() as u64
            })
            .collect();
        assert_eq!(d, [0, 0, 0, 100, 200]);
    }

    #[test]
    fn success_clears_only_a_mistyping_users_own_failures() {
        let mut t = Throttle::new(policy());
        let now = Instant::now();
        // A user who mistyped, then got it right: both counters go.
        delays(&mut t, v4(1), "alice", 5, now);
        t.succeeded(v4(1), "Alice");
        assert_eq!(t.counts(v4(1), "alice", now), (0, 0));

        // An attacker guessing alice cannot clear its address by logging in as itself.
        delays(&mut t, v4(2), "alice", 5, now);
        t.succeeded(v4(2), "mallory");
        assert_eq!(t.counts(v4(2), "alice", now), (5, 5));
        // Nor does alice's own success elsewhere clear the attacker's address.
        t.succeeded(v4(3), "alice");
        assert_eq!(t.counts(v4(2), "alice", now).0, 5);

        // Failures from two addresses: alice's success from one clears that address only.
        let mut t = Throttle::new(policy());
        delays(&mut t, v4(1), "alice", 2, now);
        delays(&mut t, v4(2), "alice", 2, now);
        t.succeeded(v4(1), "alice");
        assert_eq!(t.counts(v4(1), "alice", now), (0, 4));
        assert_eq!(t.counts(v4(2), "alice", now), (2, 4));

        // A source that tried two accounts is not cleared by either.
        let mut t = Throttle::new(policy());
        delays(&mut t, v4(1), "alice", 2, now);
        delays(&mut t, v4(1), "bob", 2, now);
        t.succeeded(v4(1), "bob");
        assert_eq!(t.counts(v4(1), "bob", now), (4, 0));
    }

    #[test]
    fn answers_wait_while_a_source_has_all_its_slots_taken() {
        let mut t = Throttle::new(policy());
        let now = Instant::now();
        delays(&mut t, v4(1), "x", 3, now);
        assert!(t.may_answer(v4(1)));
        assert!(!t.failed(v4(1), "x", now).is_zero());
        assert!(t.may_answer(v4(1)));
        assert!(!t.failed(v4(1), "x", now).is_zero());
        assert!(!t.may_answer(v4(1)), "two delayed answers pending");
        assert!(t.may_answer(v4(2)), "other sources are not held");
        t.answered(v4(1), now);
        assert!(t.may_answer(v4(1)));
    }

    #[test]
    fn ipv6_counts_per_64_and_mapped_ipv4_as_ipv4() {
        let a: Ipv6Addr = "2001:db8:1:2::1".parse().unwrap();
        let b: Ipv6Addr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let c: Ipv6Addr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(Source::of(a.into()), Source::of(b.into()));
        assert_ne!(Source::of(a.into()), Source::of(c.into()));
        assert_eq!(Source::of(a.into()).to_string(), "2001:db8:1:2::/64");
        let mapped: Ipv6Addr = "::ffff:192.0.2.7".parse().unwrap();
        assert_eq!(Source::of(mapped.into()), v4(7));
        assert_eq!(v4(7).to_string(), "192.0.2.7");
    }

    #[test]
    fn tables_stay_bounded_and_keep_pending_slots() {
        let mut t = Throttle::with_cap(policy(), 64);
        let now = Instant::now();
        // A held answer from an early source.
        delays(&mut t, v4(1), "x", 3, now);
        assert!(!t.failed(v4(1), "x", now).is_zero());
        for i in 0..10_000u32 {
            let src = Source::V6(u64::from(i));
            t.failed(src, &format!("name{i}"), now + MS * i);
        }
        assert!(t.sources.map.len() <= 64 && t.accounts.map.len() <= 64);
        assert_eq!(t.sources.map[&v4(1)].pending, 1);
        // Long names are cut, so they cannot grow an entry.
        t.failed(v4(2), &"N".repeat(100_000), now);
        assert!(
            t.accounts
                .map
                .keys()
                .all(|k| k.chars().count() <= NAME_CHARS)
        );
    }

    #[test]
    fn zero_delay_turns_throttling_off() {
        let mut t = Throttle::new(LogonPolicy {
            max_delay: Duration::ZERO,
            ..policy()
        });
        let now = Instant::now();
        assert!(delays(&mut t, v4(1), "a", 50, now).iter().all(|d| *d == 0));
        assert!(t.may_answer(v4(1)));
    }

    #[test]
    fn failures_past_the_rate_are_summarised_once_they_stop() {
        let mut log = FailureLog::new(5, Duration::from_secs(60));
        let t0 = Instant::now();
        let mut logged = 0;
        let mut starts = 0;
        for i in 0..30u32 {
            let src = if i < 25 { v4(9) } else { v4(7) };
            let r = log.record(src, if i % 3 == 0 { "Admin" } else { "root" }, t0 + MS * i);
            logged += u32::from(r.log);
            starts += u32::from(r.start_summary);
        }
        assert_eq!((logged, starts), (5, 1), "one task, started by the 6th");
        // Still failing recently: the task sleeps until a minute after the last failure.
        let last = t0 + MS * 29;
        assert_eq!(
            log.step(t0 + MS * 29),
            SummaryStep::Sleep(Duration::from_secs(60))
        );
        let SummaryStep::Log(s) = log.step(last + Duration::from_secs(60)) else {
            panic!("no summary")
        };
        assert_eq!(
            s,
            Summary {
                failures: 30,
                unlogged: 25,
                seconds: 0,
                sources: "192.0.2.9=25 192.0.2.7=5".into(),
                accounts: "\"root\"=20 \"admin\"=10".into(),
                stopped: true,
            }
        );
        assert_eq!(log.step(last + Duration::from_secs(61)), SummaryStep::Done);
        // The next burst starts a new task.
        let t1 = last + Duration::from_secs(120);
        let starts: u32 = (0..10u32)
            .map(|i| u32::from(log.record(v4(1), "a", t1 + MS * i).start_summary))
            .sum();
        assert_eq!(starts, 1);
    }

    #[test]
    fn no_summary_when_every_failure_was_logged() {
        let mut log = FailureLog::new(5, Duration::from_secs(60));
        let t0 = Instant::now();
        for i in 0..5u32 {
            let r = log.record(v4(1), "a", t0 + Duration::from_secs(i.into()));
            assert!(r.log && !r.start_summary);
        }
        // A minute later the rate allows more lines again.
        assert!(log.record(v4(1), "a", t0 + Duration::from_secs(61)).log);
    }

    #[test]
    fn a_long_attack_is_summarised_periodically() {
        let mut log = FailureLog::new(1, Duration::from_secs(60));
        let t0 = Instant::now();
        let mut now = t0;
        let mut summaries = Vec::new();
        // One failure every 10 s for 40 minutes, stepping the task whenever it asks.
        let mut wake = None;
        while now < t0 + Duration::from_secs(40 * 60) {
            if log.record(v4(1), "a", now).start_summary {
                wake = Some(now);
            }
            while let Some(w) = wake
                && w <= now
            {
                match log.step(now) {
                    SummaryStep::Sleep(d) => wake = Some(now + d),
                    SummaryStep::Log(s) => summaries.push(s),
                    SummaryStep::Done => wake = None,
                }
            }
            now += Duration::from_secs(10);
        }
        assert_eq!(summaries.len(), 2, "{summaries:?}");
        assert!(summaries.iter().all(|s| !s.stopped && s.failures >= 80));
    }

    fn failed(user: &str) -> Vec<Action> {
        vec![Action::AuthFailed {
            user: user.into(),
            reason: String::new(),
        }]
    }

    #[tokio::test(start_paused = true)]
    async fn answers_are_held_by_the_delay_and_by_full_slots() {
        let guard = LogonGuard::new(policy());
        let peer: IpAddr = Ipv4Addr::new(192, 0, 2, 1).into();
        let start = tokio::time::Instant::now();
        for _ in 0..5 {
            guard.answer(peer, "tcp", &failed("x")).await;
        }
        // 0 + 0 + 0 + 100 + 200 ms.
        assert_eq!(start.elapsed(), 300 * MS);

        // Two delayed failures in flight take both slots: a third answer waits for one.
        let t = tokio::time::Instant::now();
        let (a, b) = (guard.clone(), guard.clone());
        let h1 = tokio::spawn(async move { a.answer(peer, "tcp", &failed("x")).await });
        let h2 = tokio::spawn(async move { b.answer(peer, "tcp", &failed("x")).await });
        tokio::task::yield_now().await;
        let other: IpAddr = Ipv4Addr::new(192, 0, 2, 2).into();
        guard.answer(other, "tcp", &failed("y")).await;
        assert_eq!(t.elapsed(), Duration::ZERO, "other sources are not held");
        guard.answer(peer, "tcp", &[]).await;
        assert_eq!(t.elapsed(), Duration::ZERO, "frames without a logon pass");
        guard.answer(peer, "tcp", &failed("x")).await;
        h1.await.unwrap();
        h2.await.unwrap();
        // The third waited for the first slot (400 ms), then its own 1000 ms.
        assert_eq!(t.elapsed(), 1400 * MS);
    }
}
