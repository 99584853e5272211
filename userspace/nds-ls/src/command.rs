//! A process's command, as `/proc` shows it.

use std::fs;
use std::path::Path;

/// The command of process `pid` under `proc_root` (normally `/proc`): its command line
/// (`<pid>/cmdline`, arguments joined by spaces), as neuron-ls shows it; else its name
/// (`<pid>/comm`), for a process whose command line is empty (a zombie whose memory is gone);
/// else empty (the process is gone, or hidden from us). Invalid UTF-8 is replaced. The text
/// is returned as the process wrote it: escaping is the printer's job.
#[must_use]
pub fn command_of(proc_root: &Path, pid: i32) -> String {
    let dir = proc_root.join(pid.to_string());
    if let Ok(bytes) = fs::read(dir.join("cmdline")) {
        let args = bytes.strip_suffix(&[0]).unwrap_or(&bytes);
        if !args.is_empty() {
            let joined: Vec<u8> = args
                .iter()
                .map(|&byte| if byte == 0 { b' ' } else { byte })
                .collect();
            return String::from_utf8_lossy(&joined).into_owned();
        }
    }
    match fs::read(dir.join("comm")) {
        Ok(bytes) => {
            let name = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
            String::from_utf8_lossy(name).into_owned()
        }
        Err(_) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proc_dir(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("nds-ls-proc-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn the_command_line_joins_arguments_and_falls_back_to_the_name() {
        let root = proc_dir("fallback");
        fs::create_dir_all(root.join("10")).unwrap();
        fs::write(
            root.join("10/cmdline"),
            b"python3\0serve.py\0--port\0\x008000\0",
        )
        .unwrap();
        fs::write(root.join("10/comm"), b"python3\n").unwrap();
        assert_eq!(command_of(&root, 10), "python3 serve.py --port  8000");
        fs::create_dir_all(root.join("11")).unwrap();
        fs::write(root.join("11/cmdline"), b"").unwrap();
        fs::write(root.join("11/comm"), b"zombie\xff\n").unwrap();
        assert_eq!(command_of(&root, 11), "zombie\u{fffd}");
        assert_eq!(command_of(&root, 12), "");
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn this_process_is_found_in_the_real_proc() {
        let pid = i32::try_from(std::process::id()).unwrap();
        let command = command_of(Path::new("/proc"), pid);
        let exe = std::env::args().next().unwrap();
        assert!(command.starts_with(&exe), "{command:?} vs {exe:?}");
    }
}
