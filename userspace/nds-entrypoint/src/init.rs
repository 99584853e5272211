//! The monitor as the child of an init, when the entrypoint is its pid namespace's process 1.
//!
//! A container's first process is process 1 of its pid namespace, and the kernel delivers no
//! signal to process 1 whose action is the default: `SIGTERM` from the runtime (`podman stop`,
//! a pod's deletion) would be ignored until the grace period ends in `SIGKILL`. So process 1
//! stays a small init: it starts the monitor as its child, passes the termination signals on
//! to it, reaps whatever exits, and ends with the monitor's status once the monitor is gone.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};

use crate::error::{Error, Result};

/// The signals passed on to the monitor.
const FORWARDED: [libc::c_int; 4] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT];

/// Whether this process is process 1 of its pid namespace.
#[must_use]
pub fn is_pid_one() -> bool {
    std::process::id() == 1
}

/// A signal set of `signals`.
fn signal_set(signals: &[libc::c_int]) -> libc::sigset_t {
    // SAFETY: sigemptyset initializes the set it is given; sigaddset only adds valid signals.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &signal in signals {
            libc::sigaddset(&mut set, signal);
        }
        set
    }
}

/// Runs `command` as this init's child until it exits; returns the exit code for the
/// container: the monitor's, or 128 + the signal that ended it.
///
/// # Errors
///
/// The signals cannot be blocked, or the monitor cannot be started.
pub fn supervise(command: &mut Command) -> Result<i32> {
    let mut signals = FORWARDED.to_vec();
    signals.push(libc::SIGCHLD);
    let set = signal_set(&signals);
    // Blocked here and waited for below.
    // SAFETY: `set` is an initialized signal set; the old mask is not wanted.
    let blocked = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if blocked != 0 {
        return Err(Error::Init(io::Error::from_raw_os_error(blocked)));
    }
    // The monitor gets them again, with their default actions: a mask and ignored
    // dispositions are inherited across exec.
    // SAFETY: between fork and exec, only async-signal-safe calls (signal, sigprocmask) on
    // values owned by the closure.
    unsafe {
        command.pre_exec(move || {
            for &signal in &signals {
                if libc::signal(signal, libc::SIG_DFL) == libc::SIG_ERR {
                    return Err(io::Error::last_os_error());
                }
            }
            if libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut()) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = command.spawn().map_err(|source| Error::Exec {
        monitor: command.get_program().into(),
        source,
    })?;
    Ok(wait_for(&child, &set))
}

fn wait_for(child: &Child, set: &libc::sigset_t) -> i32 {
    let monitor = i32::try_from(child.id()).unwrap_or(i32::MAX);
    loop {
        let mut signal = 0;
        // SAFETY: `set` is initialized and `signal` is a valid place for the result.
        if unsafe { libc::sigwait(set, &mut signal) } != 0 {
            continue;
        }
        if signal != libc::SIGCHLD {
            // SAFETY: kill has no memory effects; the child is not reaped yet, so its pid is
            // still its own.
            unsafe { libc::kill(monitor, signal) };
            continue;
        }
        // Orphans are reparented to process 1: reap them all, and stop once the monitor is.
        loop {
            let mut status = 0;
            // SAFETY: `status` is a valid place for the result.
            let reaped = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            if reaped <= 0 {
                break;
            }
            if reaped == monitor {
                return if libc::WIFSIGNALED(status) {
                    128 + libc::WTERMSIG(status)
                } else {
                    libc::WEXITSTATUS(status)
                };
            }
        }
    }
}
