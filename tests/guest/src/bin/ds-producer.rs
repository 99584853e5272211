//! A stand-in producer for the guest tests: acquires its own slab on a device, maps it
//! writable, adds the counters given as `core:index=value` arguments, prints
//! `ready <mmap offset>`, then takes commands on stdin, one per line:
//!
//! * `release`: munmap, RELEASE, exit 0;
//! * `exit`: exit 0 without RELEASE (closing the device releases the slab);
//! * `release-keep`: RELEASE, keeping the mapping and the file; prints `released <pages>`, the
//!   pages of the mapping still mapped afterwards;
//! * `write`: writes 666 into counter 1 of core 0 through the mapping, prints `wrote`.

use neuron_ds_guest_tests::{acquire, kcov, nc_offset, open_device, release, Mapping, SLAB_SIZE};
use std::io::{self, BufRead, Write};

fn main() -> io::Result<()> {
    let result = produce();
    kcov::end_thread();
    result
}

fn produce() -> io::Result<()> {
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
    for command in io::stdin().lock().lines() {
        match command?.trim() {
            "release" => {
                drop(slab);
                release(&file, 0)?;
                return Ok(());
            }
            "release-keep" => {
                release(&file, 0)?;
                println!("released {}", slab.resident_pages());
            }
            "write" => {
                slab.write_u64(nc_offset(0, 1), 666);
                println!("wrote");
            }
            _ => return Ok(()),
        }
        io::stdout().flush()?;
    }
    Ok(())
}
