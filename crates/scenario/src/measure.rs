//! Round-trip times into an HdrHistogram for the percentiles, and kept in order for
//! comparisons and plots.

use hdrhistogram::Histogram;
use ipc_matrix_results::{LatencyStats, MAX_SAMPLES_KEPT};
use std::time::Duration;

pub struct Recorder {
    histogram: Histogram<u64>,
    samples: Vec<u64>,
}

impl Default for Recorder {
    fn default() -> Self {
        Self::new()
    }
}

impl Recorder {
    pub fn new() -> Self {
        // 1 ns to 1 hour at 3 significant figures; longer round trips saturate at the top.
        let histogram = Histogram::new_with_bounds(1, 3_600_000_000_000, 3)
            .expect("bounds and precision are valid");
        Self {
            histogram,
            samples: Vec::new(),
        }
    }

    pub fn record(&mut self, round_trip: Duration) {
        let ns = (round_trip.as_nanos() as u64).max(1);
        self.histogram.saturating_record(ns);
        if self.samples.len() < MAX_SAMPLES_KEPT {
            self.samples.push(ns);
        }
    }

    pub fn samples(&self) -> &[u64] {
        &self.samples
    }

    pub fn count(&self) -> u64 {
        self.histogram.len()
    }

    pub fn stats(&self) -> Option<LatencyStats> {
        let h = &self.histogram;
        (!h.is_empty()).then(|| LatencyStats {
            count: h.len(),
            min: h.min(),
            p50: h.value_at_quantile(0.50),
            p90: h.value_at_quantile(0.90),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            max: h.max(),
            mean: h.mean(),
            stdev: h.stdev(),
        })
    }
}
