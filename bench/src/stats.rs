//! Latency samples and the figures drawn from them: throughput and nearest-rank percentiles.

use std::time::Duration;

use serde::Serialize;

/// Percentiles in hundredths of a percent (so that p99.9 needs no float).
pub const P50: u32 = 5_000;
/// 99th percentile.
pub const P99: u32 = 9_900;
/// 99.9th percentile.
pub const P999: u32 = 9_990;

/// The nearest-rank percentile `p` (hundredths of a percent, 1..=10000) of ascending `sorted`
/// values; 0 for no values.
#[must_use]
pub fn percentile(sorted: &[u32], p: u32) -> u32 {
    if sorted.is_empty() {
        return 0;
    }
    let p = u64::from(p.clamp(1, 10_000));
    let n = sorted.len() as u64;
    // rank = ceil(p/10000 · n), at least 1.
    let rank = (p * n).div_ceil(10_000).max(1);
    let index = usize::try_from(rank - 1).unwrap_or(usize::MAX);
    sorted[index.min(sorted.len() - 1)]
}

/// Latencies (microseconds) and failures of one measured run.
#[derive(Debug, Clone, Default)]
pub struct Samples {
    /// One latency per successful operation, in microseconds.
    pub micros: Vec<u32>,
    /// Failed operations.
    pub errors: u64,
    /// The first failure's message, to say what went wrong.
    pub first_error: Option<String>,
}

impl Samples {
    /// Record a success that took `elapsed`.
    pub fn ok(&mut self, elapsed: Duration) {
        self.micros
            .push(u32::try_from(elapsed.as_micros()).unwrap_or(u32::MAX));
    }

    /// Record a failure.
    pub fn failed(&mut self, error: &anyhow::Error) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(format!("{error:#}"));
        }
    }

    /// Add another worker's samples.
    pub fn merge(&mut self, other: Samples) {
        self.micros.extend(other.micros);
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
    }

    /// The figures, over a measured window of `window`.
    #[must_use]
    pub fn summary(mut self, window: Duration) -> Summary {
        self.micros.sort_unstable();
        let ms = |micros: u32| f64::from(micros) / 1000.0;
        let seconds = window.as_secs_f64();
        let ok = self.micros.len() as u64;
        Summary {
            ok,
            errors: self.errors,
            seconds,
            per_second: if seconds > 0.0 {
                ok as f64 / seconds
            } else {
                0.0
            },
            p50_ms: ms(percentile(&self.micros, P50)),
            p99_ms: ms(percentile(&self.micros, P99)),
            p999_ms: ms(percentile(&self.micros, P999)),
            max_ms: ms(self.micros.last().copied().unwrap_or(0)),
            first_error: self.first_error,
        }
    }
}

/// What one measured run came to.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    /// Successful operations in the window.
    pub ok: u64,
    /// Failed operations.
    pub errors: u64,
    /// The measured window, seconds.
    pub seconds: f64,
    /// Successful operations per second.
    pub per_second: f64,
    /// Median latency, ms.
    pub p50_ms: f64,
    /// 99th percentile latency, ms.
    pub p99_ms: f64,
    /// 99.9th percentile latency, ms.
    pub p999_ms: f64,
    /// Slowest, ms.
    pub max_ms: f64,
    /// The first failure, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let values: Vec<u32> = (1..=1000).collect();
        assert_eq!(percentile(&values, P50), 500);
        assert_eq!(percentile(&values, P99), 990);
        assert_eq!(percentile(&values, P999), 999);
        assert_eq!(percentile(&values, 10_000), 1000);
        assert_eq!(percentile(&[7], P999), 7);
        assert_eq!(percentile(&[], P50), 0);
        // Ten values: p99 and p99.9 are the largest, the median the fifth.
        let ten: Vec<u32> = (1..=10).collect();
        assert_eq!(percentile(&ten, P50), 5);
        assert_eq!(percentile(&ten, P99), 10);
    }

    #[test]
    fn a_summary_counts_rates_and_keeps_the_first_error() {
        let mut a = Samples::default();
        for ms in [3_u64, 1, 2] {
            a.ok(Duration::from_millis(ms));
        }
        let mut b = Samples::default();
        b.failed(&anyhow::anyhow!("first"));
        b.failed(&anyhow::anyhow!("second"));
        a.merge(b);
        let s = a.summary(Duration::from_secs(2));
        assert_eq!((s.ok, s.errors), (3, 2));
        assert!((s.per_second - 1.5).abs() < 1e-9);
        assert!((s.p50_ms - 2.0).abs() < 1e-9);
        assert!((s.max_ms - 3.0).abs() < 1e-9);
        assert_eq!(s.first_error.as_deref(), Some("first"));
    }
}
