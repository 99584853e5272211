//! `ndl_device_t` with the SDK's layout, `ndl_open_device` / `ndl_close_device`, and this
//! library's path-based constructors.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, IntoRawFd};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use nds::Backend;

use crate::ptr_result;

/// `MAX_NEURON_DEVICE_COUNT`: device indices run below it.
const MAX_NEURON_DEVICE_COUNT: usize = 64;
/// `MAX_NC_PER_DEVICE`.
const MAX_NC_PER_DEVICE: usize = 8;
/// `MAX_HBM_PER_DEVICE`.
const MAX_HBM_PER_DEVICE: usize = 4;
/// `NEURON_DEVICE_PREFIX`.
const NEURON_DEVICE_PREFIX: &str = "/dev/neuron";

/// `ndl_copy_buf_t`.
#[repr(C)]
struct CopyBuf {
    mem_handle: u64,
    mmap_va: *mut c_void,
    lock: libc::pthread_mutex_t,
}

/// The public fields of the SDK's `ndl_device_t`, in its order. This library drives no
/// hardware: it sets `device_index` and leaves the rest zero for C callers to read.
#[repr(C)]
struct SdkDevice {
    device_index: u8,
    device_type: u8,
    device_revision: u16,
    connected_device_count: u8,
    connected_devices: [u8; MAX_NEURON_DEVICE_COUNT],
    csr_base: [u64; 2],
    csr_size: [u64; 2],
    cpy_bufs: [CopyBuf; MAX_NC_PER_DEVICE],
    hbm_va: [*mut c_void; MAX_HBM_PER_DEVICE],
    hbm_size: usize,
    hbm_va_cnt: u32,
    shift_hbm_size: u32,
    hbm_offset: [u64; MAX_HBM_PER_DEVICE],
}

impl SdkDevice {
    fn new(device_index: u8) -> Self {
        // SAFETY: every field is an integer, a raw pointer or a `pthread_mutex_t`, plain C data
        // for which all-zero bytes are a valid value (null pointers, an unused mutex).
        let mut device: Self = unsafe { std::mem::zeroed() };
        device.device_index = device_index;
        device
    }
}

/// What follows the SDK fields, where C declares `uint8_t context[]`: first
/// `ndl_device_context_t`, then this library's state.
#[repr(C)]
struct DeviceContext {
    /// `ndl_device_context_t.nd_fd`: the node's descriptor, -1 for a slab file.
    nd_fd: c_int,
    /// The open node, held until the device is closed, as libndl holds it; `None` for a file.
    node: Option<File>,
    /// Where `nds_open` acquires and maps slabs.
    backend: Backend,
}

/// `ndl_device_t`: the SDK's struct, then the context in place of its flexible array.
#[repr(C)]
pub struct NdlDevice {
    sdk: SdkDevice,
    context: DeviceContext,
}

/// Byte offset of `ndl_device_t.context` on this target, which the C tests compare with the
/// header's `offsetof`.
pub const NDL_DEVICE_CONTEXT_OFFSET: usize = std::mem::offset_of!(NdlDevice, context);

impl NdlDevice {
    /// Where this device's datastores come from.
    pub(crate) fn backend(&self) -> &Backend {
        &self.context.backend
    }

    /// Opens the device node at `path` and keeps it open in the handle.
    fn open_node(path: &Path, device_index: u8) -> io::Result<Box<Self>> {
        let node = OpenOptions::new().read(true).write(true).open(path)?;
        Ok(Box::new(Self {
            sdk: SdkDevice::new(device_index),
            context: DeviceContext {
                nd_fd: node.as_raw_fd(),
                node: Some(node),
                backend: Backend::device(path),
            },
        }))
    }
}

/// Sets the calling thread's `errno`.
fn set_errno(errno: c_int) {
    // SAFETY: `__errno_location` returns the calling thread's errno slot (glibc and musl).
    unsafe { *libc::__errno_location() = errno };
}

/// Runs `body`; an error or a panic becomes -1 with `errno` set (EIO for a panic).
fn ndl_result(body: impl FnOnce() -> Result<(), c_int>) -> c_int {
    let errno = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => return 0,
        Ok(Err(errno)) => errno,
        Err(_) => libc::EIO,
    };
    set_errno(errno);
    -1
}

fn os_errno(error: &io::Error) -> c_int {
    error.raw_os_error().unwrap_or(libc::EIO)
}

/// Opens `/dev/neuron<device_index>` into `*device` (see `ndl.h`). `params` (an
/// `ndl_device_init_param_t *`, possibly NULL) is accepted and unused: there is no hardware
/// to initialize.
///
/// # Safety
///
/// `device` is NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn ndl_open_device(
    device_index: c_int,
    _params: *mut c_void,
    device: *mut *mut NdlDevice,
) -> c_int {
    ndl_result(|| {
        let index = usize::try_from(device_index)
            .ok()
            .filter(|&index| index < MAX_NEURON_DEVICE_COUNT)
            .and_then(|index| u8::try_from(index).ok())
            .ok_or(libc::EINVAL)?;
        if device.is_null() {
            return Err(libc::EINVAL);
        }
        let path = format!("{NEURON_DEVICE_PREFIX}{index}");
        let opened = NdlDevice::open_node(Path::new(&path), index).map_err(|e| os_errno(&e))?;
        // SAFETY: non-null and writable per the caller.
        unsafe { device.write(Box::into_raw(opened)) };
        Ok(())
    })
}

/// Closes the node and frees the device.
///
/// # Safety
///
/// `device` is NULL or came from this library and is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn ndl_close_device(device: *mut NdlDevice) -> c_int {
    ndl_result(|| {
        if device.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller hands back ownership of a boxed device.
        let device = unsafe { Box::from_raw(device) };
        match device.context.node {
            Some(node) => {
                let fd = node.into_raw_fd();
                // SAFETY: `fd` was owned by `node` and is closed exactly once here.
                match unsafe { libc::close(fd) } {
                    0 => Ok(()),
                    _ => Err(os_errno(&io::Error::last_os_error())),
                }
            }
            None => Ok(()),
        }
    })
}

/// Converts a NUL-terminated UTF-8 path; `None` for NULL or other bytes.
///
/// # Safety
///
/// `path` is NULL or a NUL-terminated string.
unsafe fn utf8_path<'a>(path: *const c_char) -> Option<&'a str> {
    if path.is_null() {
        return None;
    }
    // SAFETY: non-null and NUL-terminated per the caller.
    unsafe { CStr::from_ptr(path) }.to_str().ok()
}

/// Opens the device node at `path` (extension); NULL with `errno` set on failure.
///
/// # Safety
///
/// `path` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn nds_device_open(path: *const c_char) -> *mut NdlDevice {
    let mut opened = std::ptr::null_mut();
    ndl_result(|| {
        // SAFETY: forwarded contract.
        let path = unsafe { utf8_path(path) }.ok_or(libc::EINVAL)?;
        let device = NdlDevice::open_node(Path::new(path), 0).map_err(|e| os_errno(&e))?;
        opened = Box::into_raw(device);
        Ok(())
    });
    opened
}

/// A device backed by the slab file at `path` (extension); NULL for a NULL or non-UTF-8 path.
///
/// # Safety
///
/// `path` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn nds_device_open_file(path: *const c_char) -> *mut NdlDevice {
    ptr_result(|| {
        // SAFETY: forwarded contract.
        let path = unsafe { utf8_path(path) }?;
        Some(Box::into_raw(Box::new(NdlDevice {
            sdk: SdkDevice::new(0),
            context: DeviceContext {
                nd_fd: -1,
                node: None,
                backend: Backend::file(path),
            },
        })))
    })
}
