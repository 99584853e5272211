//! FNV-1a-32, the checksum that guards every NDS record.

/// FNV-1a-32 offset basis.
pub const FNV1A_32_OFFSET_BASIS: u32 = 0x811C_9DC5;

/// FNV-1a-32 prime.
pub const FNV1A_32_PRIME: u32 = 0x0100_0193;

/// Continues an FNV-1a-32 computation from `state` over `bytes`.
///
/// Start from [`FNV1A_32_OFFSET_BASIS`]; feeding a buffer in pieces gives the same result as
/// hashing it at once.
#[must_use]
pub const fn fnv1a_32_update(mut state: u32, mut bytes: &[u8]) -> u32 {
    while let Some((byte, rest)) = bytes.split_first() {
        // Zero-extends the byte without an `as` cast (`u32::from` is not const).
        state ^= u32::from_le_bytes([*byte, 0, 0, 0]);
        state = state.wrapping_mul(FNV1A_32_PRIME);
        bytes = rest;
    }
    state
}

/// FNV-1a-32 of `bytes`.
#[must_use]
pub const fn fnv1a_32(bytes: &[u8]) -> u32 {
    fnv1a_32_update(FNV1A_32_OFFSET_BASIS, bytes)
}

const _: () = assert!(fnv1a_32(b"") == 0x811C_9DC5);
const _: () = assert!(fnv1a_32(b"a") == 0xE40C_292C);
const _: () = assert!(fnv1a_32(b"foobar") == 0xBF9C_F968);
