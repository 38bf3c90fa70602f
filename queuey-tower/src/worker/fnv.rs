//! A fast hasher for the worker's own maps.

use std::hash::Hasher;

/// FNV-1a, for the worker's small maps whose short keys no sender chooses
/// (job type names, running jobs' keys): cheaper than the standard hash.
pub(crate) struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        // The offset basis.
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv1a {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut hash = self.0;
        for &byte in bytes {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
        self.0 = hash;
    }
}

#[cfg(test)]
mod tests {
    use std::hash::Hasher;

    use super::Fnv1a;

    #[test]
    fn it_is_fnv_1a() {
        let mut hasher = Fnv1a::default();
        hasher.write(b"a");
        assert_eq!(hasher.finish(), 0xaf63_dc4c_8601_ec8c);
    }
}
