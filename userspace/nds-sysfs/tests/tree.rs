//! The reader over a tree laid out like the module's.

use std::fs;
use std::path::{Path, PathBuf};

use nds_abi::sysfs::{sysfs_counter, SysfsGroup, SYSFS_COUNTERS};
use nds_sysfs::{SysfsFile, SysfsRoot};

struct Tree(PathBuf);

impl Tree {
    fn new(name: &str) -> Self {
        let path = std::env::temp_dir().join(format!("nds-sysfs-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).unwrap();
        Self(path)
    }

    fn write(&self, relative: impl AsRef<Path>, text: &str) {
        let path = self.0.join(relative);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    /// A device with `cores` cores whose every counter total is `seed + table index`.
    fn device(&self, device: u32, cores: usize, seed: u64) {
        self.write(
            format!("neuron{device}/datastore/slots"),
            "slot pid clear_tick generation\n0 0 0 0\n1 77 0 1\n",
        );
        for core in 0..cores {
            for (index, counter) in SYSFS_COUNTERS.iter().enumerate() {
                let dir = format!(
                    "neuron{device}/neuron_core{core}/stats/{}/{}",
                    counter.group.dir_name(),
                    counter.name
                );
                self.write(
                    format!("{dir}/total"),
                    &format!("{}\n", seed + index as u64),
                );
                self.write(format!("{dir}/present"), "0\n");
            }
        }
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

#[test]
fn walks_devices_cores_slots_and_totals() {
    let tree = Tree::new("walk");
    tree.device(0, 2, 100);
    tree.device(1, 1, 500);
    // Not ours: no datastore directory, or not a plain number.
    tree.write("neuron7/dev", "10:1\n");
    tree.write("neuronx/datastore/slots", "");
    let root = SysfsRoot::new(&tree.0);
    assert_eq!(root.devices().unwrap(), vec![0, 1]);
    assert_eq!(root.cores(0).unwrap(), vec![0, 1]);
    assert_eq!(root.slots(1).unwrap()[1].pid, 77);

    let totals = root.all_totals().unwrap();
    assert_eq!(totals.len(), 3);
    assert_eq!((totals[2].device, totals[2].core), (1, 0));
    assert_eq!(totals[2].get("success"), Some(500));
    assert_eq!(totals[0].get("nc_time_in_use"), Some(100 + 27));
    let flops = sysfs_counter(SysfsGroup::OtherInfo, "flop_count").unwrap();
    assert_eq!(
        root.counter(0, 1, flops, SysfsFile::Total).unwrap(),
        100 + 26
    );
    assert_eq!(root.counter(0, 1, flops, SysfsFile::Present).unwrap(), 0);
}

#[test]
fn a_missing_root_has_no_devices_and_bad_files_are_errors() {
    let tree = Tree::new("bad");
    assert!(SysfsRoot::new(tree.0.join("absent"))
        .devices()
        .unwrap()
        .is_empty());
    tree.device(0, 1, 0);
    tree.write("neuron0/neuron_core0/stats/status/success/total", "lots\n");
    let error = SysfsRoot::new(&tree.0).all_totals().unwrap_err();
    assert!(error.to_string().contains("success/total"), "{error}");
    // Each device's totals are read on their own: a bad file spoils only its device's.
    tree.device(1, 1, 9);
    let root = SysfsRoot::new(&tree.0);
    assert!(root.device_totals(0).is_err());
    assert_eq!(root.device_totals(1).unwrap()[0].get("success"), Some(9));
}

#[test]
fn devices_of_another_node_name_are_found_by_their_number() {
    let tree = Tree::new("node-name");
    tree.write(
        "nds3/datastore/slots",
        "slot pid clear_tick generation\n0 41 0 1\n",
    );
    tree.write("nds3/neuron_core0/stats/status/success/total", "7\n");
    // A device of another class member without a datastore is not one of ours.
    tree.write("nds4/power/control", "auto\n");
    let root = SysfsRoot::new(&tree.0);
    assert_eq!(root.devices().unwrap(), vec![3]);
    assert_eq!(root.device_dir(3), tree.0.join("nds3"));
    assert_eq!(root.slots(3).unwrap()[0].pid, 41);
    let success = sysfs_counter(SysfsGroup::Status, "success").unwrap();
    assert_eq!(root.counter(3, 0, success, SysfsFile::Total).unwrap(), 7);
}

#[test]
fn core_count_is_read_strictly_and_absent_without_the_file() {
    let tree = Tree::new("core-count");
    tree.device(0, 2, 0);
    tree.device(1, 2, 0);
    tree.device(2, 2, 0);
    tree.write("neuron0/core_count", "4\n");
    tree.write("neuron1/core_count", "four\n");
    let root = SysfsRoot::new(&tree.0);
    assert_eq!(root.core_count(0).unwrap(), Some(4));
    let error = root.core_count(1).unwrap_err();
    assert!(error.to_string().contains("neuron1/core_count"), "{error}");
    assert!(error.to_string().contains("\"four\""), "{error}");
    assert_eq!(root.core_count(2).unwrap(), None);
    // Present but unreadable (a directory here) is an error, not a missing file.
    fs::create_dir_all(tree.0.join("neuron2/core_count")).unwrap();
    assert!(root.core_count(2).is_err());
}
