//! Transfer progress on stderr: a bar with rate and ETA on a terminal, periodic lines with
//! `--progress` elsewhere, and a final summary line a script can read, e.g.
//! `smbq: get 1073741824 bytes in 3.2 s (320 MB/s)`. Nothing goes to stdout.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::watchdog;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Nothing at all.
    Quiet,
    /// Only the summary line at the end.
    Summary,
    /// A bar redrawn in place (stderr is a terminal).
    Bar,
    /// A line every second (stderr is not a terminal, `--progress` given).
    Lines,
}

pub fn mode(quiet: bool, progress: bool) -> Mode {
    if quiet {
        Mode::Quiet
    } else if std::io::stderr().is_terminal() {
        Mode::Bar
    } else if progress {
        Mode::Lines
    } else {
        Mode::Summary
    }
}

const LINE_EVERY: Duration = Duration::from_secs(1);

pub struct Progress {
    verb: &'static str,
    mode: Mode,
    bar: Option<ProgressBar>,
    start: Instant,
    total: u64,
    /// Bytes already in place (resumed or skipped): count toward the position, not the rate.
    skipped: AtomicU64,
    /// Bytes moved by this run.
    moved: AtomicU64,
    files: AtomicU64,
    last_line: Mutex<Instant>,
    name: Mutex<String>,
}

impl Progress {
    pub fn new(verb: &'static str, mode: Mode, total: u64) -> Self {
        let bar = (mode == Mode::Bar).then(|| {
            let b = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template(
                "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} ETA {eta}",
            )
            .map(|s| s.progress_chars("=> "))
            .unwrap_or_else(|_| ProgressStyle::default_bar());
            b.set_style(style);
            b
        });
        Self {
            verb,
            mode,
            bar,
            start: Instant::now(),
            total,
            skipped: AtomicU64::new(0),
            moved: AtomicU64::new(0),
            files: AtomicU64::new(0),
            last_line: Mutex::new(Instant::now()),
            name: Mutex::new(String::new()),
        }
    }

    /// The file being transferred now.
    pub fn file(&self, name: &str) {
        if let Some(b) = &self.bar {
            b.set_message(name.to_string());
        }
        if let Ok(mut n) = self.name.lock() {
            *n = name.to_string();
        }
    }

    pub fn file_done(&self) {
        self.files.fetch_add(1, Ordering::Relaxed);
    }

    /// Bytes that were already there.
    pub fn skip(&self, n: u64) {
        self.skipped.fetch_add(n, Ordering::Relaxed);
        if let Some(b) = &self.bar {
            b.inc(n);
            // The rate and ETA are about what moves, not what was there.
            b.reset_eta();
        }
    }

    /// Bytes moved.
    pub fn add(&self, n: u64) {
        watchdog::touch();
        let moved = self.moved.fetch_add(n, Ordering::Relaxed) + n;
        if let Some(b) = &self.bar {
            b.inc(n);
        }
        if self.mode == Mode::Lines {
            let mut last = match self.last_line.lock() {
                Ok(l) => l,
                Err(p) => p.into_inner(),
            };
            if last.elapsed() >= LINE_EVERY {
                *last = Instant::now();
                let pos = moved + self.skipped.load(Ordering::Relaxed);
                let name = self.name.lock().map(|n| n.clone()).unwrap_or_default();
                eprintln!(
                    "{}",
                    progress_line(
                        self.verb,
                        &name,
                        pos,
                        self.total,
                        moved,
                        self.start.elapsed()
                    )
                );
            }
        }
    }

    pub fn moved(&self) -> u64 {
        self.moved.load(Ordering::Relaxed)
    }

    /// Clears the bar; prints the summary (files counted when `several`).
    pub fn finish(&self, several: bool) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
        if self.mode != Mode::Quiet {
            let files = several.then(|| self.files.load(Ordering::Relaxed));
            eprintln!(
                "{}",
                summary(self.verb, files, self.moved(), self.start.elapsed())
            );
        }
    }

    /// Clears the bar without a summary (the error line follows).
    pub fn abandon(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(b) = &self.bar
            && !b.is_finished()
        {
            b.finish_and_clear();
        }
    }
}

/// `320 MB/s` (decimal units, as network rates are quoted).
pub fn rate(bytes: u64, elapsed: Duration) -> String {
    let secs = elapsed.as_secs_f64().max(1e-6);
    let r = bytes as f64 / secs;
    if r >= 100e6 {
        format!("{:.0} MB/s", r / 1e6)
    } else if r >= 1e6 {
        format!("{:.1} MB/s", r / 1e6)
    } else {
        format!("{:.1} kB/s", r / 1e3)
    }
}

/// `smbq: get 1073741824 bytes in 3.2 s (320 MB/s)`, with `N files, ` for directories.
pub fn summary(verb: &str, files: Option<u64>, bytes: u64, elapsed: Duration) -> String {
    let files = match files {
        Some(1) => "1 file, ".to_string(),
        Some(n) => format!("{n} files, "),
        None => String::new(),
    };
    format!(
        "smbq: {verb} {files}{bytes} bytes in {:.1} s ({})",
        elapsed.as_secs_f64(),
        rate(bytes, elapsed)
    )
}

/// `smbq: get NAME: 45% (483183820 of 1073741824 bytes), 320 MB/s, ETA 2 s`.
pub fn progress_line(
    verb: &str,
    name: &str,
    pos: u64,
    total: u64,
    moved: u64,
    elapsed: Duration,
) -> String {
    let pct = pos.saturating_mul(100).checked_div(total).unwrap_or(100);
    let secs = elapsed.as_secs_f64().max(1e-6);
    let per_sec = moved as f64 / secs;
    let eta = if per_sec > 0.0 {
        format!("{:.0} s", total.saturating_sub(pos) as f64 / per_sec)
    } else {
        "?".into()
    };
    format!(
        "smbq: {verb} {name}: {pct}% ({pos} of {total} bytes), {}, ETA {eta}",
        rate(moved, elapsed)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_line_is_parseable() {
        let s = summary("get", None, 1_073_741_824, Duration::from_millis(3200));
        assert_eq!(s, "smbq: get 1073741824 bytes in 3.2 s (336 MB/s)");
        let s = summary("put", Some(3), 3_000_000, Duration::from_secs(2));
        assert_eq!(s, "smbq: put 3 files, 3000000 bytes in 2.0 s (1.5 MB/s)");
        let s = summary("put", Some(1), 500, Duration::from_secs(1));
        assert_eq!(s, "smbq: put 1 file, 500 bytes in 1.0 s (0.5 kB/s)");
    }

    #[test]
    fn zero_time_does_not_divide_by_zero() {
        let s = summary("get", None, 0, Duration::ZERO);
        assert_eq!(s, "smbq: get 0 bytes in 0.0 s (0.0 kB/s)");
    }

    #[test]
    fn progress_line_counts_resumed_bytes_in_position_not_rate() {
        let l = progress_line("get", "big", 600, 1000, 100, Duration::from_secs(1));
        assert_eq!(
            l,
            "smbq: get big: 60% (600 of 1000 bytes), 0.1 kB/s, ETA 4 s"
        );
        let l = progress_line("get", "empty", 0, 0, 0, Duration::ZERO);
        assert!(l.contains("100%") && l.ends_with("ETA ?"), "{l}");
    }
}
