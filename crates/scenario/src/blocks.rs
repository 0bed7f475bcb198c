//! When something timed beside a cell (its floor, its stack's own benchmark setup) runs:
//! in blocks, one just before each tenth (rounded up) of the cell's own measured round
//! trips, so that whatever the machine does over the cell falls on both alike. Two
//! consecutive 1,000-round-trip medians of the same TCP ping-pong differed by up to 30 %
//! on a busy 2-vCPU VM; a measurement timed once before the cell gave ratios from 0.84x
//! to 1.6x for the same cell in consecutive runs.

/// Blocks at most: fewer when the cell has too few round trips for ten.
pub(crate) const BLOCKS: u64 = 10;

/// The blocks of one thing timed beside a cell: when each is due and how many round
/// trips it times, `timed` shared out evenly over them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Schedule {
    /// The cell's measured round trips between two blocks.
    every: u64,
    planned: u64,
    timed: u64,
    /// Blocks run so far.
    ran: u64,
}

impl Schedule {
    /// For a cell of `iterations` measured round trips, timing `timed` round trips in all.
    pub(crate) fn new(iterations: u64, timed: u64) -> Self {
        let every = iterations.div_ceil(BLOCKS).max(1);
        Self {
            every,
            planned: iterations.div_ceil(every).max(1),
            timed,
            ran: 0,
        }
    }

    /// The round trips of the block due before the cell's measured round trip `measured`
    /// (counted from 0), when one is due, `so_far` having been timed already.
    pub(crate) fn due(&self, measured: u64, so_far: u64) -> Option<u64> {
        if !measured.is_multiple_of(self.every) || self.ran >= self.planned {
            return None;
        }
        let left = self.timed.saturating_sub(so_far);
        Some(left.div_ceil(self.planned - self.ran).max(1))
    }

    /// True before the first block has run.
    pub(crate) fn first(&self) -> bool {
        self.ran == 0
    }

    pub(crate) fn ran_one(&mut self) {
        self.ran += 1;
    }

    pub(crate) fn blocks_run(&self) -> u64 {
        self.ran
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks come before every tenth of the cell's round trips and time what was asked
    /// for in all, shared out evenly; a short cell has fewer blocks.
    #[test]
    fn blocks_share_out_the_round_trips_before_each_tenth_of_the_cell() {
        for (iterations, timed, blocks) in [(1000, 1000, 10), (1000, 7, 10), (3, 30, 3), (1, 5, 1)]
        {
            let mut schedule = Schedule::new(iterations, timed);
            let mut so_far = 0;
            let mut at = Vec::new();
            for measured in 0..iterations {
                if let Some(n) = schedule.due(measured, so_far) {
                    so_far += n;
                    at.push(measured);
                    schedule.ran_one();
                }
            }
            assert_eq!(schedule.blocks_run(), blocks, "{iterations} {timed}");
            assert_eq!(so_far, timed.max(blocks), "{iterations} {timed}");
            let every = iterations.div_ceil(BLOCKS);
            assert!(at.iter().all(|m| m % every == 0), "{at:?}");
        }
    }
}
