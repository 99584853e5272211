//! PCP's Memory Mapped Values (MMV) as a peer: a file of `u64` counters that `mmv_inc_value`
//! increments, through Debian's `libpcp-mmv1-dev`.
//!
//! The functions are declared here rather than through the C headers so that no pmapi.h (a
//! different Debian package) is needed; every metric is dimensionless, so the `pmUnits`
//! bit-field word passed by value is all zeros whatever its bit order.

use std::ffi::{c_char, c_int, c_void, CString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;

/// `mmv_registry_t`, opaque.
#[repr(C)]
struct Registry {
    _opaque: [u8; 0],
}

/// `pmAtomValue`: an 8-byte union; counters of type `MMV_TYPE_U64` use its `ull` member.
#[repr(C)]
struct AtomValue {
    ull: u64,
}

/// `pmUnits`: one 32-bit word of bit-fields.
#[repr(C)]
#[derive(Clone, Copy)]
struct Units {
    bits: u32,
}

/// `MMV_TYPE_U64` (`PM_TYPE_U64`).
const MMV_TYPE_U64: c_int = 3;
/// `MMV_SEM_COUNTER` (`PM_SEM_COUNTER`).
const MMV_SEM_COUNTER: c_int = 1;
/// Indom serial 0: a singular metric.
const NO_INDOM: c_int = 0;
/// Any cluster id; only a PMDA reading the file cares.
const CLUSTER: c_int = 8;
/// `mmv_stats_flags_t` without flags.
const NO_FLAGS: c_int = 0;

#[link(name = "pcp_mmv")]
extern "C" {
    fn mmv_stats_registry(file: *const c_char, cluster: c_int, flags: c_int) -> *mut Registry;
    fn mmv_stats_add_metric(
        registry: *mut Registry,
        name: *const c_char,
        item: c_int,
        kind: c_int,
        semantics: c_int,
        units: Units,
        indom: c_int,
        shorthelp: *const c_char,
        longhelp: *const c_char,
    ) -> c_int;
    fn mmv_stats_start(registry: *mut Registry) -> *mut c_void;
    fn mmv_stats_free(registry: *mut Registry);
    fn mmv_lookup_value_desc(
        addr: *mut c_void,
        metric: *const c_char,
        inst: *const c_char,
    ) -> *mut AtomValue;
    fn mmv_inc_value(addr: *mut c_void, value: *mut AtomValue, inc: f64);
}

/// An MMV file with `u64` counters named `c0`, `c1`, ..., removed on drop.
#[derive(Debug)]
pub struct MmvFile {
    registry: NonNull<Registry>,
    addr: NonNull<c_void>,
    values: Vec<NonNull<AtomValue>>,
    path: PathBuf,
    // The registry keeps pointers to these strings until it is freed.
    _strings: Vec<CString>,
}

impl MmvFile {
    /// Creates `dir/name` (an absolute path, so `PCP_TMP_DIR` is not involved) with `counters`
    /// counters and maps it.
    ///
    /// # Errors
    ///
    /// When a name contains a NUL or libpcp_mmv refuses a step.
    pub fn create(dir: &Path, name: &str, counters: usize) -> io::Result<Self> {
        let path = dir.join(name);
        let file = CString::new(path.as_os_str().as_bytes())?;
        let help = CString::new("nds-bench peer counter")?;
        let names = (0..counters)
            .map(|index| CString::new(format!("c{index}")))
            .collect::<Result<Vec<_>, _>>()?;
        let failed = |step: &str| io::Error::other(format!("{step} failed for {}", path.display()));
        // SAFETY: `file` is a NUL-terminated path that lives in `_strings` as long as the
        // registry.
        let registry =
            NonNull::new(unsafe { mmv_stats_registry(file.as_ptr(), CLUSTER, NO_FLAGS) })
                .ok_or_else(|| failed("mmv_stats_registry"))?;
        let mut strings = vec![file, help];
        let mut mmv = Self {
            registry,
            addr: NonNull::dangling(),
            values: Vec::new(),
            path: path.clone(),
            _strings: Vec::new(),
        };
        for (item, metric) in (1..).zip(&names) {
            // SAFETY: a live registry and NUL-terminated strings that outlive it.
            let rc = unsafe {
                mmv_stats_add_metric(
                    registry.as_ptr(),
                    metric.as_ptr(),
                    item,
                    MMV_TYPE_U64,
                    MMV_SEM_COUNTER,
                    Units { bits: 0 },
                    NO_INDOM,
                    strings[1].as_ptr(),
                    strings[1].as_ptr(),
                )
            };
            if rc < 0 {
                return Err(failed("mmv_stats_add_metric"));
            }
        }
        // SAFETY: a live registry holding the metrics above.
        mmv.addr = NonNull::new(unsafe { mmv_stats_start(registry.as_ptr()) })
            .ok_or_else(|| failed("mmv_stats_start"))?;
        for metric in &names {
            // SAFETY: the mapping returned by `mmv_stats_start`; singular metrics need no
            // instance name.
            let value = unsafe {
                mmv_lookup_value_desc(mmv.addr.as_ptr(), metric.as_ptr(), std::ptr::null())
            };
            mmv.values
                .push(NonNull::new(value).ok_or_else(|| failed("mmv_lookup_value_desc"))?);
        }
        strings.extend(names);
        mmv._strings = strings;
        Ok(mmv)
    }

    /// Counter `index`, as the handle a C program keeps after `mmv_lookup_value_desc`.
    ///
    /// # Panics
    ///
    /// If there is no such counter.
    #[must_use]
    pub fn counter(&self, index: usize) -> MmvCounter<'_> {
        MmvCounter {
            addr: self.addr,
            value: self.values[index],
            _file: std::marker::PhantomData,
        }
    }

    /// The value of counter `index`.
    ///
    /// # Panics
    ///
    /// If there is no such counter.
    #[must_use]
    pub fn value(&self, index: usize) -> u64 {
        // SAFETY: a value slot inside the live mapping; 8-aligned by the MMV format. Callers read
        // it only once no thread increments it any more.
        unsafe { self.values[index].as_ptr().read_volatile().ull }
    }
}

impl Drop for MmvFile {
    fn drop(&mut self) {
        // SAFETY: the registry from `create`, freed once; this also unmaps the file.
        unsafe { mmv_stats_free(self.registry.as_ptr()) };
        let _ = std::fs::remove_file(&self.path);
    }
}

/// One MMV counter: the mapping and the value handle that `mmv_inc_value` takes.
#[derive(Clone, Copy, Debug)]
pub struct MmvCounter<'file> {
    addr: NonNull<c_void>,
    value: NonNull<AtomValue>,
    _file: std::marker::PhantomData<&'file MmvFile>,
}

// SAFETY: the handle is two addresses inside a mapping that outlives it (`'file`); it may be
// sent to and used from any thread, with the contract of `MmvCounter::increment`.
unsafe impl Send for MmvCounter<'_> {}
// SAFETY: as above.
unsafe impl Sync for MmvCounter<'_> {}

impl MmvCounter<'_> {
    /// `mmv_inc_value(addr, value, delta)`: the peer under test.
    ///
    /// # Safety
    ///
    /// `mmv_inc_value` is a plain, non-atomic read-modify-write in C. Two threads calling it on
    /// the same counter race inside libpcp_mmv and lose increments; the caller must accept that
    /// the counter's value is then meaningless (the benchmark counts the loss and reports it).
    /// Nothing else in this process may access the value meanwhile.
    #[inline(always)]
    pub unsafe fn increment(self, delta: f64) {
        // SAFETY: both addresses come from `mmv_stats_start` / `mmv_lookup_value_desc` on a live
        // mapping; the race contract is the caller's.
        unsafe { mmv_inc_value(self.addr.as_ptr(), self.value.as_ptr(), delta) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slab::ScratchSlab;

    #[test]
    fn mmv_counters_count() {
        let dir = ScratchSlab::new("unit-mmv").unwrap();
        let mmv = MmvFile::create(dir.dir(), "unit.mmv", 2).unwrap();
        for _ in 0..5 {
            // SAFETY: one thread.
            unsafe { mmv.counter(1).increment(2.0) };
        }
        assert_eq!(mmv.value(0), 0);
        assert_eq!(mmv.value(1), 10);
    }
}
