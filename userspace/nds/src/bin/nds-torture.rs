//! Multi-process stress driver for the datastore, used by `tests/torture.rs`.
//!
//! ```text
//! nds-torture producer <slab-file> <millis>   rewrite records, bump counters; prints iterations
//! nds-torture bumper   <slab-file> <millis>   bump the same counters from a second process,
//!                                             through pre-resolved counter handles
//! nds-torture reader   <slab-file> <millis>   verify every record accepted, snapshot the
//!                                             counters; prints counts
//! ```
//!
//! Every record the producer writes is derived from one sequence number, so a reader can check
//! any record it accepts independently of the hash: a torn record would mix two sequences.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use nds::abi::counters::{ExtNcCounter, NcCounter, NdCounter};
use nds::abi::records::{ModelMemUsage, ModelNodeInfo, ProcessInfo, ProcessInfoExt};
use nds::{
    Backend, CounterSnapshot, CounterWord, ModelEntry, ModelSlot, NeuronCore, Producer, Reader,
    SlabRead, Snapshot,
};
use zerocopy::FromZeros;

/// Counters every writer process bumps: one per addressing band plus an ND counter.
const BUMPED_NC_COUNTERS: [(usize, usize); 3] = [(0, 1), (3, 40), (15, 94)];
const BUMPED_ND_COUNTER: NdCounter = NdCounter::RuntimeVersion;
/// Model slots the producer keeps cycling through.
const MODEL_SLOTS: usize = 8;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (Some(mode), Some(path), Some(Ok(millis))) = (
        args.get(1),
        args.get(2),
        args.get(3).map(|m| m.parse::<u64>()),
    ) else {
        eprintln!("usage: nds-torture producer|bumper|reader <slab-file> <millis>");
        return ExitCode::from(2);
    };
    let backend = Backend::file(path);
    let deadline = Instant::now() + Duration::from_millis(millis);
    let outcome = match mode.as_str() {
        "producer" => produce(&backend, deadline),
        "bumper" => bump(&backend, deadline),
        "reader" => read(&backend, deadline),
        _ => Err(format!("unknown mode {mode}")),
    };
    match outcome {
        Ok(report) => {
            println!("{report}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("nds-torture {mode}: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Text of `len` bytes derived from `seq`: its 16 hex digits, repeated.
fn pattern(seq: u64, len: usize) -> Vec<u8> {
    format!("{seq:016x}")
        .into_bytes()
        .into_iter()
        .cycle()
        .take(len)
        .collect()
}

/// The sequence a pattern text encodes, if the whole text is that pattern.
fn pattern_seq(text: &[u8], len: usize) -> Option<u64> {
    let seq = u64::from_str_radix(std::str::from_utf8(text.get(..16)?).ok()?, 16).ok()?;
    (text.len() == len && text == pattern(seq, len).as_slice()).then_some(seq)
}

fn low32(seq: u64) -> u32 {
    u32::try_from(seq & u64::from(u32::MAX)).unwrap_or(0)
}

fn process_info(seq: u64) -> Result<ProcessInfo, String> {
    let mut info = ProcessInfo::new_zeroed();
    info.set_tag(&pattern(seq, 31))
        .map_err(|e| format!("{e:?}"))?;
    info.framework_version.build = low32(seq);
    info.fal_version.build = !low32(seq);
    info.runtime_version.build = low32(seq) ^ 0x5A5A_5A5A;
    Ok(info)
}

fn process_info_ext(seq: u64) -> Result<ProcessInfoExt, String> {
    let mut info = ProcessInfoExt::new_zeroed();
    info.set_tag(&pattern(seq, 255))
        .map_err(|e| format!("{e:?}"))?;
    Ok(info)
}

fn model(seq: u64) -> Result<(ModelNodeInfo, ModelMemUsage), String> {
    let mut node = ModelNodeInfo::new_zeroed();
    node.model_id = low32(seq);
    node.model_node_id = low32(seq.rotate_left(32));
    node.set_name(&pattern(seq, 255))
        .map_err(|e| format!("{e:?}"))?;
    let seq_bytes = seq.to_le_bytes();
    for (byte, source) in node.uuid.iter_mut().zip(seq_bytes.iter().cycle()) {
        *byte = *source;
    }
    let mut usage = ModelMemUsage::new_zeroed();
    for (cell_index, cell) in usage.model_mem_usage.iter_mut().flatten().enumerate() {
        let cell_number = u64::try_from(cell_index).unwrap_or(0) + 1;
        cell.total_size = seq.wrapping_mul(cell_number);
        cell.chunk_count = low32(seq).wrapping_add(low32(cell_number));
    }
    Ok((node, usage))
}

fn produce(backend: &Backend, deadline: Instant) -> Result<String, String> {
    let store = Producer::open(backend).map_err(|e| e.to_string())?;
    let mut slots: Vec<ModelSlot> = (0..MODEL_SLOTS)
        .map(|_| store.allocate_model_slot())
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let mut iterations = 0u64;
    let mut seq = 0u64;
    while Instant::now() < deadline {
        seq += 1;
        store
            .commit_process_info(&process_info(seq)?)
            .map_err(|e| e.to_string())?;
        seq += 1;
        store
            .commit_process_info_ext(&process_info_ext(seq)?)
            .map_err(|e| e.to_string())?;
        seq += 1;
        let slot_index = usize::try_from(seq % 8).unwrap_or(0);
        if seq.is_multiple_of(64) {
            // Exercise delete/allocate so readers also meet empty and vanishing slots.
            store
                .delete_model(slots[slot_index])
                .map_err(|e| e.to_string())?;
            slots[slot_index] = store.allocate_model_slot().map_err(|e| e.to_string())?;
        }
        let (node, usage) = model(seq)?;
        store
            .commit_model(slots[slot_index], &node, &usage)
            .map_err(|e| e.to_string())?;
        bump_once(&store)?;
        iterations += 1;
    }
    store.close().map_err(|e| e.to_string())?;
    Ok(format!("iterations={iterations}"))
}

/// Net +1 on every bumped counter, through both increment and decrement.
fn bump_once(store: &Producer) -> Result<(), String> {
    store
        .increment_nd_counter(BUMPED_ND_COUNTER.index(), 2)
        .map_err(|e| e.to_string())?;
    store
        .decrement_nd_counter(BUMPED_ND_COUNTER.index(), 1)
        .map_err(|e| e.to_string())?;
    for (core, index) in BUMPED_NC_COUNTERS {
        store
            .increment_nc_counter(core, index, 3)
            .map_err(|e| e.to_string())?;
        store
            .decrement_nc_counter(core, index, 2)
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn bump(backend: &Backend, deadline: Instant) -> Result<String, String> {
    let store = Producer::open(backend).map_err(|e| e.to_string())?;
    let words = bumped_words(&store)?;
    let mut iterations = 0u64;
    while Instant::now() < deadline {
        // Net +1 on each, as `bump_once` does through the integer calls.
        let [nd, nc, ext, data] = words;
        nd.add(2);
        nd.sub(1);
        for word in [nc, ext, data] {
            word.add(3);
            word.sub(2);
        }
        iterations += 1;
    }
    store.close().map_err(|e| e.to_string())?;
    Ok(format!("iterations={iterations}"))
}

/// The handles of the bumped counters, resolved once: the ND counter, then the three NC ones.
fn bumped_words(store: &Producer) -> Result<[CounterWord<'_>; 4], String> {
    let core = |index| NeuronCore::new(index).ok_or(format!("no core {index}"));
    let [(nc_core, _), (ext_core, _), (data_core, data_index)] = BUMPED_NC_COUNTERS;
    Ok([
        store.nd(BUMPED_ND_COUNTER),
        store.nc(core(nc_core)?, NcCounter::InferCompleted),
        store.nc(core(ext_core)?, ExtNcCounter::HwErrRepairableHbmUe),
        // A reserved counter has no name: its handle comes from the checked index.
        store
            .nc_index(data_core, data_index)
            .map_err(|e| e.to_string())?,
    ])
}

#[derive(Default)]
struct Tally {
    accepted: u64,
    torn: u64,
    empty: u64,
    inconsistent: u64,
    snapshots: u64,
}

impl Tally {
    fn record<T>(&mut self, snapshot: Snapshot<T>, consistent: impl FnOnce(&T) -> bool) {
        match snapshot {
            Snapshot::Valid(record) => {
                self.accepted += 1;
                if !consistent(&record) {
                    self.inconsistent += 1;
                }
            }
            Snapshot::Torn => self.torn += 1,
            Snapshot::Empty => self.empty += 1,
        }
    }
}

fn process_info_is_consistent(info: &ProcessInfo) -> bool {
    pattern_seq(info.tag(), 31)
        .and_then(|seq| process_info(seq).ok())
        .is_some_and(|expected| expected == *info)
}

fn process_info_ext_is_consistent(info: &ProcessInfoExt) -> bool {
    pattern_seq(info.tag(), 255)
        .and_then(|seq| process_info_ext(seq).ok())
        .is_some_and(|expected| expected == *info)
}

fn model_is_consistent(node: &ModelNodeInfo, usage: &ModelMemUsage) -> bool {
    pattern_seq(node.name(), 255)
        .and_then(|seq| model(seq).ok())
        .is_some_and(|(expected_node, expected_usage)| {
            expected_node == *node && expected_usage == *usage
        })
}

fn read(backend: &Backend, deadline: Instant) -> Result<String, String> {
    let store = Reader::open(backend, i32::try_from(std::process::id()).unwrap_or(1))
        .map_err(|e| e.to_string())?;
    let mut tally = Tally::default();
    let mut counters = Box::new(CounterSnapshot::new());
    while Instant::now() < deadline {
        // Nothing moves a file's generation: every snapshot must be valid.
        match store.snapshot(&mut counters) {
            SlabRead::Valid(_) => tally.snapshots += 1,
            other => return Err(format!("counter snapshot {other:?}")),
        }
        tally.record(
            store.read_process_info().map_err(|e| e.to_string())?,
            process_info_is_consistent,
        );
        tally.record(
            store.read_process_info_ext().map_err(|e| e.to_string())?,
            process_info_ext_is_consistent,
        );
        for entry in store.read_all_models().map_err(|e| e.to_string())? {
            match entry {
                ModelEntry::Valid(found) => tally.record(Snapshot::Valid(*found), |m| {
                    model_is_consistent(&m.node_info, &m.mem_usage)
                }),
                ModelEntry::Torn(_) => tally.torn += 1,
            }
        }
    }
    store.close().map_err(|e| e.to_string())?;
    Ok(format!(
        "accepted={} torn={} empty={} inconsistent={} snapshots={}",
        tally.accepted, tally.torn, tally.empty, tally.inconsistent, tally.snapshots
    ))
}
