// SPDX-License-Identifier: GPL-2.0

//! Module parameters that `module!` cannot declare on every supported release: strings
//! (`charp`), integers that userspace can read in `/sys/module/<module>/parameters/`, and
//! booleans (7.2's `module!` has no `bool`); and the value of a parameter that `module!`
//! declares, read the same way on every release ([`ModuleParamValue`]).
//!
//! C header: [`include/linux/moduleparam.h`](srctree/include/linux/moduleparam.h)
//!
//! [`module_param!`] declares the parameter the way `module!` declares its own (a
//! `kernel_param` in the `__param` section and its `.modinfo` lines), with the kernel's `charp`,
//! `uint` or `bool` operations and a permission of the caller's choosing.

use core::cell::UnsafeCell;
use kernel::{
    module_param::ModuleParamAccess,
    prelude::*, //
};

/// The value of a parameter declared in `module!`, by value.
///
/// 7.2's `ModuleParamAccess::value` returns a reference, 7.3's a copy (the reference moved to
/// `value_ref`).
pub(crate) trait ModuleParamValue<T> {
    /// The value given at load time, or the default.
    fn get(&self) -> T;
}

impl<T: Copy> ModuleParamValue<T> for ModuleParamAccess<T> {
    #[cfg(kernel_version = "7.2")]
    fn get(&self) -> T {
        *self.value()
    }

    #[cfg(not(kernel_version = "7.2"))]
    fn get(&self) -> T {
        self.value()
    }
}

/// The storage the kernel writes a parameter's value into while it loads the module.
///
/// # Invariants
///
/// The kernel writes the value only while parsing the module's parameters, before the module's
/// `init` runs; parameters declared with [`module_param!`] are never writable through sysfs, so
/// afterwards the value only changes when the module is unloaded (a `charp` string is freed
/// after the module's `exit`).
#[repr(transparent)]
pub(crate) struct ParamValue<T>(UnsafeCell<T>);

// SAFETY: by the type invariant, all accesses after `init` begins are reads.
unsafe impl<T> Sync for ParamValue<T> {}

impl<T: Copy> ParamValue<T> {
    /// Storage holding `default` until the kernel parses a value.
    pub(crate) const fn new(default: T) -> Self {
        Self(UnsafeCell::new(default))
    }

    /// The pointer the kernel's parameter operations write through.
    pub(crate) const fn as_arg(&self) -> *mut c_void {
        self.0.get().cast()
    }

    fn read(&self) -> T {
        // SAFETY: by the type invariant, nothing writes the value concurrently with this read.
        unsafe { self.0.get().read() }
    }
}

impl ParamValue<u32> {
    /// The parameter's value.
    pub(crate) fn get(&self) -> u32 {
        self.read()
    }
}

impl ParamValue<bool> {
    /// The parameter's value.
    pub(crate) fn get(&self) -> bool {
        self.read()
    }
}

impl ParamValue<*mut c_char> {
    /// The parameter's value, if it was given.
    pub(crate) fn get(&self) -> Option<&'static CStr> {
        let value = self.read();
        // SAFETY: a non-NULL value is a NUL-terminated string that the kernel allocated while
        // parsing the parameter and frees only after the module's `exit`, with no writes in
        // between (type invariant).
        (!value.is_null()).then(|| unsafe { CStr::from_char_ptr(value) })
    }
}

/// `text` as a NUL-terminated `.modinfo` entry of `N` bytes (`text.len() + 1`).
pub(crate) const fn modinfo_entry<const N: usize>(text: &str) -> [u8; N] {
    let bytes = text.as_bytes();
    let mut entry = [0u8; N];
    let mut i = 0;
    while i < bytes.len() && i + 1 < N {
        entry[i] = bytes[i];
        i += 1;
    }
    entry
}

/// Declares a module parameter `$value` of kind `charp` (a string, `None` unless given),
/// `uint` (a `u32` with a default) or `bool` (with a default), named `$name`, with permission
/// `$perm` in sysfs (0: not there, or read-only).
///
/// ```ignore
/// module_param!(NODE_NAME: charp, "node_name", "Base name of the nodes", 0o444);
/// module_param!(UNIT: uint = 1, "unit_ps", "Picoseconds per unit", 0o444);
/// module_param!(STRICT: bool = false, "strict", "Refuse instead of degrading", 0);
/// ```
macro_rules! module_param {
    ($value:ident: charp, $name:literal, $description:literal, $perm:expr) => {
        static $value: $crate::shim::param::ParamValue<*mut ::kernel::ffi::c_char> =
            $crate::shim::param::ParamValue::new(::core::ptr::null_mut());
        $crate::shim::param::module_param!(
            @declare $value, "charp", param_ops_charp, $name, $description, $perm
        );
    };
    ($value:ident: uint = $default:expr, $name:literal, $description:literal, $perm:expr) => {
        static $value: $crate::shim::param::ParamValue<u32> =
            $crate::shim::param::ParamValue::new($default);
        $crate::shim::param::module_param!(
            @declare $value, "uint", param_ops_uint, $name, $description, $perm
        );
    };
    ($value:ident: bool = $default:expr, $name:literal, $description:literal, $perm:expr) => {
        // The kernel's `param_ops_bool` stores a C `bool`, which has Rust `bool`'s layout.
        static $value: $crate::shim::param::ParamValue<bool> =
            $crate::shim::param::ParamValue::new($default);
        $crate::shim::param::module_param!(
            @declare $value, "bool", param_ops_bool, $name, $description, $perm
        );
    };
    (@declare $value:ident, $kind:literal, $ops:ident, $name:literal, $description:literal,
     $perm:expr) => {
        const _: () = {
            const _: () = assert!(($perm) & 0o222 == 0, "parameters are never writable");

            #[link_section = "__param"]
            #[used(compiler)]
            static PARAM: ::kernel::module_param::KernelParam =
                ::kernel::module_param::KernelParam::new(::kernel::bindings::kernel_param {
                    name: concat!($name, "\0").as_ptr().cast(),
                    // The kernel sets up `__this_module` at load time; only its address is
                    // taken here.
                    mod_: &raw mut ::kernel::bindings::__this_module,
                    ops: &raw const ::kernel::bindings::$ops,
                    perm: $perm,
                    level: -1,
                    flags: 0,
                    __bindgen_anon_1: ::kernel::bindings::kernel_param__bindgen_ty_1 {
                        arg: $value.as_arg(),
                    },
                });

            const PARMTYPE: &str = concat!("parmtype=", $name, ":", $kind);
            #[link_section = ".modinfo"]
            #[used(compiler)]
            static PARMTYPE_ENTRY: [u8; PARMTYPE.len() + 1] =
                $crate::shim::param::modinfo_entry(PARMTYPE);

            const PARM: &str = concat!("parm=", $name, ":", $description);
            #[link_section = ".modinfo"]
            #[used(compiler)]
            static PARM_ENTRY: [u8; PARM.len() + 1] = $crate::shim::param::modinfo_entry(PARM);
        };
    };
}
pub(crate) use module_param;
