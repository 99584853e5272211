//! Builds `tests/c/nds_capi_test.c` with the system C compiler against this crate's cdylib
//! and runs it. `CC` overrides the compiler.

use std::path::{Path, PathBuf};
use std::process::Command;

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

#[test]
fn c_test_program_passes() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let source = manifest.join("../../tests/c/nds_capi_test.c");
    let include = manifest.join("include");
    let libs = library_dir();
    let program = std::env::temp_dir().join(format!("nds_capi_test-{}", std::process::id()));

    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let compiled = Command::new(&compiler)
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&program)
        .arg(&source)
        .arg("-I")
        .arg(&include)
        .arg("-L")
        .arg(&libs)
        .arg(format!("-Wl,-rpath,{}", libs.display()))
        .arg("-lnds_capi")
        .status()
        .unwrap_or_else(|e| panic!("running {compiler}: {e}"));
    assert!(compiled.success(), "compiling {}", source.display());

    let output = Command::new(&program).output().expect("run the C test");
    let _ = std::fs::remove_file(&program);
    print!("{}", String::from_utf8_lossy(&output.stdout));
    eprint!("{}", String::from_utf8_lossy(&output.stderr));
    assert!(
        output.status.success(),
        "C test failed: {:?}",
        output.status
    );
}
