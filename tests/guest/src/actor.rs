//! The actors of the tenure and ledger tests: `ds-tenure` processes (`src/bin/ds-tenure.rs`
//! says what each mode does), each under an identity of its own, answering commands on their
//! standard input.

use crate::helper_path;
use std::{
    io::{BufRead, BufReader, Write},
    process::{Child, ChildStdin, ChildStdout, Command, Stdio},
};

/// A running `ds-tenure`.
pub struct Actor {
    child: Child,
    stdin: Option<ChildStdin>,
    /// Its standard output, after its first line.
    pub stdout: BufReader<ChildStdout>,
    /// Its pid.
    pub pid: i32,
    /// Its first line.
    pub hello: String,
}

impl Actor {
    /// Starts `ds-tenure IDENTITY MODE ARGS...` and reads its first line.
    pub fn start(identity: &str, mode: &str, args: &[&str]) -> Self {
        let mut child = Command::new(helper_path("ds-tenure"))
            .arg(identity)
            .arg(mode)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start ds-tenure");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut hello = String::new();
        stdout.read_line(&mut hello).unwrap();
        assert!(
            !hello.is_empty(),
            "ds-tenure {identity} {mode} {args:?} said nothing"
        );
        Self {
            pid: child.id() as i32,
            stdin: child.stdin.take(),
            child,
            stdout,
            hello: hello.trim().to_owned(),
        }
    }

    /// An owner holding a slab with `marker` in it.
    pub fn owner(identity: &str, marker: u64) -> Self {
        let actor = Self::start(identity, "hold", &["0", &marker.to_string()]);
        assert!(actor.hello.starts_with("ready "), "{}", actor.hello);
        actor
    }

    /// The offset its `ready <offset>` line names.
    pub fn offset(&self) -> u64 {
        let word = self.hello.split_whitespace().nth(1).unwrap();
        word.parse().unwrap()
    }

    /// Sends `command` and returns the answer line, if one comes (`None`: it exited).
    pub fn ask(&mut self, command: &str) -> Option<String> {
        writeln!(self.stdin.as_mut().unwrap(), "{command}").unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).ok()?;
        (!line.is_empty()).then(|| line.trim().to_owned())
    }

    /// The `scan` answer's fields.
    pub fn scan(&mut self) -> Scan {
        let line = self.ask("scan").expect("the scan ended the actor");
        let field = |name: &str| -> u64 {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{line}"))
        };
        Scan {
            nonzero: field("nonzero"),
            counter: field("counter"),
            generation: field("generation"),
        }
    }

    /// Closes its standard input and waits for it to end.
    pub fn stop(mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        self.child.wait().unwrap()
    }
}

impl Drop for Actor {
    fn drop(&mut self) {
        if self.stdin.take().is_some() {
            let _ = self.child.wait();
        }
    }
}

/// What a `scan` read of every mapping of an actor showed.
#[derive(Debug, PartialEq, Eq)]
pub struct Scan {
    /// Nonzero bytes of every mapping.
    pub nonzero: u64,
    /// Counter 1 of core 0 of the first mapping.
    pub counter: u64,
    /// The generation word of the first mapping.
    pub generation: u64,
}

/// What a mapping that shows nothing of any tenure reads.
pub const NOTHING: Scan = Scan {
    nonzero: 0,
    counter: 0,
    generation: 0,
};
