//! A stand-in producer for the guest tests: acquires its own slab on a device, maps it
//! writable, adds the counters given as `core:index=value` arguments, prints
//! `ready <mmap offset>`, then waits for one command on stdin: `release` (munmap, RELEASE,
//! exit 0) or `exit` (exit 0 without RELEASE; closing the device releases the slab).

use neuron_ds_guest_tests::{acquire, nc_offset, open_device, release, Mapping, SLAB_SIZE};
use std::io::{self, BufRead, Write};

fn main() -> io::Result<()> {
    let mut args = std::env::args().skip(1);
    let device = args
        .next()
        .expect("usage: ds-producer DEVICE [core:index=value ...]");
    let file = open_device(&device)?;
    let info = acquire(&file, 0)?;
    let slab = Mapping::new(
        &file,
        SLAB_SIZE,
        libc::PROT_READ | libc::PROT_WRITE,
        info.mmap_offset,
    )?;
    for spec in args {
        let (place, value) = spec.split_once('=').expect("core:index=value");
        let (core, index) = place.split_once(':').expect("core:index=value");
        let offset = nc_offset(core.parse().unwrap(), index.parse().unwrap());
        let value: u64 = value.parse().unwrap();
        slab.write_u64(offset, slab.read_u64(offset) + value);
    }
    println!("ready {}", info.mmap_offset);
    io::stdout().flush()?;
    let mut command = String::new();
    io::stdin().lock().read_line(&mut command)?;
    if command.trim() == "release" {
        drop(slab);
        release(&file, 0)?;
    }
    Ok(())
}
