//! The generated manual pages and completions against the tools' own command lines, and the
//! Debian package description against the list of tools.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command as Process;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{completion, footer_date, man_pages, write_assets, SHELLS};
use crate::tools::tools;
use clap::{Arg, Command};
use clap_complete::Shell;

/// Every visible command of a tool with its page name, the tool first.
fn visible_commands(tool: &Command) -> Vec<(String, Command)> {
    fn walk(command: &Command, page: String, out: &mut Vec<(String, Command)>) {
        out.push((page.clone(), command.clone()));
        for sub in command.get_subcommands().filter(|sub| !sub.is_hide_set()) {
            if sub.get_name() != "help" {
                walk(sub, format!("{page}-{}", sub.get_name()), out);
            }
        }
    }
    let mut out = Vec::new();
    walk(tool, tool.get_name().to_owned(), &mut out);
    out
}

/// The long options a user can type (help and version included).
fn long_flags(command: &Command) -> Vec<String> {
    let mut command = command.clone();
    command.build();
    command
        .get_arguments()
        .filter(|arg| !arg.is_hide_set())
        .filter_map(Arg::get_long)
        .map(str::to_owned)
        .collect()
}

fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nds-dist-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn the_tools_are_the_six_installed_programs() {
    let names: Vec<String> = tools().iter().map(|t| t.get_name().to_owned()).collect();
    assert_eq!(
        names,
        [
            "nrt-status",
            "nds-loadgen",
            "nds-metrics",
            "nds-monitor",
            "nds-top",
            "nds-ls"
        ]
    );
}

#[test]
fn every_visible_command_has_a_page_and_hidden_ones_none() {
    for tool in tools() {
        let pages: BTreeSet<String> = man_pages(&tool)
            .unwrap()
            .into_iter()
            .map(|page| page.file_name)
            .collect();
        let expected: BTreeSet<String> = visible_commands(&tool)
            .into_iter()
            .map(|(page, _)| format!("{page}.1"))
            .collect();
        assert_eq!(pages, expected, "pages of {}", tool.get_name());
    }
    let loadgen = tools().remove(1);
    let pages: Vec<String> = man_pages(&loadgen)
        .unwrap()
        .into_iter()
        .map(|p| p.file_name)
        .collect();
    assert!(pages.contains(&"nds-loadgen-run.1".to_owned()));
    assert!(
        !pages.iter().any(|page| page.contains("producer")),
        "hidden subcommand: {pages:?}"
    );
    assert!(
        !pages.iter().any(|page| page.contains("help")),
        "help subcommand: {pages:?}"
    );
}

#[test]
fn every_page_documents_every_option_of_its_command() {
    for tool in tools() {
        let pages = man_pages(&tool).unwrap();
        for (page, command) in visible_commands(&tool) {
            let file_name = format!("{page}.1");
            let text = String::from_utf8(
                pages
                    .iter()
                    .find(|p| p.file_name == file_name)
                    .unwrap()
                    .contents
                    .clone(),
            )
            .unwrap();
            assert!(
                text.contains(&format!(".TH {page} 1 ")),
                "{file_name}: title"
            );
            assert!(text.contains("neuron-ds 0.1.0"), "{file_name}: source");
            assert!(text.contains(".SH \"SEE ALSO\""), "{file_name}: see also");
            for flag in long_flags(&command) {
                let roff = format!("\\-\\-{}", flag.replace('-', "\\-"));
                assert!(text.contains(&roff), "{file_name} lacks --{flag}");
            }
            if let Some(about) = command.get_about() {
                let first_words: String = about.to_string().chars().take(20).collect();
                let roff_about = text.replace("\\-", "-").replace("\\*(Aq", "'");
                assert!(
                    roff_about.contains(&first_words),
                    "{file_name} lacks {first_words:?}"
                );
            }
        }
    }
}

#[test]
fn completions_offer_every_option_of_every_command() {
    for tool in tools() {
        let name = tool.get_name().to_owned();
        for (shell, _) in SHELLS {
            let script = completion(shell, &tool);
            let text = String::from_utf8(script.contents).unwrap();
            let (file_name, marker) = match shell {
                Shell::Bash => (
                    name.clone(),
                    format!("complete -F _{}", name.replace('-', "__")),
                ),
                Shell::Zsh => (format!("_{name}"), format!("#compdef {name}")),
                Shell::Fish => (format!("{name}.fish"), format!("complete -c {name}")),
                other => unreachable!("no completions for {other}"),
            };
            assert_eq!(script.file_name, file_name);
            assert!(text.contains(&marker), "{file_name} lacks {marker:?}");
            for (_, command) in visible_commands(&tool) {
                for flag in long_flags(&command) {
                    let wanted = match shell {
                        Shell::Fish => format!("-l {flag}"),
                        _ => format!("--{flag}"),
                    };
                    assert!(
                        text.contains(&wanted),
                        "{shell} completion of {name} lacks {wanted}"
                    );
                }
            }
        }
    }
}

#[test]
fn bash_and_zsh_accept_the_scripts() {
    let dir = scratch_dir("syntax");
    write_assets(&dir).unwrap();
    for (shell, check) in [("bash", "bash/nds-loadgen"), ("zsh", "zsh/_nds-loadgen")] {
        let path = dir.join("completions").join(check);
        // zsh is not on every machine; bash is.
        let Ok(status) = Process::new(shell).arg("-n").arg(&path).status() else {
            assert_ne!(shell, "bash", "bash must be installed");
            continue;
        };
        assert!(status.success(), "{shell} -n {}", path.display());
    }
    // A bash that sources the script knows the completion function.
    let script = dir.join("completions/bash/nds-monitor");
    let output = Process::new("bash")
        .arg("-c")
        .arg(format!(
            "source {} && complete -p nds-monitor",
            script.display()
        ))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("nds-monitor"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn write_assets_lays_out_man_and_completion_directories() {
    let dir = scratch_dir("layout");
    let written = write_assets(&dir).unwrap();
    let relative: BTreeSet<String> = written
        .iter()
        .map(|path| path.strip_prefix(&dir).unwrap().display().to_string())
        .collect();
    let page_count: usize = tools().iter().map(|t| visible_commands(t).len()).sum();
    assert_eq!(written.len(), page_count + SHELLS.len() * tools().len());
    for name in [
        "nrt-status",
        "nds-loadgen",
        "nds-metrics",
        "nds-monitor",
        "nds-top",
        "nds-ls",
    ] {
        for file in [
            format!("man/man1/{name}.1"),
            format!("completions/bash/{name}"),
            format!("completions/zsh/_{name}"),
            format!("completions/fish/{name}.fish"),
        ] {
            assert!(relative.contains(&file), "missing {file}");
            assert!(
                Path::new(&dir).join(&file).metadata().unwrap().len() > 100,
                "{file} is short"
            );
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_debian_package_ships_exactly_the_tools() {
    let manifest =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml")).unwrap();
    let shipped: BTreeSet<&str> = manifest
        .lines()
        .filter_map(|line| line.trim().strip_prefix("[\"target/release/"))
        .filter_map(|rest| rest.split('"').next())
        .filter(|source| !source.starts_with("dist/"))
        .collect();
    let tools: Vec<String> = tools().iter().map(|t| t.get_name().to_owned()).collect();
    let tools: BTreeSet<&str> = tools.iter().map(String::as_str).collect();
    assert_eq!(shipped, tools);
}

#[test]
fn every_tool_keeps_its_own_about() {
    for tool in tools() {
        let about = tool
            .get_about()
            .map(ToString::to_string)
            .unwrap_or_default();
        assert_ne!(about, env!("CARGO_PKG_DESCRIPTION"), "{}", tool.get_name());
        assert!(!about.is_empty(), "{} has no about", tool.get_name());
    }
    let monitor = tools().remove(3);
    assert_eq!(
        monitor.get_about().unwrap().to_string(),
        "neuron-monitor for the Neuron DataStore: JSON reports per period and Prometheus \
         exposition from every owned slab and the kernel's totals"
    );
}

/// A clock reading `seconds` after 1970.
fn at(seconds: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(seconds)
}

#[test]
fn the_footer_date_is_the_utc_day_of_source_date_epoch() {
    let now = at(1_772_323_200);
    for (seconds, day) in [
        ("0", "1970-01-01"),
        ("86399", "1970-01-01"),
        ("86400", "1970-01-02"),
        ("5097600", "1970-03-01"),
        // 2000 is a leap year (divisible by 400), 2100 is none (by 100 only).
        ("951782400", "2000-02-29"),
        ("4107542399", "2100-02-28"),
        ("4107542400", "2100-03-01"),
        ("1703980800", "2023-12-31"),
        ("253402300799", "9999-12-31"),
    ] {
        assert_eq!(footer_date(Some(seconds), now), day, "{seconds}");
    }
}

#[test]
fn without_a_usable_source_date_epoch_the_footer_date_is_today() {
    let now = at(1_772_323_200);
    for unusable in [
        None,
        Some(""),
        Some("yesterday"),
        Some("-1"),
        Some("1.5"),
        // The year 10000, and past what a clock can hold.
        Some("253402300800"),
        Some("18446744073709551615"),
    ] {
        assert_eq!(footer_date(unusable, now), "2026-03-01", "{unusable:?}");
    }
    let before_1970 = UNIX_EPOCH - Duration::from_secs(1);
    assert_eq!(footer_date(None, before_1970), "1970-01-01");
    assert_eq!(footer_date(Some("86400"), before_1970), "1970-01-02");
}
