//! The stream a producer writes: what a busy inference runtime would put in its slab.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use nds::ModelSlot;
use nds_abi::counters::{NcCounter, NdCounter};
use nds_abi::records::{ProcessInfo, ProcessInfoExt, VersionInfo};
use nds_sysfs::TimeInUseUnit;
use nrt_status::decode::{InferErrorFlags, InferErrorSubtype};
use nrt_status::{
    report_error_flags, report_execution, report_generic, report_latencies, Counter, CounterSink,
    Latencies, NrtStatus,
};
use zerocopy::FromZeros;

use crate::error::Result;
use crate::mix::StatusMix;
use crate::models::{self, LoadedModel, CATALOG, MEM_SLOTS};
use crate::recorder::{Recorder, Tally};
use crate::report::ProducerReport;
use crate::rng::Rng;
use crate::spec::{ProducerSpec, StreamLength};

/// A model is swapped for another every this many executions.
pub const CHURN_EVERY: u64 = 50;
/// Device memory the runtime itself keeps on every core it uses (counted as misc).
pub const RUNTIME_DEVICE_BYTES: u64 = 8 << 20;
/// Host memory the runtime itself keeps (counted as misc).
pub const RUNTIME_HOST_BYTES: u64 = 16 << 20;
/// Statuses a failed model load reports through the generic path.
const LOAD_FAILURES: [NrtStatus; 4] = [
    NrtStatus::RESOURCE,
    NrtStatus::LOAD_NOT_ENOUGH_NC,
    NrtStatus::UNSUPPORTED_NEFF_VERSION,
    NrtStatus::INVALID,
];
/// The SW error subtypes whose flags have counters of their own.
const FLAGGED_SUBTYPES: [InferErrorSubtype; 4] = [
    InferErrorSubtype::SwSemaphoreError,
    InferErrorSubtype::SwEventError,
    InferErrorSubtype::SwPsumCollisionError,
    InferErrorSubtype::SwSequencerError,
];
/// Per-core device memory counters, in [`MEM_SLOTS`] order.
const DEVICE_MEMORY: [NcCounter; 5] = [
    NcCounter::MemUsageCodeDevice,
    NcCounter::MemUsageTensorsDevice,
    NcCounter::MemUsageConstantsDevice,
    NcCounter::MemUsageScratchpadDevice,
    NcCounter::MemUsageMiscDevice,
];
/// Host memory counters, in [`MEM_SLOTS`] order.
const HOST_MEMORY: [NdCounter; 5] = [
    NdCounter::MemUsageCodeHost,
    NdCounter::MemUsageTensorsHost,
    NdCounter::MemUsageConstantsHost,
    NdCounter::MemUsageScratchpadHost,
    NdCounter::MemUsageMiscHost,
];
const _: () =
    assert!(DEVICE_MEMORY.len() == MEM_SLOTS.len() && HOST_MEMORY.len() == MEM_SLOTS.len());

/// How a stream ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamEnd {
    /// It ran to its length.
    Finished,
    /// It reached its crash point.
    CrashPoint,
}

/// A producer's running state.
#[derive(Debug)]
pub struct Workload<'a> {
    recorder: Recorder<'a>,
    tally: &'a Tally,
    cores: usize,
    mix: StatusMix,
    rng: Rng,
    models: Vec<LoadedModel>,
    next_model_id: u32,
    /// The unit `NDS_NC_COUNTER_TIME_IN_USE` is written in.
    time_unit: TimeInUseUnit,
    /// Device time so far per core; the counter follows it converted, so rounding never
    /// accumulates.
    busy: Vec<Duration>,
    report: ProducerReport,
}

/// `nmetric_version_t`: build in bits 0–31, minor in 32–39, major in 40–47.
fn version_word(major: u8, minor: u8, build: u32) -> u64 {
    u64::from(build) | u64::from(minor) << 32 | u64::from(major) << 40
}

/// The longest prefix of `text` that fits `max` bytes without splitting a character.
fn truncated(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.get(..end).unwrap_or("")
}

impl<'a> Workload<'a> {
    /// Publishes the process records and version counters and loads one model per core.
    ///
    /// # Errors
    ///
    /// The datastore's error.
    pub fn start(
        recorder: Recorder<'a>,
        tally: &'a Tally,
        spec: &ProducerSpec,
        mix: StatusMix,
        pid: i32,
    ) -> Result<Self> {
        let store = recorder.store();
        let mut info = ProcessInfo::new_zeroed();
        info.framework_type = 1;
        // `truncated` keeps the tag within the field, so these cannot fail.
        let _ = info.set_tag(truncated(&spec.tag, info.tag.len() - 1).as_bytes());
        info.framework_version = VersionInfo {
            major: 2,
            minor: 5,
            reserved: [0; 2],
            build: 1,
        };
        info.fal_version = VersionInfo {
            major: 1,
            minor: 0,
            reserved: [0; 2],
            build: 0,
        };
        info.runtime_version = VersionInfo {
            major: 2,
            minor: 31,
            reserved: [0; 2],
            build: 24,
        };
        store.commit_process_info(&info)?;
        let mut ext = ProcessInfoExt::new_zeroed();
        let _ = ext.set_tag(truncated(&spec.tag, ext.tag.len() - 1).as_bytes());
        store.commit_process_info_ext(&ext)?;

        recorder.set_nd(NdCounter::RuntimeVersion, version_word(2, 31, 24))?;
        recorder.set_nd(NdCounter::FrameworkVersion, version_word(2, 5, 1) | 1 << 48)?;
        recorder.set_nd(NdCounter::FalVersion, version_word(1, 0, 0))?;
        recorder.set_nd(NdCounter::MinNeffVersion, 1)?;
        recorder.set_nd(NdCounter::MaxNeffVersion, 2)?;
        if spec.cores > 1 {
            // Feature bit 1: MULTICORE.
            recorder.or_nd(NdCounter::FeatureBitmap, 1)?;
        }

        let mut workload = Self {
            recorder,
            tally,
            cores: spec.cores.max(1),
            mix,
            rng: Rng::new(spec.seed),
            models: Vec::new(),
            next_model_id: 1,
            time_unit: TimeInUseUnit::new(spec.time_in_use_unit_ps),
            busy: vec![Duration::ZERO; spec.cores.max(1)],
            report: ProducerReport {
                tag: spec.tag.clone(),
                pid,
                device: spec.device,
                crashed: false,
                executions: 0,
                statuses: BTreeMap::new(),
                model_loads: 0,
                model_unloads: 0,
                failed_loads: 0,
                loaded_models: Vec::new(),
                nd_counters: BTreeMap::new(),
                nc_counters: BTreeMap::new(),
            },
        };
        for core in 0..workload.cores {
            workload.load(core, false)?;
        }
        Ok(workload)
    }

    /// Runs the stream for `length` at `rate` executions per second (0: flat out); with
    /// `crash`, stops halfway and returns [`StreamEnd::CrashPoint`].
    ///
    /// # Errors
    ///
    /// The datastore's error.
    pub fn run(&mut self, length: StreamLength, rate: u64, crash: bool) -> Result<StreamEnd> {
        let started = Instant::now();
        let interval = Duration::from_secs(1).checked_div(u32::try_from(rate).unwrap_or(u32::MAX));
        let mut index = 0u64;
        loop {
            let (done, halfway) = match length {
                StreamLength::Count(count) => (index >= count, index >= count / 2),
                StreamLength::Duration(duration) => {
                    let elapsed = started.elapsed();
                    (elapsed >= duration, elapsed >= duration / 2)
                }
            };
            if crash && halfway {
                return Ok(StreamEnd::CrashPoint);
            }
            if done {
                return Ok(StreamEnd::Finished);
            }
            self.execute(index)?;
            index += 1;
            if index.is_multiple_of(CHURN_EVERY) {
                self.churn()?;
            }
            if let Some(interval) = interval.filter(|_| rate > 0) {
                let deadline = interval.saturating_mul(u32::try_from(index).unwrap_or(u32::MAX));
                if let Some(wait) = deadline.checked_sub(started.elapsed()) {
                    std::thread::sleep(wait);
                }
            }
        }
    }

    /// One execution on core `index % cores`.
    fn execute(&mut self, index: u64) -> Result<()> {
        let core = usize::try_from(index % self.cores as u64).unwrap_or(0);
        let status = self.mix.pick(&mut self.rng);
        report_execution(&self.recorder, core, status)?;
        let name = if status.is_known() {
            status.as_str().to_owned()
        } else {
            status.as_u32().to_string()
        };
        *self.report.statuses.entry(name).or_insert(0) += 1;
        self.report.executions += 1;
        if status.is_retry() {
            return Ok(());
        }
        // Latencies in microseconds, as the monitor reads them.
        let device = self.rng.between(600, 1400);
        let latencies = Latencies {
            device,
            total: device + self.rng.between(80, 400),
            nc_time: device,
            cc_time: self.rng.below(40),
        };
        report_latencies(&self.recorder, core, &latencies)?;
        self.add_busy(core, Duration::from_micros(device))?;
        let macs = self
            .models
            .iter()
            .find(|model| model.nc_index == core)
            .map_or(0, |model| model.spec().macs);
        self.recorder
            .add_nc(core, Counter::Nc(NcCounter::MacCount), macs)?;
        if self.rng.one_in(250) {
            let mut flags = InferErrorFlags::new();
            let pick = self.rng.below(FLAGGED_SUBTYPES.len() as u64);
            flags.set(FLAGGED_SUBTYPES[usize::try_from(pick).unwrap_or(0)]);
            report_error_flags(&self.recorder, core, &flags)?;
        }
        Ok(())
    }

    /// Adds `time` of device time to `core`'s `NDS_NC_COUNTER_TIME_IN_USE`, in the unit the
    /// module reads it in.
    fn add_busy(&mut self, core: usize, time: Duration) -> Result<()> {
        let Some(busy) = self.busy.get_mut(core) else {
            return Ok(());
        };
        let before = self.time_unit.count(*busy);
        *busy = busy.saturating_add(time);
        let units = self.time_unit.count(*busy).saturating_sub(before);
        self.recorder
            .add_nc(core, Counter::Nc(NcCounter::TimeInUse), units)?;
        Ok(())
    }

    /// Loads a new model on a random core and, if that worked, unloads that core's oldest.
    fn churn(&mut self) -> Result<()> {
        let core = usize::try_from(self.rng.below(self.cores as u64)).unwrap_or(0);
        if self.load(core, true)? {
            if let Some(position) = self.models.iter().position(|m| m.nc_index == core) {
                let old = self.models.remove(position);
                if let Some(slot) = ModelSlot::new(old.slot) {
                    self.recorder.store().delete_model(slot)?;
                }
                self.report.model_unloads += 1;
                self.update_memory()?;
            }
        }
        Ok(())
    }

    /// Loads a random catalog model on `core`; a load may fail (reported through the generic
    /// status path) when `may_fail`. Returns whether a model was loaded.
    fn load(&mut self, core: usize, may_fail: bool) -> Result<bool> {
        if may_fail && self.rng.one_in(8) {
            let pick = self.rng.below(LOAD_FAILURES.len() as u64);
            let status = LOAD_FAILURES[usize::try_from(pick).unwrap_or(0)];
            report_generic(&self.recorder, core, status)?;
            self.report.failed_loads += 1;
            return Ok(false);
        }
        let catalog = usize::try_from(self.rng.below(CATALOG.len() as u64)).unwrap_or(0);
        let store = self.recorder.store();
        let slot = store.allocate_model_slot()?;
        let model = LoadedModel {
            slot: slot.index(),
            model_id: self.next_model_id,
            name: CATALOG[catalog].name.to_owned(),
            nc_index: core,
            sg_index: 0,
            catalog,
        };
        self.next_model_id += 1;
        models::commit(store, slot, &model, &mut self.rng)?;
        self.recorder
            .add_nc(core, Counter::Nc(NcCounter::ModelLoadCount), 1)?;
        // The newest model goes last, so the oldest on a core is found first.
        self.models.push(model);
        self.report.model_loads += 1;
        self.update_memory()?;
        Ok(true)
    }

    /// Sets the memory gauges to what the loaded models and the runtime use.
    fn update_memory(&mut self) -> Result<()> {
        for core in 0..self.cores {
            for (column, counter) in DEVICE_MEMORY.iter().enumerate() {
                let models: u64 = self
                    .models
                    .iter()
                    .filter(|model| model.nc_index == core)
                    .map(|model| model.spec().device_bytes[column])
                    .sum();
                let runtime = if *counter == NcCounter::MemUsageMiscDevice {
                    RUNTIME_DEVICE_BYTES
                } else {
                    0
                };
                self.recorder
                    .set_nc(core, Counter::Nc(*counter), models + runtime)?;
            }
        }
        for (column, counter) in HOST_MEMORY.iter().enumerate() {
            let models: u64 = self
                .models
                .iter()
                .map(|model| model.spec().host_bytes[column])
                .sum();
            let runtime = if *counter == NdCounter::MemUsageMiscHost {
                RUNTIME_HOST_BYTES
            } else {
                0
            };
            self.recorder.set_nd(*counter, models + runtime)?;
        }
        Ok(())
    }

    /// The report of everything written so far.
    #[must_use]
    pub fn report(&self, crashed: bool) -> ProducerReport {
        let mut report = self.report.clone();
        report.crashed = crashed;
        report.loaded_models = self.models.clone();
        report.set_counters(self.tally);
        report
    }
}
