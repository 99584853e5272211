//! The name of a slab file, `neuron<device>-<pid>.slab`: what the load generator's
//! `--slab-dir` writes and every tool's `--slab-dir` reads, built and parsed only here.

/// The slab file of process `pid` on device `device`.
#[must_use]
pub fn slab_file_name(device: u32, pid: i32) -> String {
    format!("neuron{device}-{pid}.slab")
}

/// The `(device, pid)` a slab file name says; `None` for any other name, and for a pid below 1
/// (no process has one).
#[must_use]
pub fn parse_slab_file_name(name: &str) -> Option<(u32, i32)> {
    let (device, pid) = name
        .strip_prefix("neuron")?
        .strip_suffix(".slab")?
        .split_once('-')?;
    let pid: i32 = pid.parse().ok()?;
    (pid > 0).then_some((device.parse().ok()?, pid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slab_file_names() {
        assert_eq!(parse_slab_file_name("neuron1-4242.slab"), Some((1, 4242)));
        for name in [
            "neuron1-0.slab",
            "neuron-1.slab",
            "neuron1-42.tmp",
            "x1-2.slab",
        ] {
            assert_eq!(parse_slab_file_name(name), None, "{name}");
        }
    }

    #[test]
    fn a_built_name_parses_back() {
        for (device, pid) in [(0, 1), (3, 4242), (u32::MAX, i32::MAX)] {
            let name = slab_file_name(device, pid);
            assert_eq!(parse_slab_file_name(&name), Some((device, pid)), "{name}");
        }
    }
}
