//! One sort for the whole crate. Every `slice::sort_by` (and every `collect()` into a
//! `BTreeMap`, which sorts first) on its own element type compiles its own copy of the
//! standard library's sort — 3–5 KB of the Worker's module apiece, eight of them at one
//! count (docs/size.md). [`sort_by`] sorts the elements' positions instead, through one
//! `[usize]::sort_by` that every caller shares, and then moves the elements into that order:
//! the same stable order `v.sort_by(cmp)` gives, at the cost of a dynamic call a comparison,
//! which is nothing for the few dozen elements these sorts see.

use std::cmp::Ordering;

/// Sorts `v` by `cmp`, stably: equal elements keep their order, as with `slice::sort_by`.
pub fn sort_by<T>(v: &mut Vec<T>, mut cmp: impl FnMut(&T, &T) -> Ordering) {
    if v.len() < 2 {
        return;
    }
    let mut order: Vec<usize> = (0..v.len()).collect();
    let items = &*v;
    positions(&mut order, &mut |a, b| cmp(&items[a], &items[b]));
    let mut slots: Vec<Option<T>> = v.drain(..).map(Some).collect();
    v.extend(order.iter().filter_map(|&i| slots[i].take()));
}

/// Sorts `v` by `key`, stably (as `slice::sort_by_key`).
pub fn sort_by_key<T, K: Ord>(v: &mut Vec<T>, mut key: impl FnMut(&T) -> K) {
    sort_by(v, |a, b| key(a).cmp(&key(b)));
}

/// The one instance of the standard sort: positions, ordered by what they point at. A stable
/// sort of `0..n` by the elements leaves equal elements' positions in their first order.
#[inline(never)]
fn positions(order: &mut [usize], cmp: &mut dyn FnMut(usize, usize) -> Ordering) {
    order.sort_by(|&a, &b| cmp(a, b));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_as_the_standard_stable_sort_does() {
        // Pairs sorted by their first half only: the second half shows the order of ties.
        let mut seed = 0x9e37_79b9_u32;
        for len in [0, 1, 2, 3, 7, 20, 21, 64, 300] {
            let v: Vec<(u8, u32)> = (0..len)
                .map(|i| {
                    seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                    ((seed >> 24) as u8 % 5, i)
                })
                .collect();
            let mut want = v.clone();
            want.sort_by_key(|a| a.0);
            let mut got = v.clone();
            sort_by(&mut got, |a, b| a.0.cmp(&b.0));
            assert_eq!(got, want, "len {len}");
            let mut want = v.clone();
            want.sort_by_key(|p| std::cmp::Reverse(p.0));
            let mut got = v;
            sort_by_key(&mut got, |p| std::cmp::Reverse(p.0));
            assert_eq!(got, want, "len {len}, by key");
        }
    }
}
