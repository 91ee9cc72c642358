//! When answers are normal again after an incident — the rule `understudy drill` judges a
//! recovery by, and the replay measures each column with, so the two read alike.

/// Share of live answers that counts as normal again. Not 100%: on the healthy path an
/// isolated call can still miss the deadline (a scheduler stall, a GC pause) and be answered
/// from the cascade — disclosed, and no sign that the incident goes on.
pub const NORMAL_LIVE_SHARE: f64 = 0.99;

/// A share is judged on at least this many answers: fewer later answers than this (the end of
/// a run, or one isolate's thin share of it) may still hold one miss. Without it one stray
/// deadline miss among an isolate's last 50 answers read as "1 in 50 degraded, not normal" and
/// moved its recovery past the miss (`drill --isolates 8`: a 58.8 ms answer 5.5 s after
/// the fault's end, the breaker healthy since 4.1 s).
pub const NORMAL_MIN_SAMPLE: usize = 100;

/// Fewer later answers than this are too few to judge at all: the last answers of a run that
/// alternate live and degraded are not "normal from the last live one on".
pub const NORMAL_MIN_JUDGED: usize = 20;

/// Whether `live` of `len` answers is normal: at least [`NORMAL_MIN_JUDGED`] answers, of which
/// at most 1 − [`NORMAL_LIVE_SHARE`] missed, the share taken of at least [`NORMAL_MIN_SAMPLE`].
pub fn normal(live: usize, len: usize) -> bool {
    if len < NORMAL_MIN_JUDGED {
        return false;
    }
    let misses = len - live;
    let allowed = ((1.0 - NORMAL_LIVE_SHARE) * len.max(NORMAL_MIN_SAMPLE) as f64 + 1e-9).floor();
    misses as f64 <= allowed
}

/// The earliest answer, of `answers` (its instant and whether it was live, in arrival
/// order), that is live and from which every later answer is [`normal`].
pub fn normal_from(answers: &[(u64, bool)]) -> Option<u64> {
    let mut live_suffix = 0usize;
    let mut at = None;
    for (n, (t, live)) in answers.iter().enumerate().rev() {
        if *live {
            live_suffix += 1;
            if normal(live_suffix, answers.len() - n) {
                at = Some(*t);
            }
        }
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_allows_one_miss_in_a_hundred_and_needs_twenty_answers() {
        assert!(normal(99, 100));
        assert!(!normal(98, 100));
        assert!(normal(49, 50), "the share is taken of at least 100");
        assert!(!normal(19, 19));
        let mut answers: Vec<(u64, bool)> = (0..10).map(|t| (t, false)).collect();
        answers.extend((10..200).map(|t| (t, true)));
        assert_eq!(normal_from(&answers), Some(10));
        assert_eq!(normal_from(&answers[..15]), None);
    }
}
