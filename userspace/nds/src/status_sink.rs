//! The status → counter bridge of `nrt-status` writing into a producer's slab (feature
//! `status-sink`): a [`Producer`] is a [`CounterSink`], so
//! `nrt_status::report_execution(&producer, core, status)` counts an execution result exactly
//! as the runtime would. A [`Datastore`] is one too, refusing writes on a reader handle.

use nrt_status::{Counter, CounterSink};

use crate::datastore::Datastore;
use crate::error::Error;
use crate::producer::Producer;

impl CounterSink for Producer {
    type Error = Error;

    fn add_nc(&self, core: usize, counter: Counter, delta: u64) -> Result<(), Error> {
        self.increment_nc_counter(core, counter.index(), delta)
    }

    fn set_nc(&self, core: usize, counter: Counter, value: u64) -> Result<(), Error> {
        self.set_nc_counter(core, counter.index(), value)
    }
}

impl CounterSink for Datastore {
    type Error = Error;

    fn add_nc(&self, core: usize, counter: Counter, delta: u64) -> Result<(), Error> {
        self.producer()?.add_nc(core, counter, delta)
    }

    fn set_nc(&self, core: usize, counter: Counter, value: u64) -> Result<(), Error> {
        self.producer()?.set_nc(core, counter, value)
    }
}

#[cfg(test)]
mod tests {
    use nds_abi::counters::{ExtNcCounter, NcCounter};
    use nrt_status::{report_execution, report_latencies, Latencies, NrtStatus};

    use super::*;
    use crate::test_support::ScratchDir;
    use crate::Backend;

    #[test]
    fn execution_results_land_in_the_bridge_counters() {
        let dir = ScratchDir::new();
        let store = Producer::open(&Backend::file(dir.path().join("slab"))).unwrap();
        report_execution(&store, 1, NrtStatus::SUCCESS).unwrap();
        report_execution(&store, 1, NrtStatus::EXEC_HW_ERR_REPAIRABLE_HBM_UE).unwrap();
        report_latencies(
            &store,
            1,
            &Latencies {
                device: 7,
                total: 9,
                nc_time: 5,
                cc_time: 1,
            },
        )
        .unwrap();
        let nc = |counter: NcCounter| store.nc_counter(1, counter.index()).unwrap();
        assert_eq!(nc(NcCounter::InferCompleted), 1);
        assert_eq!(nc(NcCounter::InferenceCount), 2);
        assert_eq!(nc(NcCounter::LatencyTotal), 9);
        assert_eq!(
            store
                .nc_counter(1, ExtNcCounter::HwErrRepairableHbmUe.index())
                .unwrap(),
            1
        );
        assert_eq!(
            store
                .nc_counter(0, NcCounter::InferCompleted.index())
                .unwrap(),
            0
        );
    }

    #[test]
    fn a_reader_handle_refuses_bridge_writes() {
        let dir = ScratchDir::new();
        let path = dir.path().join("slab");
        Datastore::open(&Backend::file(&path), 0).unwrap();
        let reader = Datastore::open(&Backend::file(&path), 9).unwrap();
        let error = report_execution(&reader, 0, NrtStatus::SUCCESS).unwrap_err();
        assert!(matches!(error, Error::ReadOnly));
    }
}
