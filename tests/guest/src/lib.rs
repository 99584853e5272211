//! Helpers shared by the guest integration tests: raw access to the device node with
//! real system calls, so each test sees exactly the errno the kernel returned.

use std::{
    fs::{File, OpenOptions},
    io,
    os::fd::AsRawFd,
};

/// The first device node the module creates with default parameters.
pub const DEVICE: &str = "/dev/neuron0";

/// Opens `path` read-write, as a producer would.
pub fn open_device(path: &str) -> io::Result<File> {
    OpenOptions::new().read(true).write(true).open(path)
}

/// Issues `ioctl(fd, cmd, arg)` and returns the kernel's result or errno.
///
/// `cmd` is cast to the C library's request type, which is `int` on musl: the bits are
/// what the kernel sees either way.
pub fn ioctl(file: &File, cmd: u32, arg: usize) -> io::Result<i32> {
    // SAFETY: the commands under test either ignore `arg` or treat it as a user pointer
    // that the kernel validates; a bad pointer yields EFAULT, never memory corruption here.
    let ret = unsafe { libc::ioctl(file.as_raw_fd(), cmd as libc::Ioctl, arg) };
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}
