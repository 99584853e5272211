// SPDX-License-Identifier: GPL-2.0

//! Indexes that can only name one of `N` things of one kind, and one value per thing.
//!
//! An index is checked once, where it comes from outside (an `mmap` offset, a parameter), and
//! never again: indexing a [`PerIndex`] with a [`BoundedIndex`] cannot fail, and the compiler
//! can see that it cannot (the index is reduced modulo `N`, a no-op it folds into the bound),
//! so no dead bounds check or "cannot happen" error path is left behind. The `Kind` parameter
//! keeps indexes of different things (a device's slots, its cores) apart even when `N` is the
//! same.

use core::{
    fmt,
    marker::PhantomData,
    ops::{
        Index,
        IndexMut, //
    },
};
use kernel::prelude::*;

/// One of `N` things of kind `Kind`.
///
/// # Invariants
///
/// The index is below `N`, and `N` is at most 256.
pub(crate) struct BoundedIndex<const N: usize, Kind>(u8, PhantomData<Kind>);

impl<const N: usize, Kind> BoundedIndex<N, Kind> {
    /// Evaluated by every constructor: an index must fit its `u8`.
    const FITS: () = assert!(N > 0 && N <= 1 << 8);

    /// Index `index`, if it is below `N`.
    pub(crate) const fn new(index: usize) -> Option<Self> {
        if index < N {
            Some(Self::reduced(index))
        } else {
            None
        }
    }

    /// Index `index % N`.
    const fn reduced(index: usize) -> Self {
        let () = Self::FITS;
        // INVARIANT: reduced below `N`, which is at most 256, so the value fits the `u8`.
        // CAST: below 256.
        Self((index % N) as u8, PhantomData)
    }

    /// The first `count` indexes (every one, if `count` is `N` or more), in order.
    pub(crate) fn first(count: usize) -> impl Iterator<Item = Self> {
        (0..count.min(N)).map(|index| Self::reduced(index))
    }

    /// Every index, in order.
    pub(crate) fn all() -> impl Iterator<Item = Self> {
        Self::first(N)
    }

    /// The index as a number below `N`.
    pub(crate) fn get(self) -> usize {
        // The modulo changes nothing (type invariant); it tells the compiler the bound.
        usize::from(self.0) % N
    }
}

// By hand: derived impls would ask the same of `Kind`, which is only a marker.
impl<const N: usize, Kind> Clone for BoundedIndex<N, Kind> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<const N: usize, Kind> Copy for BoundedIndex<N, Kind> {}

impl<const N: usize, Kind> PartialEq for BoundedIndex<N, Kind> {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl<const N: usize, Kind> Eq for BoundedIndex<N, Kind> {}

impl<const N: usize, Kind> fmt::Debug for BoundedIndex<N, Kind> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// One `T` per index of kind `Kind`.
pub(crate) struct PerIndex<T, const N: usize, Kind> {
    items: [T; N],
    kind: PhantomData<Kind>,
}

impl<T, const N: usize, Kind> PerIndex<T, N, Kind> {
    /// `make(index)` for every index.
    pub(crate) fn from_fn(mut make: impl FnMut(BoundedIndex<N, Kind>) -> T) -> Self {
        Self {
            items: core::array::from_fn(|index| make(BoundedIndex::reduced(index))),
            kind: PhantomData,
        }
    }

    /// Initializes one `T` per index with `make(index)`, in place; stops at the first error,
    /// dropping what was made.
    pub(crate) fn try_init(
        mut make: impl FnMut(BoundedIndex<N, Kind>) -> Result<T>,
    ) -> impl Init<Self, Error> {
        try_init!(Self {
            items <- pin_init::init_array_from_fn(move |index| make(BoundedIndex::reduced(index))),
            kind: PhantomData,
        })
    }

    /// Every index with its value.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (BoundedIndex<N, Kind>, &T)> {
        BoundedIndex::all().zip(self.items.iter())
    }

    /// Every index with its value, to change.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (BoundedIndex<N, Kind>, &mut T)> {
        BoundedIndex::all().zip(self.items.iter_mut())
    }
}

impl<T, const N: usize, Kind> Index<BoundedIndex<N, Kind>> for PerIndex<T, N, Kind> {
    type Output = T;

    fn index(&self, index: BoundedIndex<N, Kind>) -> &T {
        // PANIC: never, `index.get()` is below `N`, the array's length.
        &self.items[index.get()]
    }
}

impl<T, const N: usize, Kind> IndexMut<BoundedIndex<N, Kind>> for PerIndex<T, N, Kind> {
    fn index_mut(&mut self, index: BoundedIndex<N, Kind>) -> &mut T {
        // PANIC: as in `index`.
        &mut self.items[index.get()]
    }
}

#[cfg(neuron_ds_kunit)]
#[kunit_tests(neuron_ds_bounded_index)]
mod tests {
    use super::*;

    /// Indexes of a kind with an odd count, which no mask could bound.
    enum Things {}
    type Thing = BoundedIndex<5, Things>;

    #[test]
    fn only_indexes_below_the_count_exist() {
        assert_eq!(Thing::new(0).map(Thing::get), Some(0));
        assert_eq!(Thing::new(4).map(Thing::get), Some(4));
        assert_eq!(Thing::new(5), None);
        assert_eq!(Thing::new(usize::MAX), None);
        assert_eq!(Thing::all().count(), 5);
        assert_eq!(Thing::first(3).map(Thing::get).last(), Some(2));
        assert_eq!(Thing::first(9).count(), 5);
        assert_eq!(Thing::first(0).count(), 0);
    }

    #[test]
    fn values_are_made_and_found_by_their_index() -> Result {
        let mut values = PerIndex::<usize, 5, Things>::from_fn(|thing| thing.get() * 10);
        for (thing, value) in values.iter() {
            assert_eq!(*value, thing.get() * 10);
        }
        let last = Thing::new(4).ok_or(EINVAL)?;
        values[last] = 7;
        assert_eq!(values[last], 7);
        let boxed = KBox::init(
            PerIndex::<usize, 5, Things>::try_init(|thing| Ok(thing.get() + 1)),
            GFP_KERNEL,
        )?;
        assert_eq!(boxed[last], 5);
        let failed =
            KBox::init(
                PerIndex::<u8, 5, Things>::try_init(|thing| {
                    if thing.get() == 3 {
                        Err(ENOSPC)
                    } else {
                        Ok(0)
                    }
                }),
                GFP_KERNEL,
            );
        assert_eq!(failed.err(), Some(ENOSPC));
        Ok(())
    }
}
