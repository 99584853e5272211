//! One producer of the stress campaign: `stress-producer DEVICE CYCLES SEED count|chaff CORES`.
//!
//! Each cycle opens the device, ACQUIREs its own slab (retrying while all 16 are taken), maps
//! it, checks that it arrived zeroed with an odd generation, writes the header, its pid, a
//! hashed process-info record and a few counter increments, and lets go of the slab in one of
//! four orders (munmap/RELEASE/close permuted, or no RELEASE at all). The last cycle may also
//! end by exiting with the slab still mapped.
//!
//! Every cycle prints `R <offset> <generation> <tally>` before letting go of the slab (see
//! `neuron_ds_guest_tests::stress`). A `count` producer increments aggregated counters and its
//! tally says which; a `chaff` producer touches only counters no sysfs node aggregates (its
//! tally is empty), so it may be killed blind. The last line is `D <enomem>`, the ACQUIREs that
//! found every slot taken; a broken kernel promise ends the process with status 3.

use nds_abi::{
    counters::NdCounter,
    layout::{nd_counter_offset, NDS_HEADER_START, NDS_PROCESS_INFO_START, SLAB_GENERATION_OFFSET},
    records::{record_hash, ProcessInfoRecord, NDS_HEADER_WORD},
    sysfs::SYSFS_COUNTERS,
};
use neuron_ds_guest_tests::{
    acquire, device_path,
    kcov::Collector,
    nc_offset, offset_slot, open_device, release,
    rng::Rng,
    slots_on,
    stress::{node_offset, report_line, unaggregated_nc_counters, Tally, Tenure, OWNER_ND_COUNTER},
    DsInfo, Mapping, SLAB_SIZE,
};
use std::{fs::File, io, process::exit, sync::atomic::Ordering, thread, time::Duration};
use zerocopy::{FromZeros, IntoBytes};

/// How a cycle lets go of its slab.
#[derive(Clone, Copy)]
enum Ending {
    /// munmap, RELEASE, close: what the nds library does.
    UnmapReleaseClose,
    /// RELEASE while still mapped, then munmap and close.
    ReleaseUnmapClose,
    /// munmap and close without RELEASE: the last close releases.
    UnmapClose,
    /// close first; the slab is released when the mapping, the file's last user, goes.
    CloseUnmap,
}

const ENDINGS: [Ending; 4] = [
    Ending::UnmapReleaseClose,
    Ending::ReleaseUnmapClose,
    Ending::UnmapClose,
    Ending::CloseUnmap,
];

struct Config {
    device: usize,
    cycles: u64,
    counting: bool,
    cores: usize,
}

/// Writes `text` with one write(2), so that a line is in the pipe whole or not at all.
fn emit(text: &str) {
    // SAFETY: writing our own buffer to stdout.
    let written = unsafe { libc::write(1, text.as_ptr().cast(), text.len()) };
    if written != text.len() as isize {
        fail(&format!(
            "short write to the controller: {}",
            io::Error::last_os_error()
        ));
    }
}

fn fail(why: &str) -> ! {
    eprintln!("stress-producer {}: {why}", std::process::id());
    exit(3);
}

/// ACQUIREs the caller's slab, retrying while every slot is owned or still mapped writable.
fn acquire_own(file: &File, enomem: &mut u64) -> DsInfo {
    loop {
        match acquire(file, 0) {
            Ok(info) => return info,
            Err(e) if e.raw_os_error() == Some(libc::ENOMEM) => {
                *enomem += 1;
                thread::sleep(Duration::from_micros(200));
            }
            Err(e) => fail(&format!("ACQUIRE: {e}")),
        }
    }
}

/// Publishes a process-info record the way the nds library does: hash 0, payload, hash.
fn publish_record(slab: &Mapping, generation: u64) {
    let mut record = ProcessInfoRecord::new_zeroed();
    let tag = format!("stress-{}", std::process::id());
    record
        .info
        .set_tag(tag.as_bytes())
        .unwrap_or_else(|_| fail("tag too long"));
    // The low half of the generation: readers check the record belongs to this slab tenure.
    record.info.runtime_version.build = generation as u32;
    record.hash = record_hash(record.as_bytes());
    let hash_word = slab.atomic_u32(NDS_PROCESS_INFO_START);
    hash_word.store(0, Ordering::Relaxed);
    std::sync::atomic::fence(Ordering::Release);
    for (at, word) in record.as_bytes().chunks_exact(4).enumerate().skip(1) {
        let value = u32::from_ne_bytes([word[0], word[1], word[2], word[3]]);
        slab.atomic_u32(NDS_PROCESS_INFO_START + 4 * at)
            .store(value, Ordering::Relaxed);
    }
    hash_word.store(record.hash, Ordering::Release);
}

/// The version counters a runtime writes when it starts.
const VERSIONS: [NdCounter; 3] = [
    NdCounter::RuntimeVersion,
    NdCounter::FrameworkVersion,
    NdCounter::FalVersion,
];

/// Writes the runtime, framework and FAL versions, one of a dozen releases each: more than
/// the module's 8-entry version histories hold, so that its metrics period ranks and evicts.
fn write_versions(slab: &Mapping, rng: &mut Rng) {
    for counter in VERSIONS {
        let release = rng.below(12);
        // Framework type in bits 48-63, then major, minor and build.
        let word = (release % 10) << 48 | 2 << 40 | release << 32 | (100 + release);
        if let Some(offset) = nd_counter_offset(counter.index()) {
            slab.write_u64(offset, word);
        }
    }
}

/// The words this producer writes must arrive zeroed: a released slab is cleared.
fn check_zeroed(slab: &Mapping, config: &Config) {
    let mut offsets = vec![NDS_HEADER_START, NDS_PROCESS_INFO_START];
    offsets.extend(nd_counter_offset(OWNER_ND_COUNTER));
    offsets.extend(VERSIONS.iter().filter_map(|c| nd_counter_offset(c.index())));
    for core in 0..config.cores {
        offsets.extend((0..SYSFS_COUNTERS.len()).map(|node| node_offset(core, node)));
    }
    if let Some(offset) = offsets.into_iter().find(|o| slab.read_u64(*o) != 0) {
        fail(&format!(
            "a fresh slab holds {:#x} at {offset:#x}",
            slab.read_u64(offset)
        ));
    }
}

/// One cycle; with `hold`, the process exits at its end with the slab still mapped.
fn cycle(config: &Config, rng: &mut Rng, chaff: &[usize], enomem: &mut u64, hold: bool) {
    let file =
        open_device(&device_path(config.device)).unwrap_or_else(|e| fail(&format!("open: {e}")));
    let info = acquire_own(&file, enomem);
    let slab = Mapping::new(
        &file,
        SLAB_SIZE,
        libc::PROT_READ | libc::PROT_WRITE,
        info.mmap_offset,
    )
    .unwrap_or_else(|e| fail(&format!("mmap of a granted slab: {e}")));
    let generation = slab.read_u64(SLAB_GENERATION_OFFSET);
    if generation % 2 != 1 {
        fail(&format!("owned slab with even generation {generation}"));
    }
    check_zeroed(&slab, config);
    slab.write_u64(NDS_HEADER_START, NDS_HEADER_WORD);
    if let Some(offset) = nd_counter_offset(OWNER_ND_COUNTER) {
        slab.write_u64(offset, u64::from(std::process::id()));
    }
    write_versions(&slab, rng);
    publish_record(&slab, generation);
    let mut tally = Tally::default();
    for _ in 0..1 + rng.below(8) {
        let core = rng.index(config.cores);
        let delta = 1 + rng.below(1000);
        if config.counting {
            let node = rng.index(SYSFS_COUNTERS.len());
            slab.atomic_u64(node_offset(core, node))
                .fetch_add(delta, Ordering::Relaxed);
            tally.add(core, node, delta);
        } else {
            let offset = nc_offset(core, rng.pick(chaff));
            slab.atomic_u64(offset).fetch_add(delta, Ordering::Relaxed);
        }
    }
    // Reported before letting go; nothing is written into the slab after this.
    let tenure = Tenure {
        offset: info.mmap_offset,
        generation,
    };
    emit(&report_line(tenure, &tally));
    if hold {
        // Exit with the slab mapped and the file open: process exit releases it.
        emit(&format!("D {enomem}\n"));
        exit(0);
    }
    match rng.pick(&ENDINGS) {
        Ending::UnmapReleaseClose => {
            drop(slab);
            release(&file, 0).unwrap_or_else(|e| fail(&format!("RELEASE: {e}")));
        }
        Ending::ReleaseUnmapClose => {
            release(&file, 0).unwrap_or_else(|e| fail(&format!("RELEASE: {e}")));
            // The release revoked the owner's mapping: nothing of it is mapped any more (an
            // access would fault), and the slot has moved on.
            let resident = slab.resident_pages();
            if resident != 0 {
                fail(&format!("{resident} pages still mapped after RELEASE"));
            }
            let after = slots_on(config.device)[offset_slot(info.mmap_offset)].generation;
            if after == generation {
                fail(&format!("generation {after} after RELEASE of {generation}"));
            }
            drop(slab);
        }
        Ending::UnmapClose => drop(slab),
        Ending::CloseUnmap => {
            drop(file);
            drop(slab);
            return;
        }
    }
    drop(file);
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [device, cycles, seed, mode, cores] = &args[..] else {
        eprintln!("usage: stress-producer DEVICE CYCLES SEED count|chaff CORES");
        exit(2);
    };
    let config = Config {
        device: device.parse().expect("DEVICE"),
        cycles: cycles.parse().expect("CYCLES"),
        counting: mode == "count",
        cores: cores.parse().expect("CORES"),
    };
    let mut rng = Rng::new(seed.parse().expect("SEED"));
    let chaff = unaggregated_nc_counters();
    let hold_last = rng.one_in(4);
    let mut enomem = 0;
    // On the cov kernel: the module code each cycle reached, saved as it goes (a producer may
    // be killed at any time).
    let mut kcov = Collector::from_env("stress");
    for done in 1..=config.cycles {
        cycle(
            &config,
            &mut rng,
            &chaff,
            &mut enomem,
            hold_last && done == config.cycles,
        );
        if let Some(kcov) = kcov.as_mut() {
            kcov.save();
        }
    }
    emit(&format!("D {enomem}\n"));
}
