//! The C side of the API, built with the system compilers against `include/` and this crate's
//! cdylib: `tests/c/nds_capi_test.c` runs over a slab file; `tests/c/nds_sdk_program.c`, which
//! uses only the SDK's declarations, must build as C and as C++ with every warning an error
//! (it runs in the QEMU guest, against the module); the header's counter indices and record
//! sizes must be this crate's, and every function it declares must be exported. `CC` and `CXX`
//! override the compilers.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use nds::abi::counters::{ExtNcCounter, NcCounter, NdCounter};
use nds::abi::records::{ModelMemUsage, ModelNodeInfo, ProcessInfo, ProcessInfoExt};
use nds_capi::NDL_DEVICE_CONTEXT_OFFSET;

/// Directory holding `libnds_capi.so`: the target profile dir, found from this test's path
/// (`target/<profile>/deps/<test>`).
fn library_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let deps = exe.parent().expect("deps dir");
    let found = [deps, deps.parent().expect("profile dir")]
        .into_iter()
        .find(|dir| dir.join("libnds_capi.so").is_file())
        .expect("libnds_capi.so next to the test binary")
        .to_path_buf();
    found
}

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The C test sources, `tests/c/` at the repository root.
fn c_source(name: &str) -> PathBuf {
    manifest_dir().join("../../tests/c").join(name)
}

/// A scratch path for one test's output, unique per process and test.
fn scratch(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("{name}-{}", std::process::id()))
}

/// Which language a source is compiled as.
#[derive(Clone, Copy)]
enum Language {
    C,
    Cxx,
}

impl Language {
    fn compiler(self) -> String {
        let (variable, default) = match self {
            Self::C => ("CC", "cc"),
            Self::Cxx => ("CXX", "c++"),
        };
        std::env::var(variable).unwrap_or_else(|_| default.to_owned())
    }

    fn flags(self) -> &'static [&'static str] {
        match self {
            Self::C => &["-x", "c", "-std=c11"],
            Self::Cxx => &["-x", "c++", "-std=c++17"],
        }
    }
}

/// Compiles `source` as `language` with `-Wall -Wextra -Werror` against the headers, links it
/// against the cdylib into `program`, and panics with the compiler's output on failure.
fn build(language: Language, source: &Path, program: &Path, defines: &[String]) {
    let libs = library_dir();
    let compiler = language.compiler();
    let output = Command::new(&compiler)
        .args(language.flags())
        .args(["-Wall", "-Wextra", "-Werror"])
        .args(defines)
        .arg("-I")
        .arg(manifest_dir().join("include"))
        .arg("-o")
        .arg(program)
        .arg(source)
        // Back to linking libraries, whatever language the source was.
        .args(["-x", "none", "-L"])
        .arg(&libs)
        .arg(format!("-Wl,-rpath,{}", libs.display()))
        .arg("-lnds_capi")
        .output()
        .unwrap_or_else(|e| panic!("running {compiler}: {e}"));
    assert!(
        output.status.success(),
        "{compiler} failed on {}:\n{}",
        source.display(),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn c_test_program_passes() {
    let program = scratch("nds_capi_test");
    build(
        Language::C,
        &c_source("nds_capi_test.c"),
        &program,
        &[format!("-DNDL_CONTEXT_OFFSET={NDL_DEVICE_CONTEXT_OFFSET}")],
    );
    // cargo puts target/<profile> on LD_LIBRARY_PATH, ahead of the rpath; the copy of the
    // library there is only refreshed by `cargo build`, so point the loader at the one linked.
    let output = Command::new(&program)
        .env("LD_LIBRARY_PATH", library_dir())
        .output()
        .expect("run the C test");
    let _ = std::fs::remove_file(&program);
    print!("{}", String::from_utf8_lossy(&output.stdout));
    eprint!("{}", String::from_utf8_lossy(&output.stderr));
    assert!(
        output.status.success(),
        "C test failed: {:?}",
        output.status
    );
}

#[test]
fn sdk_program_builds_as_c_and_cxx() {
    for (language, name) in [(Language::C, "c"), (Language::Cxx, "cxx")] {
        let program = scratch(&format!("nds_sdk_program-{name}"));
        build(language, &c_source("nds_sdk_program.c"), &program, &[]);
        let _ = std::fs::remove_file(&program);
    }
}

/// A C++ source that fails to compile unless every counter index and record size in the
/// headers equals this crate's.
fn header_agreement_source() -> String {
    let mut source = String::from("#include <nrt/nds/neuron_ds.h>\n");
    let mut check = |condition: String| {
        writeln!(source, "static_assert({condition}, \"{condition}\");").expect("string write");
    };
    let counters = NdCounter::ALL
        .iter()
        .map(|c| (c.name(), c.index()))
        .chain(NcCounter::ALL.iter().map(|c| (c.name(), c.index())))
        .chain(ExtNcCounter::ALL.iter().map(|c| (c.name(), c.index())));
    for (name, index) in counters {
        // The kernel's K27+ header names ND counter 13; the SDK's copy, and so ours, does not.
        if name != NdCounter::AggNeffId.name() {
            check(format!("{name} == {index}"));
        }
    }
    for (name, value) in [
        (
            "NDS_ND_COUNTER_COUNT",
            nds::abi::counters::NDS_ND_COUNTER_COUNT,
        ),
        (
            "NDS_NC_COUNTER_COUNT",
            nds::abi::counters::NDS_NC_COUNTER_COUNT,
        ),
        (
            "NDS_EXT_NC_COUNTER_LAST",
            nds::abi::counters::NDS_EXT_NC_COUNTER_LAST,
        ),
        (
            "NDS_EXT_NC_COUNTER_COUNT",
            nds::abi::counters::NDS_EXT_NC_COUNTER_COUNT,
        ),
        (
            "NDS_TOTAL_NC_COUNTER_COUNT",
            nds::abi::counters::NDS_TOTAL_NC_COUNTER_COUNT,
        ),
    ] {
        check(format!("{name} == {value}"));
    }
    for (name, size) in [
        ("nds_model_node_info_t", size_of::<ModelNodeInfo>()),
        (
            "nds_model_node_mem_usage_info_t",
            size_of::<ModelMemUsage>(),
        ),
        ("nds_process_info_t", size_of::<ProcessInfo>()),
        ("nds_process_info_ext_t", size_of::<ProcessInfoExt>()),
    ] {
        check(format!("sizeof({name}) == {size}"));
    }
    source.push_str("int main() { return 0; }\n");
    source
}

#[test]
fn header_counters_and_records_match_the_crate() {
    let source = scratch("nds_header_agreement.cc");
    std::fs::write(&source, header_agreement_source()).expect("write the check");
    let program = scratch("nds_header_agreement");
    build(Language::Cxx, &source, &program, &[]);
    let _ = std::fs::remove_file(&source);
    let _ = std::fs::remove_file(&program);
}

/// The functions the headers declare: every top-level line `<type> <name>(...);`.
fn declared_functions() -> Vec<String> {
    let mut names = Vec::new();
    for header in ["nrt/nds/neuron_ds.h", "ndl/ndl.h"] {
        let path = manifest_dir().join("include").join(header);
        let text = std::fs::read_to_string(&path).expect("read the header");
        for line in text.lines() {
            let top_level = line.starts_with(|c: char| c.is_ascii_alphabetic());
            if !top_level || line.starts_with("typedef") || !line.ends_with(");") {
                continue;
            }
            let before_paren = &line[..line.find('(').expect("a declaration has a '('")];
            let name = before_paren
                .rsplit(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .next()
                .expect("a name before '('");
            names.push(name.to_owned());
        }
    }
    names
}

#[test]
fn every_declared_function_is_exported() {
    let declared = declared_functions();
    // The SDK's 21 nds_* calls, ndl_open_device/ndl_close_device and the two extensions.
    assert_eq!(declared.len(), 25, "{declared:?}");
    let library = library_dir().join("libnds_capi.so");
    let output = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(&library)
        .output()
        .expect("run nm");
    assert!(output.status.success(), "nm {}", library.display());
    let symbols = String::from_utf8_lossy(&output.stdout);
    let exported: Vec<&str> = symbols
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let (kind, name) = (fields.nth(1)?, fields.next()?);
            (kind == "T").then_some(name)
        })
        .collect();
    let missing: Vec<&String> = declared
        .iter()
        .filter(|name| !exported.contains(&name.as_str()))
        .collect();
    assert!(missing.is_empty(), "declared but not exported: {missing:?}");
}
