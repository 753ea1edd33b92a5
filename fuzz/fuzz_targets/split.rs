//! The input layout the signature targets share: a length byte says how much of what is left
//! a field takes, modulo what is left, so every input is usable.

/// The first `len % (data.len() + 1)` bytes of `data`, and the rest.
pub fn split(data: &[u8], len: u8) -> (&[u8], &[u8]) {
    let n = if data.is_empty() {
        0
    } else {
        usize::from(len) % (data.len() + 1)
    };
    data.split_at(n)
}
