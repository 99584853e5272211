//! Reading the unit of `TIME_IN_USE` from a module directory laid out like the kernel's.

use std::fs;
use std::path::PathBuf;

use nds_sysfs::{Error, TimeInUseUnit};

/// A scratch directory standing in for `/sys/module/neuron_ds`, removed when dropped.
struct ModuleDir(PathBuf);

impl ModuleDir {
    fn new(name: &str) -> Self {
        let path =
            std::env::temp_dir().join(format!("nds-sysfs-unit-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(path.join("parameters")).unwrap();
        Self(path)
    }

    fn parameter(&self, text: &str) {
        fs::write(self.0.join("parameters/time_in_use_unit_ps"), text).unwrap();
    }
}

impl Drop for ModuleDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

#[test]
fn the_parameter_names_the_unit() {
    let module = ModuleDir::new("present");
    module.parameter("1000000\n");
    assert_eq!(
        TimeInUseUnit::of_module(&module.0).unwrap(),
        TimeInUseUnit::MICROSECOND
    );
    module.parameter("1\n");
    assert_eq!(
        TimeInUseUnit::of_module(&module.0).unwrap(),
        TimeInUseUnit::PICOSECOND
    );
    module.parameter("1000\n");
    assert_eq!(
        TimeInUseUnit::of_module(&module.0)
            .unwrap()
            .ps_per_unit()
            .get(),
        1000
    );
}

#[test]
fn without_the_module_the_unit_is_the_modules_default() {
    let module = ModuleDir::new("absent");
    assert_eq!(
        TimeInUseUnit::of_module(&module.0).unwrap(),
        TimeInUseUnit::PICOSECOND,
        "a module directory without the parameter"
    );
    assert_eq!(
        TimeInUseUnit::of_module(&module.0.join("not-loaded")).unwrap(),
        TimeInUseUnit::PICOSECOND,
        "no module directory at all"
    );
}

#[test]
fn a_malformed_parameter_is_an_error_naming_the_file() {
    let module = ModuleDir::new("malformed");
    for text in [
        "0\n",
        "",
        "-1\n",
        "1e6\n",
        "ps\n",
        "1 2\n",
        "18446744073709551616\n",
    ] {
        module.parameter(text);
        match TimeInUseUnit::of_module(&module.0) {
            Err(Error::Parse {
                path, text: shown, ..
            }) => {
                assert!(path.ends_with("parameters/time_in_use_unit_ps"), "{path:?}");
                assert_eq!(shown, text.trim());
            }
            other => panic!("{text:?}: {other:?}"),
        }
    }
}

#[test]
fn an_unreadable_parameter_is_an_error() {
    let module = ModuleDir::new("unreadable");
    // A directory where the file should be cannot be read as text.
    fs::create_dir_all(module.0.join("parameters/time_in_use_unit_ps")).unwrap();
    let error = TimeInUseUnit::of_module(&module.0).unwrap_err();
    assert!(matches!(error, Error::Io { .. }), "{error:?}");
    assert!(error.to_string().contains("time_in_use_unit_ps"), "{error}");
}
