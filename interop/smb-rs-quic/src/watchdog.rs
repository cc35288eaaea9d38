//! Step deadlines enforced from outside the async runtime.
//!
//! After a lost QUIC connection smb 0.12.1's receive loop spins without yielding; two such
//! loops occupy every tokio worker, so a `tokio::time::timeout` around a step never gets to
//! fire. A plain thread watches the deadlines instead and ends the process when one passes.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How much later than the async timeout the watchdog steps in.
const GRACE: Duration = Duration::from_secs(2);

struct Steps {
    next: AtomicU64,
    open: Mutex<BTreeMap<u64, (Instant, String)>>,
}

fn steps() -> &'static Steps {
    static STEPS: OnceLock<Steps> = OnceLock::new();
    STEPS.get_or_init(|| {
        std::thread::spawn(watch);
        Steps {
            next: AtomicU64::new(0),
            open: Mutex::new(BTreeMap::new()),
        }
    })
}

fn watch() {
    loop {
        std::thread::sleep(Duration::from_millis(200));
        let now = Instant::now();
        let overdue = steps().open.lock().ok().and_then(|open| {
            open.values()
                .find(|(deadline, _)| *deadline <= now)
                .map(|(_, what)| what.clone())
        });
        if let Some(what) = overdue {
            crate::fail(&format!(
                "{what}: timed out (watchdog; the async runtime was not making progress)"
            ));
        }
    }
}

/// Registered for as long as it lives.
pub struct Guard(u64);

pub fn arm(limit: Duration, what: &str) -> Guard {
    let s = steps();
    let id = s.next.fetch_add(1, Ordering::Relaxed);
    if let Ok(mut open) = s.open.lock() {
        open.insert(id, (Instant::now() + limit + GRACE, what.to_string()));
    }
    Guard(id)
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Ok(mut open) = steps().open.lock() {
            open.remove(&self.0);
        }
    }
}
