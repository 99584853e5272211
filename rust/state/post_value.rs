// SPDX-License-Identifier: GPL-2.0

//! The text of one metric post, formatted straight into the post's fixed-size value field.
//!
//! Formatting needs no allocation, so a metrics period has no failure point once it starts
//! posting: it either posts every metric or (before its first post) none.

use crate::abi::metrics::METRIC_VALUE_SIZE;
use core::fmt;

/// Up to [`METRIC_VALUE_SIZE`] bytes of text; what does not fit is cut off, as the original
/// driver's fixed-size value field cuts it.
///
/// # Invariants
///
/// `len <= METRIC_VALUE_SIZE`.
pub(crate) struct PostValue {
    bytes: [u8; METRIC_VALUE_SIZE],
    len: usize,
}

impl PostValue {
    /// `args` formatted, truncated to the field's size.
    pub(crate) fn format(args: fmt::Arguments<'_>) -> Self {
        let mut value = Self {
            bytes: [0; METRIC_VALUE_SIZE],
            len: 0,
        };
        // Cannot fail: `write_str` truncates instead of returning an error.
        let _ = fmt::write(&mut value, args);
        value
    }

    /// The whole field, zero-padded after the text.
    pub(crate) fn field(&self) -> [u8; METRIC_VALUE_SIZE] {
        self.bytes
    }

    /// The text's length in bytes.
    pub(crate) fn len(&self) -> u8 {
        // `len <= METRIC_VALUE_SIZE`, which is far below 256.
        u8::try_from(self.len).unwrap_or(u8::MAX)
    }
}

impl fmt::Write for PostValue {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        let room = METRIC_VALUE_SIZE - self.len;
        let taken = text.len().min(room);
        if let (Some(dst), Some(src)) = (
            self.bytes.get_mut(self.len..self.len + taken),
            text.as_bytes().get(..taken),
        ) {
            dst.copy_from_slice(src);
            self.len += taken;
        }
        Ok(())
    }
}

#[cfg(neuron_ds_kunit)]
#[kernel::prelude::kunit_tests(neuron_ds_post_value)]
mod tests {
    use super::*;
    use kernel::prelude::*;

    #[test]
    fn short_text_is_zero_padded() {
        let value = PostValue::format(fmt!("{}.{}", 2, 19));
        assert_eq!(value.len(), 4);
        assert_eq!(&value.field()[..5], b"2.19\0");
    }

    #[test]
    fn text_longer_than_the_field_is_cut_at_the_field() {
        let value = PostValue::format(fmt!("{}{}", u128::MAX, u128::MAX));
        assert_eq!(usize::from(value.len()), METRIC_VALUE_SIZE);
        assert_eq!(&value.field()[..3], b"340");
    }
}
