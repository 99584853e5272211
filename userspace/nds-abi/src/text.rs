//! Fixed-size, NUL-terminated C text fields (tags, model names).
//!
//! Slab contents are untrusted: a field may lack a terminator or hold arbitrary bytes, so reading
//! is bounded by the field and never fails.

/// Text did not fit a fixed-size field together with its NUL terminator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TextTooLong {
    /// Bytes offered.
    pub len: usize,
    /// Largest text length the field holds (its size minus the terminator).
    pub capacity: usize,
}

/// The bytes of `field` before its first NUL, or the whole field when it has none.
#[must_use]
pub fn c_text(field: &[u8]) -> &[u8] {
    let end = field
        .iter()
        .position(|&byte| byte == 0)
        .unwrap_or(field.len());
    field.get(..end).unwrap_or(field)
}

/// Stores `text` in `field`, NUL-terminated and zero-padded so the record hashes deterministically.
///
/// # Errors
///
/// [`TextTooLong`] if `text` does not fit with its terminator; `field` is then left unchanged.
pub fn set_c_text(field: &mut [u8], text: &[u8]) -> Result<(), TextTooLong> {
    let capacity = field.len().saturating_sub(1);
    let too_long = TextTooLong {
        len: text.len(),
        capacity,
    };
    // `>=`: the terminator needs one byte of its own.
    if text.len() >= field.len() {
        return Err(too_long);
    }
    let (head, tail) = field.split_at_mut(text.len());
    head.copy_from_slice(text);
    tail.fill(0);
    Ok(())
}
