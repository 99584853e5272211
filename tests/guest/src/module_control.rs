//! Loading and unloading the module with the system calls themselves (as insmod and rmmod
//! do), so that a campaign sees the exact errno and can arm failure injection around them.

use crate::{MODULE_CLASS, SYSFS_CLASS};
use std::{ffi::CString, fs, fs::File, io, os::fd::AsRawFd, process::Command};

/// The module's name.
pub const MODULE: &str = "neuron_ds";

fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// `finit_module` of the module file `ko` with `params`; the errno on failure.
pub fn load_module(ko: &str, params: &str) -> Result<(), i32> {
    let file = File::open(ko).map_err(|e| e.raw_os_error().unwrap_or(0))?;
    let params = CString::new(params).map_err(|_| libc::EINVAL)?;
    // SAFETY: a module file descriptor and a NUL-terminated parameter string.
    let ret =
        unsafe { libc::syscall(libc::SYS_finit_module, file.as_raw_fd(), params.as_ptr(), 0) };
    if ret == 0 {
        Ok(())
    } else {
        Err(errno())
    }
}

/// `delete_module` without waiting for users to go away (as rmmod does): EAGAIN while the
/// module is in use.
pub fn unload_module() -> Result<(), i32> {
    let name = CString::new(MODULE).expect("no NUL in the name");
    // SAFETY: a NUL-terminated module name.
    let ret = unsafe { libc::syscall(libc::SYS_delete_module, name.as_ptr(), libc::O_NONBLOCK) };
    if ret == 0 {
        Ok(())
    } else {
        Err(errno())
    }
}

/// What is still registered of the module: its module directory, its /proc/modules entry,
/// device nodes, devices in the sysfs class, or a class of its own.
pub fn leftovers() -> Vec<String> {
    let mut found = Vec::new();
    if fs::metadata(format!("/sys/module/{MODULE}")).is_ok() {
        found.push(format!("/sys/module/{MODULE}"));
    }
    let listed = fs::read_to_string("/proc/modules")
        .is_ok_and(|m| m.lines().any(|l| l.split(' ').next() == Some(MODULE)));
    if listed {
        found.push("its /proc/modules entry".into());
    }
    for dir in ["/dev", SYSFS_CLASS] {
        if let Ok(entries) = fs::read_dir(dir) {
            for entry in entries.filter_map(Result::ok) {
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.starts_with("neuron") {
                    found.push(format!("{dir}/{name}"));
                }
            }
        }
    }
    if fs::metadata(MODULE_CLASS).is_ok() {
        found.push(MODULE_CLASS.into());
    }
    found
}

/// Runs `program` with `args`; panics unless it succeeds.
pub fn run(program: &str, args: &[&str]) {
    let status = Command::new(program).args(args).status().unwrap();
    assert!(status.success(), "{program} {args:?}: {status}");
}

/// The parameters the harness loaded the module with (`/module.params`).
pub fn harness_params() -> Vec<String> {
    fs::read_to_string("/module.params")
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// Reloads the module with the harness's parameters, overridden by `extra`; loads it if a
/// test left it unloaded.
pub fn reload_with(extra: &[&str]) {
    if fs::metadata(format!("/sys/module/{MODULE}")).is_ok() {
        run("rmmod", &[MODULE]);
        crate::kcov::module_replaced();
    }
    let mut params: Vec<String> = harness_params()
        .into_iter()
        .filter(|p| {
            !extra
                .iter()
                .any(|e| e.split('=').next() == p.split('=').next())
        })
        .collect();
    params.extend(extra.iter().map(|e| (*e).to_owned()));
    let params = params.join(" ");
    // Loaded by this thread (as insmod would), so that a followed thread traces `init`.
    crate::kcov::following_load(|| load_module("/neuron_ds.ko", &params))
        .unwrap_or_else(|e| panic!("loading the module with {params:?}: errno {e}"));
}

/// Puts the harness's module back when a test ends, even by a failed assertion.
pub struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        reload_with(&[]);
    }
}
