// SPDX-License-Identifier: GPL-2.0

//! Where a device's slab windows are in its files' offsets: the window offsets ACQUIRE hands
//! out, and the place each view of a window is moved to when it is mapped.
//!
//! Each slot has a reader's window and, right after it, the owner's, one slab long each, for
//! every device: the original driver's offsets, so that one offset names one device's slot
//! anywhere. A caller maps a window at that offset; the mapping is then moved to the place of
//! the view it is made for ([`Placement`]): every view of every window has a range of offsets
//! of its own, above every window offset. Removing the pages of one view's mappings
//! (`unmap_mapping_pages` of its range) then visits only that view's mappings, never those
//! that processes keep of views that ended, however many they keep: the cost of ending a view
//! is bounded by the mappings counted for it (`state::view_mappings`), and a view's count
//! starts from zero.

use crate::state::{
    slab_values::SLAB_PAGES,
    slots::{
        SlotIndex,
        SLOT_COUNT, //
    },
};
use kernel::page::PAGE_SIZE;

/// How a mapping of a slab may use it; part of the mapping's offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    /// Read-only, for any reader.
    Read,
    /// The owner's window, writable.
    Owner,
}

impl Access {
    /// Both kinds, reader's first.
    pub(crate) const ALL: [Self; 2] = [Self::Read, Self::Owner];

    /// 0 for the reader's window, 1 for the owner's: its place among a slot's windows.
    pub(crate) fn index(self) -> usize {
        usize::from(self == Self::Owner)
    }
}

/// A slab window of the device files' offsets, as ACQUIRE hands it out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Window {
    /// The device index.
    pub(crate) device: u8,
    /// The slot.
    pub(crate) slot: SlotIndex,
    /// Whose window.
    pub(crate) access: Access,
}

/// Bytes per window, as a file offset.
const WINDOW_BYTES: u64 = (SLAB_PAGES * PAGE_SIZE) as u64;

/// Windows of one device: a reader's and an owner's per slot.
const DEVICE_WINDOWS: usize = SLOT_COUNT * 2;

impl Window {
    /// The window's first page, as a page offset of the device's files. The device index, the
    /// slot and the access are small, so the page is far below any bound.
    pub(crate) fn first_page(self) -> usize {
        let window = usize::from(self.device) * DEVICE_WINDOWS + self.index_in_device();
        window * SLAB_PAGES
    }

    /// The window's place among its device's windows.
    fn index_in_device(self) -> usize {
        self.slot.get() * 2 + self.access.index()
    }

    /// The window's file offset in bytes.
    pub(crate) fn offset(self) -> u64 {
        // CAST: a `usize` fits in a `u64` on every target the kernel builds Rust for.
        self.first_page() as u64 * PAGE_SIZE as u64
    }

    /// The window that starts exactly at file offset `offset`; `None` for any other offset,
    /// and past the last device there can be.
    pub(crate) fn at(offset: u64) -> Option<Self> {
        if offset % WINDOW_BYTES != 0 {
            return None;
        }
        let window = offset / WINDOW_BYTES;
        let access = if window % 2 == 1 {
            Access::Owner
        } else {
            Access::Read
        };
        let slab = window / 2;
        // CAST: below `SLOT_COUNT`.
        let slot = SlotIndex::new((slab % SLOT_COUNT as u64) as usize)?;
        let device = u8::try_from(slab / SLOT_COUNT as u64).ok()?;
        Some(Self {
            device,
            slot,
            access,
        })
    }
}

/// The first page of the views' places: above every window's offset (at most 256 devices of 32
/// windows of 64 pages, 2^19 pages), so that no window offset is a view's place, and the place
/// of a view can only be reached by mapping its window.
const PLACES_FIRST_PAGE: usize = 1 << 32;

/// Views that have places of their own: a view's place is that of its number modulo this. Two
/// views this far apart share a place, which costs only time (the later one's end visits the
/// earlier one's kept mappings), never a byte: a mapping shows a page only while the view it
/// was made for, by its full number, is the slot's. The last place ends below page 2^44 (a
/// byte offset below 2^56, inside `loff_t`).
const PLACED_VIEWS: u64 = 1 << 32;

/// Where the mappings of one view of a window are moved: a range of the device's file offsets
/// that no other view's window has (but one [`PLACED_VIEWS`] away).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Placement {
    /// The slot.
    pub(crate) slot: SlotIndex,
    /// Whose window.
    pub(crate) access: Access,
    /// The view, modulo [`PLACED_VIEWS`].
    place: u64,
}

impl Placement {
    /// The place of view `view` of `slot`'s `access` window.
    pub(crate) fn of(slot: SlotIndex, access: Access, view: u64) -> Self {
        Self {
            slot,
            access,
            place: view % PLACED_VIEWS,
        }
    }

    /// The place's first page, as a page offset of the device's files.
    pub(crate) fn first_page(self) -> usize {
        // CAST: below `PLACED_VIEWS`, 2^32, which fits a `usize` on every 64-bit target (the
        // only ones the module builds for: `state::windows` uses page offsets up to 2^44).
        let place = self.place as usize;
        let window = self.slot.get() * 2 + self.access.index();
        PLACES_FIRST_PAGE + (place * DEVICE_WINDOWS + window) * SLAB_PAGES
    }

    /// The place that page offset `page` is in, and the page of the slab it names; `None`
    /// below the first place.
    pub(crate) fn containing(page: usize) -> Option<(Self, usize)> {
        let placed = page.checked_sub(PLACES_FIRST_PAGE)?;
        let window = placed / SLAB_PAGES;
        let access = if window % 2 == 1 {
            Access::Owner
        } else {
            Access::Read
        };
        let slot = SlotIndex::new((window / 2) % SLOT_COUNT)?;
        // CAST: `usize` fits a `u64`.
        let place = (window / DEVICE_WINDOWS) as u64;
        if place >= PLACED_VIEWS {
            return None;
        }
        Some((
            Self {
                slot,
                access,
                place,
            },
            placed % SLAB_PAGES,
        ))
    }

    /// Whether this is the place of view `view`.
    pub(crate) fn is_of(self, view: u64) -> bool {
        self.place == view % PLACED_VIEWS
    }
}

const _: () = assert!(usize::BITS == 64);

#[cfg(neuron_ds_kunit)]
#[kernel::prelude::kunit_tests(neuron_ds_windows)]
mod tests {
    use super::*;
    use kernel::prelude::*;

    #[test]
    fn window_offsets_name_device_slot_and_access() -> Result {
        let last = SlotIndex::new(SLOT_COUNT - 1).ok_or(EINVAL)?;
        let first = SlotIndex::new(0).ok_or(EINVAL)?;
        for window in [
            Window {
                device: 0,
                slot: first,
                access: Access::Read,
            },
            Window {
                device: 3,
                slot: last,
                access: Access::Owner,
            },
        ] {
            assert_eq!(Window::at(window.offset()), Some(window));
            assert_eq!(Window::at(window.offset() + PAGE_SIZE as u64), None);
        }
        let slot = SlotIndex::new(2).ok_or(EINVAL)?;
        let read = Window {
            device: 1,
            slot,
            access: Access::Read,
        };
        let owner = Window {
            access: Access::Owner,
            ..read
        };
        assert_eq!(owner.offset(), read.offset() + WINDOW_BYTES);
        Ok(())
    }

    #[test]
    fn each_view_of_each_window_has_a_place_above_every_window() -> Result {
        let slot = SlotIndex::new(5).ok_or(EINVAL)?;
        let last_window = Window {
            device: u8::MAX,
            slot: SlotIndex::new(SLOT_COUNT - 1).ok_or(EINVAL)?,
            access: Access::Owner,
        };
        let reader = Placement::of(slot, Access::Read, 7);
        let owner = Placement::of(slot, Access::Owner, 7);
        let next = Placement::of(slot, Access::Read, 8);
        assert!(reader.first_page() >= last_window.first_page() + SLAB_PAGES);
        // Three places, none overlapping another.
        let firsts = [reader.first_page(), owner.first_page(), next.first_page()];
        for (a, first) in firsts.iter().enumerate() {
            for second in &firsts[a + 1..] {
                assert!(first.abs_diff(*second) >= SLAB_PAGES);
            }
        }
        // Every page of a place names it back, with the page of the slab.
        for (placement, page) in [(reader, 0), (owner, 63), (next, 17)] {
            assert_eq!(
                Placement::containing(placement.first_page() + page),
                Some((placement, page))
            );
        }
        assert!(reader.is_of(7) && reader.is_of(7 + PLACED_VIEWS) && !reader.is_of(8));
        // No window offset is a place, and the last place is far inside the offsets.
        assert_eq!(Placement::containing(last_window.first_page()), None);
        let last = Placement::of(slot, Access::Owner, PLACED_VIEWS - 1);
        assert!(last.first_page() + SLAB_PAGES < 1 << 44);
        Ok(())
    }
}
