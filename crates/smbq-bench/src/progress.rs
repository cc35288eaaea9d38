//! Progress lines on stderr: scenario, step k/n, what runs now, and an estimate of the time
//! left in the scenario (from the average step so far).

use std::time::{Duration, Instant};

pub struct Progress {
    scenario: &'static str,
    total: usize,
    done: usize,
    started: Instant,
}

pub fn fmt_duration(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

impl Progress {
    pub fn new(scenario: &'static str, total: usize) -> Self {
        eprintln!("bench: == {scenario}: {total} steps");
        Self {
            scenario,
            total: total.max(1),
            done: 0,
            started: Instant::now(),
        }
    }

    /// Announces the next step.
    pub fn step(&mut self, what: &str) {
        self.done += 1;
        let elapsed = self.started.elapsed();
        let eta = if self.done > 1 {
            let per = elapsed.as_secs_f64() / (self.done - 1) as f64;
            let left = per * (self.total.saturating_sub(self.done - 1)) as f64;
            format!(", ETA {}", fmt_duration(Duration::from_secs_f64(left)))
        } else {
            String::new()
        };
        eprintln!(
            "bench: [{} {}/{}] {what} (elapsed {}{eta})",
            self.scenario,
            self.done.min(self.total),
            self.total,
            fmt_duration(elapsed)
        );
    }

    pub fn note(&self, what: &str) {
        eprintln!("bench: [{}] {what}", self.scenario);
    }

    pub fn finish(&self) {
        eprintln!(
            "bench: == {} done in {}",
            self.scenario,
            fmt_duration(self.started.elapsed())
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        assert_eq!(fmt_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(fmt_duration(Duration::from_secs(125)), "2m05s");
        assert_eq!(fmt_duration(Duration::from_secs(3720)), "1h02m");
    }
}
