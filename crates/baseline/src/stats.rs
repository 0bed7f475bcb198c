//! The statistics behind a verdict, on small samples of batch medians.
//!
//! Round trips are not independent (a busy host slows a stretch of them), so a run is cut
//! into consecutive batches and each batch contributes its median; the batch medians are
//! the samples compared. Two tests are combined:
//! - the Mann-Whitney U test (Mann & Whitney, 1947; normal approximation with the tie
//!   correction of Lehmann, "Nonparametrics", 1975, sec. 1.4), which asks whether one
//!   sample tends to be larger than the other without assuming a distribution;
//! - a percentile bootstrap interval for the ratio of the two medians (Efron & Tibshirani,
//!   "An Introduction to the Bootstrap", 1993, ch. 13), which says how large the change is
//!   and how sure we are of it.

/// Batches a run is cut into for comparison (fewer when there are fewer round trips).
pub const TARGET_BATCHES: usize = 30;
use ipc_matrix_spec::splitmix64;

/// Bootstrap resamples; enough for stable 2.5 % and 97.5 % quantiles.
pub const BOOTSTRAP_RESAMPLES: usize = 2000;

/// The median of each run of `batch_size(len)` consecutive samples; a short tail joins
/// the last batch rather than forming a noisy batch of its own.
pub fn batch_medians(samples: &[u64]) -> Vec<u64> {
    let size = batch_size(samples.len());
    if samples.is_empty() {
        return Vec::new();
    }
    let full = samples.len() / size;
    (0..full)
        .map(|i| {
            let end = if i + 1 == full {
                samples.len()
            } else {
                (i + 1) * size
            };
            median(&samples[i * size..end])
        })
        .collect()
}

pub fn batch_size(samples: usize) -> usize {
    (samples / TARGET_BATCHES).max(1)
}

/// The median (the mean of the middle two for an even count); 0 for no samples.
pub fn median(samples: &[u64]) -> u64 {
    if samples.is_empty() {
        return 0;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let mid = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        // Halves first: the sum of two large u64 values could overflow.
        sorted[mid - 1] / 2 + sorted[mid] / 2 + (sorted[mid - 1] % 2 + sorted[mid] % 2) / 2
    }
}

/// The `q` quantile (0..=1) of sorted values, by linear interpolation between ranks.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let (low, high) = (rank.floor() as usize, rank.ceil() as usize);
    sorted[low] + (sorted[high] - sorted[low]) * (rank - low as f64)
}

/// The interquartile range relative to the median: how spread a sample is, robust to the
/// odd outlier a preempted batch produces.
pub fn relative_spread(samples: &[u64]) -> f64 {
    let mut sorted: Vec<f64> = samples.iter().map(|&v| v as f64).collect();
    sorted.sort_by(f64::total_cmp);
    let middle = quantile(&sorted, 0.5);
    if middle <= 0.0 {
        return 0.0;
    }
    (quantile(&sorted, 0.75) - quantile(&sorted, 0.25)) / middle
}

/// Two-sided p-value of the Mann-Whitney U test that `a` and `b` come from the same
/// distribution. Ties get mid-ranks and the variance its tie correction.
pub fn mann_whitney_p(a: &[u64], b: &[u64]) -> f64 {
    let (n1, n2) = (a.len() as f64, b.len() as f64);
    if a.is_empty() || b.is_empty() {
        return 1.0;
    }
    let mut all: Vec<(u64, bool)> = a
        .iter()
        .map(|&v| (v, true))
        .chain(b.iter().map(|&v| (v, false)))
        .collect();
    all.sort_unstable_by_key(|&(v, _)| v);
    let n = all.len() as f64;
    let mut rank_sum_a = 0.0;
    let mut tie_term = 0.0;
    let mut i = 0;
    while i < all.len() {
        let mut j = i;
        while j < all.len() && all[j].0 == all[i].0 {
            j += 1;
        }
        // Ranks i+1 ..= j share their mean.
        let mid_rank = (i + 1 + j) as f64 / 2.0;
        let ties = (j - i) as f64;
        tie_term += ties * ties * ties - ties;
        rank_sum_a += mid_rank * all[i..j].iter().filter(|(_, in_a)| *in_a).count() as f64;
        i = j;
    }
    let u = rank_sum_a - n1 * (n1 + 1.0) / 2.0;
    let mean = n1 * n2 / 2.0;
    let variance = n1 * n2 / 12.0 * ((n + 1.0) - tie_term / (n * (n - 1.0)));
    if variance <= 0.0 {
        return 1.0; // every value equal: no evidence of a difference
    }
    // Continuity correction: U moves in steps of 1.
    let z = ((u - mean).abs() - 0.5).max(0.0) / variance.sqrt();
    if z == 0.0 {
        return 1.0;
    }
    erfc(z / std::f64::consts::SQRT_2).min(1.0)
}

/// The complementary error function, by Abramowitz & Stegun 7.1.26 (error < 1.5e-7,
/// plenty for a p-value compared with 0.01).
fn erfc(x: f64) -> f64 {
    let t = 1.0 / (1.0 + 0.327_591_1 * x.abs());
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let tail = poly * (-x * x).exp();
    if x >= 0.0 {
        tail
    } else {
        2.0 - tail
    }
}

/// A 95 % percentile-bootstrap interval for median(current) / median(baseline). The
/// resampling is seeded, so the same inputs always give the same interval (and reports
/// rendered from fixed inputs are byte-identical).
pub fn bootstrap_ratio_interval(baseline: &[u64], current: &[u64], seed: u64) -> (f64, f64) {
    if baseline.is_empty() || current.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let mut state = seed;
    let mut resample = |from: &[u64], into: &mut Vec<u64>| {
        into.clear();
        into.extend(
            (0..from.len()).map(|_| from[(splitmix64(&mut state) % from.len() as u64) as usize]),
        );
        median(into) as f64
    };
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let mut ratios: Vec<f64> = (0..BOOTSTRAP_RESAMPLES)
        .map(|_| {
            let base = resample(baseline, &mut a).max(1.0);
            resample(current, &mut b) / base
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    (quantile(&ratios, 0.025), quantile(&ratios, 0.975))
}

/// FNV-1a, to seed a cell's bootstrap from its id.
pub fn seed_of(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[5, 1, 3]), 3);
        assert_eq!(median(&[4, 1, 3, 2]), 2); // (2 + 3) / 2 rounded down
        assert_eq!(median(&[u64::MAX, u64::MAX]), u64::MAX);
        assert_eq!(median(&[]), 0);
    }

    #[test]
    fn median_of_two_odd_middles_and_of_the_largest_values() {
        assert_eq!(median(&[1, 3]), 2);
        assert_eq!(median(&[5, 3]), 4);
        assert_eq!(median(&[2, 3]), 2);
        assert_eq!(median(&[u64::MAX - 1, u64::MAX]), u64::MAX - 1);
        assert_eq!(median(&[9]), 9);
    }

    #[test]
    fn batches_cover_every_sample_and_fold_the_tail_in() {
        let samples: Vec<u64> = (0..95).collect();
        let medians = batch_medians(&samples);
        assert_eq!(batch_size(95), 3);
        // Batches of 3: [0, 1, 2] -> 1, [3, 4, 5] -> 4, ...; the last holds 90..95 -> 92.
        let mut expected: Vec<u64> = (0..30).map(|i| 3 * i + 1).collect();
        expected.push(92);
        assert_eq!(medians, expected);
        assert_eq!(batch_medians(&[7, 9]), vec![7, 9]);
        assert_eq!(batch_medians(&[]), Vec::<u64>::new());
        assert_eq!(batch_size(0), 1);
        assert_eq!(batch_size(59), 1);
        assert_eq!(batch_size(60), 2);
        assert_eq!(batch_size(3000), 100);
    }

    #[test]
    fn quantiles_interpolate_between_ranks() {
        let sorted = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile(&sorted, 0.0), 1.0);
        assert_eq!(quantile(&sorted, 0.25), 1.75);
        assert_eq!(quantile(&sorted, 0.5), 2.5);
        assert_eq!(quantile(&sorted, 1.0), 4.0);
        // Outside 0..=1: the ends.
        assert_eq!(quantile(&sorted, 1.5), 4.0);
        assert_eq!(quantile(&sorted, -1.0), 1.0);
        assert_eq!(quantile(&[7.0], 0.3), 7.0);
        assert!(quantile(&[], 0.5).is_nan());
    }

    #[test]
    fn relative_spread_is_the_interquartile_range_over_the_median() {
        // Quartiles 20 and 40, median 30.
        let spread = relative_spread(&[50, 10, 40, 20, 30]);
        assert!((spread - 20.0 / 30.0).abs() < 1e-12, "{spread}");
        assert_eq!(relative_spread(&[0, 0, 0]), 0.0);
        assert_eq!(relative_spread(&[0, 0, 9]), 0.0);
    }

    #[test]
    fn an_empty_sample_gives_no_evidence_and_no_interval() {
        assert_eq!(mann_whitney_p(&[], &[1, 2, 3]), 1.0);
        assert_eq!(mann_whitney_p(&[1, 2, 3], &[]), 1.0);
        let (low, high) = bootstrap_ratio_interval(&[], &[1, 2, 3], 7);
        assert!(low.is_nan() && high.is_nan());
        let (low, high) = bootstrap_ratio_interval(&[1, 2, 3], &[], 7);
        assert!(low.is_nan() && high.is_nan());
    }

    #[test]
    fn seeds_are_fnv1a_of_the_cell_id() {
        // The FNV-1a 64-bit offset basis, and its published value for "a".
        assert_eq!(seed_of(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(seed_of("a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(seed_of("echo::tcp::200B"), 0xc0d9_e8f7_0aab_00bf);
    }

    #[test]
    fn mann_whitney_matches_a_hand_computed_case() {
        // a = 1..=10, b = 11..=20: U = 0, mean 50, variance 10*10*21/12 = 175,
        // z = (50 - 0.5) / sqrt(175) = 3.7418, two-sided p = 1.827e-4.
        let a: Vec<u64> = (1..=10).collect();
        let b: Vec<u64> = (11..=20).collect();
        let p = mann_whitney_p(&a, &b);
        assert!((p - 1.827e-4).abs() < 2e-6, "p = {p}");
        // Identical samples: no evidence at all.
        assert_eq!(mann_whitney_p(&a, &a), 1.0);
        assert_eq!(mann_whitney_p(&[5, 5, 5], &[5, 5]), 1.0);
    }

    #[test]
    fn mann_whitney_corrects_the_variance_for_ties() {
        // a: 10 x3, 20 x4, 30 x2; b: 20 x2, 30 x4, 40 x2 (n1 = 9, n2 = 8, n = 17).
        // Mid-ranks: 10 -> 2 (ranks 1-3), 20 -> 6.5 (4-9), 30 -> 12.5 (10-15), 40 -> 16.5.
        // R1 = 3 * 2 + 4 * 6.5 + 2 * 12.5 = 57, U = 57 - 9 * 10 / 2 = 12, mean 36.
        // Ties: sum(t^3 - t) = 24 + 210 + 210 + 6 = 450; variance
        // 9 * 8 / 12 * (18 - 450 / (17 * 16)) = 98.0735294; z = (24 - 0.5) / 9.9032080
        // = 2.3729684; p = erfc(z / sqrt 2) = 0.0176457722. scipy 1.10.1,
        // mannwhitneyu(a, b, use_continuity=True, alternative="two-sided",
        // method="asymptotic"), gives 0.01764577220567675. Without the correction
        // (variance 108) p would be 0.0237414.
        let a = [10, 10, 10, 20, 20, 20, 20, 30, 30];
        let b = [20, 20, 30, 30, 30, 30, 40, 40];
        for p in [mann_whitney_p(&a, &b), mann_whitney_p(&b, &a)] {
            assert!((p - 0.017_645_772_2).abs() < 1e-6, "p = {p}");
        }
    }

    #[test]
    fn erfc_matches_reference_values() {
        for (x, expected) in [
            (0.0, 1.0),
            (0.5, 0.479_500_122),
            (1.0, 0.157_299_207),
            (2.0, 0.004_677_735),
            (-0.5, 1.520_499_878),
            (-2.0, 1.995_322_265),
        ] {
            assert!((erfc(x) - expected).abs() < 2e-7, "erfc({x})");
        }
    }

    #[test]
    fn bootstrap_interval_brackets_a_doubling() {
        let baseline: Vec<u64> = (0..30).map(|i| 1000 + (i * 37) % 50).collect();
        let doubled: Vec<u64> = baseline.iter().map(|v| v * 2).collect();
        let (low, high) = bootstrap_ratio_interval(&baseline, &doubled, 7);
        assert!(low > 1.9 && high < 2.1, "[{low}, {high}]");
        let (low, high) = bootstrap_ratio_interval(&baseline, &baseline, 7);
        assert!(
            low < 1.0 && high > 1.0 || (low == 1.0 && high == 1.0),
            "[{low}, {high}]"
        );
        // Seeded: the same inputs give the same interval.
        assert_eq!(
            bootstrap_ratio_interval(&baseline, &doubled, 7),
            bootstrap_ratio_interval(&baseline, &doubled, 7)
        );
    }
}
