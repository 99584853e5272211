//! FW-IO mailbox bytes and ioctl errno against literal tables from the seed (both medium
//! confidence there).

use nrt_status::errno::status_from_ioctl_return;
use nrt_status::mailbox::{FwIoErrorCount, FwIoStatus};

#[test]
fn every_mailbox_byte() {
    let count = FwIoErrorCount::new();
    let mut expected_errors = 0;
    for code in 0..=u8::MAX {
        let status = FwIoStatus::from(code);
        assert_eq!(u8::from(status), code);
        let outcome = status.outcome();
        let (ret, error, retry) = match code {
            0 => (0, false, false),
            2 => (-1, true, false),
            _ => (-1, true, true),
        };
        assert_eq!(
            (outcome.ret, outcome.counts_as_error, outcome.retryable),
            (ret, error, retry)
        );
        assert_eq!(count.record(code), ret, "byte {code}");
        expected_errors += u64::from(error);
        assert_eq!(count.get(), expected_errors, "byte {code}");
    }
    assert_eq!(count.get(), 255);
}

#[test]
fn named_mailbox_bytes() {
    assert_eq!(FwIoStatus::from_u8(0), FwIoStatus::Success);
    assert_eq!(FwIoStatus::from_u8(1), FwIoStatus::Fail);
    assert_eq!(FwIoStatus::from_u8(2), FwIoStatus::UnknownCommand);
    assert_eq!(FwIoStatus::from_u8(3), FwIoStatus::Unknown(3));
    assert_eq!(FwIoErrorCount::default().get(), 0);
}

#[test]
fn ioctl_returns() {
    // (ioctl return, expected status)
    let cases = [
        (0, 0),
        (-12, 4),    // -ENOMEM -> NRT_RESOURCE
        (-22, 2),    // -EINVAL -> NRT_INVALID
        (-16, 1005), // -EBUSY -> NRT_EXEC_NC_BUSY
        (-2, 1),     // -ENOENT -> non-specific failure
        (-5, 1),     // -EIO
        (-1, 1),     // -EPERM
        (12, 1),     // positive (bytes not copied) is a failure, not ENOMEM
        (24, 1),
        (i32::MIN, 1),
        (i32::MAX, 1),
    ];
    for (ret, expected) in cases {
        assert_eq!(
            status_from_ioctl_return(ret).as_u32(),
            expected,
            "ret {ret}"
        );
    }
}
