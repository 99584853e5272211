//! Credentials a helper process switches to at its start: root, a plain uid, or a uid that
//! keeps exactly one capability (also raised as an ambient capability, the way a service
//! manager grants `CAP_PERFMON` to a monitor).

use std::{io, os::unix::process::CommandExt, process::Command};

/// Set in the image [`Identity::become_user`] executes, which runs as that identity already.
const BECAME: &str = "NEURON_DS_IDENTITY_BECAME";

const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Credentials, written `root`, `uid:N` or `uid:N+cap:C`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Identity {
    /// uid 0 with every capability.
    Root,
    /// This uid, no capabilities.
    User(u32),
    /// This uid with exactly this one capability, kept across exec as an ambient capability.
    UserWithCap(u32, u32),
}

impl Identity {
    /// Parses `root`, `uid:N` or `uid:N+cap:C`.
    pub fn parse(text: &str) -> Option<Self> {
        if text == "root" {
            return Some(Self::Root);
        }
        let (uid, cap) = match text.split_once('+') {
            Some((uid, cap)) => (uid, Some(cap.strip_prefix("cap:")?.parse().ok()?)),
            None => (text, None),
        };
        let uid = uid.strip_prefix("uid:")?.parse().ok()?;
        Some(cap.map_or(Self::User(uid), |cap| Self::UserWithCap(uid, cap)))
    }

    /// The text [`Identity::parse`] reads.
    pub fn text(self) -> String {
        match self {
            Self::Root => "root".into(),
            Self::User(uid) => format!("uid:{uid}"),
            Self::UserWithCap(uid, cap) => format!("uid:{uid}+cap:{cap}"),
        }
    }

    /// Switches the calling single-threaded process to these credentials (raw system calls,
    /// which act on the calling thread only).
    pub fn assume(self) -> io::Result<()> {
        let check = |ret: libc::c_long| {
            if ret == 0 {
                Ok(())
            } else {
                Err(io::Error::last_os_error())
            }
        };
        let (uid, cap) = match self {
            Identity::Root => return Ok(()),
            Identity::User(uid) => (uid, None),
            Identity::UserWithCap(uid, cap) => (uid, Some(cap)),
        };
        // SAFETY: plain system calls on the calling process with valid arguments.
        unsafe {
            check(libc::syscall(
                libc::SYS_setgroups,
                0,
                std::ptr::null::<libc::gid_t>(),
            ))?;
            if cap.is_some() {
                check(libc::syscall(
                    libc::SYS_prctl,
                    libc::PR_SET_KEEPCAPS,
                    1,
                    0,
                    0,
                    0,
                ))?;
            }
            check(libc::syscall(libc::SYS_setresgid, uid, uid, uid))?;
            check(libc::syscall(libc::SYS_setresuid, uid, uid, uid))?;
            if let Some(cap) = cap {
                let header = CapHeader {
                    version: LINUX_CAPABILITY_VERSION_3,
                    pid: 0,
                };
                let mut data = [CapData::default(); 2];
                let word = &mut data[(cap / 32) as usize];
                let bit = 1 << (cap % 32);
                (word.effective, word.permitted, word.inheritable) = (bit, bit, bit);
                check(libc::syscall(libc::SYS_capset, &header, data.as_ptr()))?;
                let raise = (libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_RAISE);
                check(libc::syscall(libc::SYS_prctl, raise.0, raise.1, cap, 0, 0))?;
            }
        }
        Ok(())
    }
}

impl Identity {
    /// Switches to these credentials and executes the program again with the same arguments,
    /// so that it runs as a process its user started would. The switch alone leaves the process
    /// non-dumpable (the kernel does that to a process whose uids change), which the kernel's
    /// rule for reading another process's state refuses same-uid readers for; the `execve`
    /// after it makes the process dumpable again. Returns only in the new image.
    pub fn become_user(self) -> io::Result<()> {
        if std::env::var_os(BECAME).is_some() {
            return Ok(());
        }
        self.assume()?;
        let mut args = std::env::args_os().skip(1);
        let error = Command::new("/proc/self/exe")
            .arg0(std::env::args_os().next().unwrap_or_default())
            .args(&mut args)
            .env(BECAME, "1")
            .exec();
        Err(error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_round_trip_through_text() {
        for identity in [
            Identity::Root,
            Identity::User(1002),
            Identity::UserWithCap(1003, 38),
        ] {
            assert_eq!(Identity::parse(&identity.text()), Some(identity));
        }
        assert_eq!(Identity::parse("uid:x"), None);
        assert_eq!(Identity::parse("uid:1+38"), None);
    }
}
