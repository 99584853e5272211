//! How much memory the kernel holds, for the campaigns' leak checks.
//!
//! `MemAvailable` moves with what is cached as well as with what is held. The page cache and
//! reclaimable slab go with `drop_caches`; what stays is the slab caches' empty slabs and, on
//! a KASAN kernel, its quarantine: freed objects held back (up to 1/32 of RAM) so that a use
//! after free still finds them poisoned. Shrinking a slab cache (`/sys/kernel/slab/*/shrink`)
//! returns both: the cache's quarantined objects are really freed, then its empty slabs.

use std::fs;

/// One reading of the kernel's memory, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryReading {
    /// `MemAvailable` after `drop_caches` only.
    pub available_cached: i64,
    /// `SUnreclaim` then.
    pub slab_unreclaimable: i64,
    /// `MemAvailable` after shrinking every slab cache as well: what the leak checks compare.
    pub available: i64,
}

impl MemoryReading {
    /// Reads the kernel's memory now, dropping and shrinking its caches first.
    pub fn now() -> Self {
        drop_caches();
        let meminfo = fs::read_to_string("/proc/meminfo").expect("/proc/meminfo");
        let available_cached = field(&meminfo, "MemAvailable");
        let slab_unreclaimable = field(&meminfo, "SUnreclaim");
        shrink_slab_caches();
        drop_caches();
        let meminfo = fs::read_to_string("/proc/meminfo").expect("/proc/meminfo");
        Self {
            available_cached,
            slab_unreclaimable,
            available: field(&meminfo, "MemAvailable"),
        }
    }
}

fn drop_caches() {
    let _ = fs::write("/proc/sys/vm/drop_caches", "3\n");
}

/// Shrinks every slab cache; a cache that refuses (none should) is left as it is.
fn shrink_slab_caches() {
    let Ok(caches) = fs::read_dir("/sys/kernel/slab") else {
        return;
    };
    for cache in caches.flatten() {
        let _ = fs::write(cache.path().join("shrink"), "1\n");
    }
}

/// Field `name` of a `/proc/meminfo` text, in bytes.
fn field(meminfo: &str, name: &str) -> i64 {
    meminfo
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse::<i64>().ok())
        .map(|kib| kib * 1024)
        .unwrap_or_else(|| panic!("/proc/meminfo has no {name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_read_in_bytes_by_their_exact_name() {
        let meminfo = "MemTotal:        1000 kB\nSUnreclaim:        20 kB\nSUnreclaimX:  7 kB\n";
        assert_eq!(field(meminfo, "SUnreclaim"), 20 * 1024);
        assert_eq!(field(meminfo, "MemTotal"), 1000 * 1024);
    }
}
