// SPDX-License-Identifier: GPL-2.0

//! Reads a NeuronCore counter out of a slab through the three-band layout of the wire format.

use crate::{
    abi::layout::nc_counter_offset,
    edge::SlabMemory, //
};
use kernel::{
    pr_warn_once,
    prelude::*, //
};

/// Counter `index` of NeuronCore `core` in `slab`, read with one atomic 8-byte load.
///
/// An invalid (core, index) pair reads as 0, so it adds nothing to any total, and is reported
/// once: it can only come from a bug in the module's own tables, never from userspace.
pub(crate) fn read_nc_counter(slab: &SlabMemory, core: usize, index: usize) -> u64 {
    match nc_counter_offset(core, index) {
        Ok(offset) => slab.load(offset),
        Err(err) => {
            pr_warn_once!("invalid NeuronCore counter ({core}, {index}): {err:?}\n");
            0
        }
    }
}

#[kunit_tests(neuron_ds_reader)]
mod tests {
    use super::*;
    use crate::abi::layout::{
        NDS_EXT_NEURONCORE_COUNTERS_START,
        NDS_EXT_NEURONCORE_NC_DATA_START,
        NDS_NEURONCORE_COUNTERS_START, //
    };

    #[test]
    fn each_band_reads_the_word_at_its_documented_offset() -> Result {
        let slab = SlabMemory::new_zeroed()?;
        // (core, index, byte offset) spot checks of the original layout.
        let cases = [
            (0, 0, 256),
            (3, 30, 1240),
            (0, 31, 55936),
            (3, 94, 57976),
            (4, 0, 57984),
            (15, 94, 67184),
        ];
        for (n, (_, _, offset)) in cases.into_iter().enumerate() {
            slab.store(offset, 1000 + u64::try_from(n)?);
        }
        for (n, (core, index, _)) in cases.into_iter().enumerate() {
            assert_eq!(
                read_nc_counter(&slab, core, index),
                1000 + u64::try_from(n)?
            );
        }
        assert_eq!(NDS_NEURONCORE_COUNTERS_START, 0x100);
        assert_eq!(NDS_EXT_NEURONCORE_COUNTERS_START, 0xDA80);
        assert_eq!(NDS_EXT_NEURONCORE_NC_DATA_START, 0xE280);
        Ok(())
    }

    #[test]
    fn counters_0_to_30_of_cores_4_and_up_live_only_in_the_ext_data_band() -> Result {
        let slab = SlabMemory::new_zeroed()?;
        // Core 4, counter 1 is at 57984 + 8; the NC band slot right after core 3 is not it.
        slab.store(57984 + 8, 42);
        slab.store(256 + 8 * (31 * 4 + 1), 7);
        assert_eq!(read_nc_counter(&slab, 4, 1), 42);
        Ok(())
    }

    #[test]
    fn invalid_pairs_read_zero() -> Result {
        let slab = SlabMemory::new_zeroed()?;
        // Make every word non-zero so that a wrong address could not read 0 by accident.
        for offset in (0..crate::abi::layout::NEURON_DATASTORE_SIZE).step_by(8) {
            slab.store(offset, u64::MAX);
        }
        assert_eq!(read_nc_counter(&slab, 0, 95), 0);
        assert_eq!(read_nc_counter(&slab, 3, 95), 0);
        assert_eq!(read_nc_counter(&slab, 4, 95), 0);
        assert_eq!(read_nc_counter(&slab, 16, 0), 0);
        assert_eq!(read_nc_counter(&slab, usize::MAX, 0), 0);
        assert_eq!(read_nc_counter(&slab, 15, 94), u64::MAX);
        Ok(())
    }
}
