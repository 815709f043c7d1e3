//! A log-bucketed latency histogram (HDR-like): 32 sub-buckets per power of
//! two, so any recorded value is reported within about 3 %; constant memory
//! (2,048 counters) whatever the range; histograms of threads add up.

/// Sub-buckets per power of two, as a shift.
const SUB_BITS: u32 = 5;
const SUB: u64 = 1 << SUB_BITS;
const BUCKETS: usize = (64 - SUB_BITS as usize + 1) * SUB as usize;

/// Counts of values (nanoseconds, or any u64 unit).
#[derive(Clone)]
pub struct Histogram {
    counts: Vec<u64>,
    total: u64,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram::new()
    }
}

fn index_of(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let top = 63 - v.leading_zeros(); // >= SUB_BITS
    let shift = top - SUB_BITS;
    let sub = (v >> shift) & (SUB - 1);
    ((shift as u64 + 1) * SUB + sub) as usize
}

/// The largest value that falls in bucket `i`.
fn upper_of(i: usize) -> u64 {
    let i = i as u64;
    if i < SUB {
        return i;
    }
    let shift = i / SUB - 1;
    let sub = i % SUB;
    let low = (SUB + sub) << shift;
    low.saturating_add((1u64 << shift) - 1)
}

impl Histogram {
    pub fn new() -> Histogram {
        Histogram {
            counts: vec![0; BUCKETS],
            total: 0,
            max: 0,
        }
    }

    pub fn record(&mut self, v: u64) {
        if let Some(c) = self.counts.get_mut(index_of(v)) {
            *c += 1;
        }
        self.total += 1;
        self.max = self.max.max(v);
    }

    pub fn count(&self) -> u64 {
        self.total
    }

    pub fn max(&self) -> u64 {
        self.max
    }

    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.total += other.total;
        self.max = self.max.max(other.max);
    }

    /// The value at quantile `q` (0.0..=1.0): the upper edge of the bucket
    /// holding it, never above the largest value recorded; 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return upper_of(i).min(self.max);
            }
        }
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_lands_in_a_bucket_whose_upper_edge_is_within_3_percent() {
        for v in (0..200_000u64).chain([1 << 40, u64::MAX / 3, u64::MAX]) {
            let i = index_of(v);
            assert!(i < BUCKETS, "{v}");
            let up = upper_of(i);
            assert!(up >= v, "{v} -> {up}");
            assert!((up - v) as f64 <= v as f64 * 0.032 + 1.0, "{v} -> {up}");
        }
    }

    #[test]
    fn quantiles_of_a_uniform_range() {
        let mut h = Histogram::new();
        for v in 1..=10_000u64 {
            h.record(v * 1000);
        }
        let p50 = h.quantile(0.5) as f64;
        let p99 = h.quantile(0.99) as f64;
        assert!((p50 / 5_000_000.0 - 1.0).abs() < 0.04, "{p50}");
        assert!((p99 / 9_900_000.0 - 1.0).abs() < 0.04, "{p99}");
        assert_eq!(h.quantile(1.0), 10_000_000);
    }

    #[test]
    fn merged_histograms_count_both() {
        let mut a = Histogram::new();
        let mut b = Histogram::new();
        a.record(10);
        b.record(1_000_000);
        a.merge(&b);
        assert_eq!(a.count(), 2);
        assert_eq!(a.max(), 1_000_000);
        assert_eq!(Histogram::new().quantile(0.99), 0);
    }
}
