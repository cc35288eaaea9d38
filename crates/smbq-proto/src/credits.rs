//! The credit window (MS-SMB2 3.3.1.1, 3.3.5.2.3, 3.3.1.2): which message ids a client may use.
//!
//! Ids are granted at the top of the window and consumed in any order; a skipped id stays
//! usable. The span of the window is capped so a client that never uses a low id cannot make
//! the bitmap grow without bound.

use std::collections::VecDeque;

#[derive(Debug)]
pub struct CreditWindow {
    /// Lowest id that may still be unconsumed.
    base: u64,
    /// `granted[i]` says id `base + i` is granted and unused.
    granted: VecDeque<bool>,
    outstanding: u32,
    max_credits: u32,
    /// A lower bound on outstanding credits set by the shell while the connection's responses
    /// are not draining (back-pressure); `u32::MAX` when unset.
    ceiling: u32,
}

impl CreditWindow {
    /// A new connection may send message id 0 only (one credit).
    pub fn new(max_credits: u16) -> Self {
        let mut granted = VecDeque::new();
        granted.push_back(true);
        Self {
            base: 0,
            granted,
            outstanding: 1,
            max_credits: u32::from(max_credits.max(1)),
            ceiling: u32::MAX,
        }
    }

    /// Caps what later grants may bring the outstanding credits up to (MS-SMB2 3.3.1.2 leaves
    /// the grant to the server). Used to stop replenishing credits while a client does not
    /// read its responses; the one credit a client with none must get is still granted.
    pub fn set_ceiling(&mut self, ceiling: u32) {
        self.ceiling = ceiling;
    }

    pub fn outstanding(&self) -> u32 {
        self.outstanding
    }

    fn top(&self) -> u64 {
        self.base + self.granted.len() as u64
    }

    /// Consumes `[mid, mid + charge)`. Returns false (a violation) if any id is not granted.
    pub fn consume(&mut self, mid: u64, charge: u16) -> bool {
        let charge = u64::from(charge.max(1));
        let Some(end) = mid.checked_add(charge) else {
            return false;
        };
        if mid < self.base || end > self.top() {
            return false;
        }
        let start = (mid - self.base) as usize;
        let range = start..start + charge as usize;
        if !self.granted.range(range.clone()).all(|g| *g) {
            return false;
        }
        for i in range {
            if let Some(g) = self.granted.get_mut(i) {
                *g = false;
            }
        }
        self.outstanding -= charge as u32;
        while self.granted.front() == Some(&false) {
            self.granted.pop_front();
            self.base += 1;
        }
        true
    }

    /// Whether `mid` is a currently granted id (used for CANCEL, which consumes nothing).
    pub fn is_granted(&self, mid: u64) -> bool {
        mid.checked_sub(self.base)
            .and_then(|i| self.granted.get(i as usize))
            .copied()
            .unwrap_or(false)
    }

    /// Grants up to `requested` new credits (at least one if the client would otherwise be
    /// left with none), bounded by the outstanding limit and the window span. Returns the
    /// number granted, which goes in the response's CreditResponse.
    pub fn grant(&mut self, requested: u16) -> u16 {
        let room = self
            .max_credits
            .min(self.ceiling)
            .saturating_sub(self.outstanding);
        let span_room = (2 * self.max_credits).saturating_sub(self.granted.len() as u32);
        let mut n = u32::from(requested).min(room);
        if self.outstanding == 0 {
            n = n.max(1);
        }
        let n = n.min(span_room);
        for _ in 0..n {
            self.granted.push_back(true);
        }
        self.outstanding += n;
        n as u16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceiling_stops_replenishing_but_never_starves() {
        let mut w = CreditWindow::new(100);
        assert!(w.consume(0, 1));
        w.set_ceiling(10);
        assert_eq!(w.grant(50), 10, "the ceiling caps the grant");
        assert_eq!(w.grant(5), 0, "nothing more while at the ceiling");
        for mid in 1..11 {
            assert!(w.consume(mid, 1));
        }
        w.set_ceiling(0);
        assert_eq!(w.grant(50), 1, "a client left with none still gets one");
        assert_eq!(w.grant(50), 0);
        w.set_ceiling(u32::MAX);
        assert_eq!(w.grant(50), 50);
    }

    #[test]
    fn starts_with_id_zero_only() {
        let mut w = CreditWindow::new(100);
        assert!(!w.consume(1, 1));
        assert!(w.consume(0, 1));
        assert!(!w.consume(0, 1), "an id cannot be used twice");
    }

    #[test]
    fn skipped_id_stays_usable() {
        let mut w = CreditWindow::new(100);
        assert!(w.consume(0, 1));
        assert_eq!(w.grant(10), 10);
        assert!(w.consume(2, 1));
        assert!(w.consume(3, 1));
        assert!(w.consume(1, 1), "skipped id 1 is still granted");
        assert!(!w.consume(11, 1));
    }

    #[test]
    fn multi_credit_charge_consumes_a_range() {
        let mut w = CreditWindow::new(100);
        assert!(w.consume(0, 1));
        w.grant(8);
        assert!(w.consume(1, 4));
        assert!(!w.consume(4, 2), "id 4 was part of the previous charge");
        assert!(w.consume(5, 4));
        assert!(!w.consume(9, 1));
        assert_eq!(w.outstanding(), 0);
    }

    #[test]
    fn grant_is_capped_by_max_and_never_starves() {
        let mut w = CreditWindow::new(16);
        assert!(w.consume(0, 1));
        assert_eq!(w.grant(1000), 16);
        assert_eq!(w.grant(5), 0);
        assert!(w.consume(1, 16));
        assert_eq!(w.grant(0), 1, "a client with no credits gets one");
    }

    #[test]
    fn overflowing_range_is_refused() {
        let mut w = CreditWindow::new(16);
        assert!(!w.consume(u64::MAX, 2));
    }
}
