// SPDX-License-Identifier: GPL-2.0

//! The mapping authority: where each slab is in the device's file offsets, what a grant may
//! map, and what each page of a mapping shows when it is touched.

use super::{
    DeviceState,
    SLAB_SIZE, //
};
use crate::{
    shim::vma::{
        Fault,
        FaultOutcome, //
    },
    state::{
        slab_values::SLAB_PAGES,
        slots::{
            SlotIndex,
            SLOT_COUNT, //
        },
    },
};
use kernel::{mm::Mm, page::PAGE_SIZE, prelude::*, sync::aref::ARef};

/// How a mapping of a slab may use it; part of the mapping's offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    /// Read-only, for any reader.
    Read,
    /// The owner's window, writable.
    Owner,
}

/// A slab window of the device files' offsets: each slot has a reader's window and, right
/// after it, the owner's, each one slab long, for every device (the same numbers as the
/// original driver's offsets, so one offset names one device's slot anywhere).
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
const WINDOW_BYTES: u64 = SLAB_SIZE as u64;

impl Window {
    /// The window's first page, as a page offset of the device's files. The device index, the
    /// slot and the access are small, so the page is far below any bound.
    pub(crate) fn first_page(self) -> usize {
        let window = (usize::from(self.device) * SLOT_COUNT + self.slot.get()) * 2
            + usize::from(self.access == Access::Owner);
        window * SLAB_PAGES
    }

    /// The window's file offset in bytes.
    pub(crate) fn offset(self) -> u64 {
        // CAST: a `usize` fits in a `u64` on every target the kernel builds Rust for.
        self.first_page() as u64 * PAGE_SIZE as u64
    }

    /// The window that file offset `offset` falls in, and the page of the slab it names;
    /// `None` past the last device there can be.
    pub(crate) fn containing(offset: u64) -> Option<(Self, usize)> {
        let window = offset / WINDOW_BYTES;
        // CAST: below `SLAB_PAGES`.
        let page = (offset % WINDOW_BYTES) as usize / PAGE_SIZE;
        let access = if window % 2 == 1 {
            Access::Owner
        } else {
            Access::Read
        };
        let slab = window / 2;
        // CAST: below `SLOT_COUNT`.
        let slot = SlotIndex::new((slab % SLOT_COUNT as u64) as usize)?;
        let device = u8::try_from(slab / SLOT_COUNT as u64).ok()?;
        Some((
            Self {
                device,
                slot,
                access,
            },
            page,
        ))
    }

    /// The window that starts exactly at `offset`.
    pub(crate) fn at(offset: u64) -> Option<Self> {
        match Self::containing(offset)? {
            (window, 0) if offset % WINDOW_BYTES == 0 => Some(window),
            _ => None,
        }
    }
}

/// Whether `image` is the current task's address space.
fn is_current_image(image: Option<&ARef<Mm>>) -> bool {
    let current = current!().mm().map(|mm| mm.as_raw());
    image.map(|mm| mm.as_raw()) == current
}

impl DeviceState {
    /// Authorizes a new mapping of slot `slot`'s `access` window through a grant for `view`:
    /// the grant's view is still the slot's (not released, nor renewed, since the ACQUIRE), and
    /// the owner's window is the owner's to map. Returns the view the mapping is made for.
    ///
    /// The owner's first mapping from a new address space (after an `execve`: a new image,
    /// maybe with other credentials) starts a new view first, and removes the pages of every
    /// mapping made for the old one: no reader that attached to the old image sees a byte the
    /// new one writes.
    pub(crate) fn authorize_mapping(
        &self,
        slot: SlotIndex,
        access: Access,
        view: u64,
    ) -> Result<u64> {
        let renewed = {
            let mut inner = self.inner.lock();
            let Some(mut owned) = inner.pool.owned_with_view(slot, view) else {
                // Released (and maybe reused), or renewed, since the ACQUIRE.
                return Err(EINVAL);
            };
            if access == Access::Read {
                return Ok(view);
            }
            let owner = owned.owner();
            if !owner.group.is_current() {
                return Err(EPERM);
            }
            if is_current_image(owner.image.as_ref()) {
                return Ok(view);
            }
            owner.image = current!().mm().map(|mm| ARef::from(&**mm));
            owned.renew_view()
        };
        // The same slab goes on: its readers' pages go now, not at a zeroing.
        self.unmap_window(slot, Access::Read);
        self.unmap_window(slot, Access::Owner);
        Ok(renewed)
    }

    /// Counts a new VMA made by `mmap` of slot `slot`'s `access` window: `ENOMEM` if it is a
    /// reader's and the slot has
    /// [`READER_MAPPINGS_PER_SLOT`](crate::state::reader_mappings::READER_MAPPINGS_PER_SLOT) already (the owner's mappings
    /// are its own cost, removed at its own release).
    pub(crate) fn count_mapping(&self, slot: SlotIndex, access: Access) -> Result {
        match access {
            Access::Read => self.reader_mappings.try_add(slot),
            Access::Owner => Ok(()),
        }
    }

    /// Whether a VMA of the window that file offset `offset` is in may be split: `ENOMEM` for a
    /// reader's window at the bound.
    pub(crate) fn may_split_mapping(&self, offset: u64) -> Result {
        match self.reader_window_slot(offset) {
            Some(slot) => self.reader_mappings.may_split(slot),
            None => Ok(()),
        }
    }

    /// A VMA the core copied from one of the window that file offset `offset` is in (a split,
    /// an `mremap` copy) now exists.
    pub(crate) fn mapping_copied(&self, offset: u64) {
        if let Some(slot) = self.reader_window_slot(offset) {
            self.reader_mappings.add_copy(slot);
        }
    }

    /// A VMA of the window that file offset `offset` is in is gone.
    pub(crate) fn mapping_gone(&self, offset: u64) {
        if let Some(slot) = self.reader_window_slot(offset) {
            self.reader_mappings.remove(slot);
        }
    }

    /// The slot whose reader window of this device file offset `offset` is in.
    fn reader_window_slot(&self, offset: u64) -> Option<SlotIndex> {
        match Window::containing(offset)? {
            (window, _) if window.device == self.config.index && window.access == Access::Read => {
                Some(window.slot)
            }
            _ => None,
        }
    }

    /// Removes the pages of every mapping of slot `slot`'s `access` window, in every process;
    /// their next accesses fault into [`DeviceState::fault`].
    pub(super) fn unmap_window(&self, slot: SlotIndex, access: Access) {
        let window = Window {
            device: self.config.index,
            slot,
            access,
        };
        self.mapping.unmap_pages(window.first_page(), SLAB_PAGES);
    }

    /// Answers a fault of a mapping made for view `fault.tag()`: the slab's page while the view
    /// is the slot's; afterwards zeros for a reader's window, `SIGBUS` for the owner's. Decided
    /// and inserted under the device lock, which a release holds to move the view on: no page
    /// of the slab is inserted for an ended view, and the ones inserted before are removed by
    /// the release (the owner's) and by the zeroing (the readers').
    pub(crate) fn fault<'a>(&'a self, fault: &Fault<'a>) -> FaultOutcome {
        let Some((window, page)) = Window::containing(fault.offset()) else {
            return Fault::sigbus();
        };
        if window.device != self.config.index {
            return Fault::sigbus();
        }
        let inner = self.inner.lock();
        if inner.pool.shows(window.slot, fault.tag()) {
            // The whole window at once: an attaching process touches every page of it.
            return fault.insert_around(self.slab(window.slot).pages(), page);
        }
        match (window.access, self.zeros.pages().first()) {
            (Access::Read, Some(zeros)) => fault.insert(zeros),
            _ => Fault::sigbus(),
        }
    }
}

#[kunit_tests(neuron_ds_mapping)]
mod tests {
    use super::*;

    #[test]
    fn window_offsets_name_device_slot_access_and_page() -> Result {
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
            let page = window.offset() + 5 * PAGE_SIZE as u64 + 8;
            assert_eq!(Window::containing(page), Some((window, 5)));
            assert_eq!(Window::at(page), None);
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
        assert_eq!(Window::at(read.offset() + 4096), None);
        Ok(())
    }
}
