//! Summaries of repeated measurements: min/median/max over repeats, percentiles of latencies.

use serde::Serialize;

/// Min, median and max of a set of repeats, which is how every number's noise is reported.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq)]
pub struct Summary {
    pub min: f64,
    pub median: f64,
    pub max: f64,
    pub n: usize,
}

impl Summary {
    pub fn of(values: &[f64]) -> Self {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return Self::default();
        }
        v.sort_by(f64::total_cmp);
        Self {
            min: v.first().copied().unwrap_or(0.0),
            median: median_sorted(&v),
            max: v.last().copied().unwrap_or(0.0),
            n: v.len(),
        }
    }

    /// Spread as a share of the median: (max - min) / median.
    pub fn spread(&self) -> f64 {
        if self.median > 0.0 {
            (self.max - self.min) / self.median
        } else {
            0.0
        }
    }
}

fn median_sorted(v: &[f64]) -> f64 {
    let n = v.len();
    if n == 0 {
        return 0.0;
    }
    let hi = v.get(n / 2).copied().unwrap_or(0.0);
    if n % 2 == 1 {
        hi
    } else {
        (v.get(n / 2 - 1).copied().unwrap_or(hi) + hi) / 2.0
    }
}

/// The `p`th percentile (0..=100) of sorted values, nearest-rank (what fio reports).
pub fn percentile_sorted<T: Copy + Into<f64>>(sorted: &[T], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    let idx = rank.clamp(1, sorted.len()) - 1;
    sorted.get(idx).copied().map(Into::into).unwrap_or(0.0)
}

/// Ratio of two medians, None when the denominator is missing or zero.
pub fn ratio(num: Option<f64>, den: Option<f64>) -> Option<f64> {
    match (num, den) {
        (Some(n), Some(d)) if d > 0.0 && n.is_finite() => Some(n / d),
        _ => None,
    }
}

/// Inverse of the standard normal CDF (Acklam's rational approximation, relative error below
/// 1.2e-9), for drawing file sizes from a log-normal distribution by quantile.
pub fn normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let p = p.clamp(1e-12, 1.0 - 1e-12);
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < 0.02425 {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - 0.02425 {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_takes_min_median_max() {
        let s = Summary::of(&[3.0, 1.0, 2.0]);
        assert_eq!((s.min, s.median, s.max, s.n), (1.0, 2.0, 3.0, 3));
        let even = Summary::of(&[4.0, 1.0, 2.0, 3.0]);
        assert_eq!(even.median, 2.5);
        assert_eq!(Summary::of(&[]).n, 0);
        assert!((Summary::of(&[90.0, 100.0, 110.0]).spread() - 0.2).abs() < 1e-12);
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<u32> = (1..=100).collect();
        assert_eq!(percentile_sorted(&v, 50.0), 50.0);
        assert_eq!(percentile_sorted(&v, 99.0), 99.0);
        assert_eq!(percentile_sorted(&v, 100.0), 100.0);
        assert_eq!(percentile_sorted(&[7u32], 99.0), 7.0);
        assert_eq!(percentile_sorted::<u32>(&[], 50.0), 0.0);
    }

    #[test]
    fn normal_quantile_matches_known_values() {
        assert!(normal_quantile(0.5).abs() < 1e-9);
        assert!((normal_quantile(0.975) - 1.959_963_985).abs() < 1e-6);
        assert!((normal_quantile(0.01) + 2.326_347_874).abs() < 1e-6);
    }

    #[test]
    fn ratio_needs_both_sides() {
        assert_eq!(ratio(Some(2.0), Some(4.0)), Some(0.5));
        assert_eq!(ratio(Some(2.0), Some(0.0)), None);
        assert_eq!(ratio(None, Some(1.0)), None);
    }
}
