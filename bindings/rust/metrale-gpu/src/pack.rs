//! The kernel-parameter packing rule, the one `include/metrale_gpu.h`
//! documents under "Kernel parameter layout": the arguments in order, each
//! at the next offset that is a multiple of its natural alignment
//! ([`std::mem::align_of`]; an array aligns like its element, a `#[repr(C)]`
//! struct like its most aligned field), nothing after the last. It is what
//! nvcc lays out for a kernel and what a C compiler gives a struct of the
//! same fields. Each argument's offset and size are kept, so a launch can
//! have the library check them against the kernel's own layout.

use crate::buffer::Pod;

/// One parameter's size and alignment, as a kernel declares it: for host
/// kernels registered with [`Context::register_host_kernel_layout`](crate::Context::register_host_kernel_layout).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Param {
    /// `size_of` the parameter's type, in bytes.
    pub size: usize,
    /// `align_of` the parameter's type: a power of two dividing `size`.
    pub align: usize,
}

impl Param {
    /// The size and alignment of `T`.
    pub fn of<T: Pod>() -> Param {
        Param { size: std::mem::size_of::<T>(), align: std::mem::align_of::<T>() }
    }
}

/// Kernel arguments packed by the rule, with where each one went.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PackedArgs {
    bytes: Vec<u8>,
    offsets: Vec<usize>,
    sizes: Vec<usize>,
}

impl PackedArgs {
    /// No arguments yet.
    pub fn new() -> PackedArgs {
        PackedArgs::default()
    }

    /// Appends `value` at the next multiple of `align_of::<T>()`.
    pub fn push<T: Pod>(&mut self, value: &T) {
        // SAFETY: a Pod value is plain bytes, size_of::<T>() of them.
        let bytes = unsafe { std::slice::from_raw_parts((value as *const T).cast::<u8>(), std::mem::size_of::<T>()) };
        self.push_aligned(bytes, std::mem::align_of::<T>());
    }

    fn push_aligned(&mut self, value: &[u8], align: usize) {
        debug_assert!(align.is_power_of_two());
        let offset = self.bytes.len().next_multiple_of(align);
        self.bytes.resize(offset, 0);
        self.bytes.extend_from_slice(value);
        self.offsets.push(offset);
        self.sizes.push(value.len());
    }

    /// The packed buffer: the `args` of a packed launch.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Each argument's offset in [`PackedArgs::as_bytes`].
    pub fn offsets(&self) -> &[usize] {
        &self.offsets
    }

    /// Each argument's size in bytes.
    pub fn sizes(&self) -> &[usize] {
        &self.sizes
    }

    /// The number of arguments.
    pub fn len(&self) -> usize {
        self.offsets.len()
    }

    /// True before the first argument.
    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Sv {
        a: u16,
        b: [u8; 2],
        c: f32,
    }
    unsafe impl Pod for Sv {}

    #[test]
    fn arrays_and_structs_align_like_their_members() {
        let mut p = PackedArgs::new();
        p.push(&0xABu8);
        p.push(&[0x1234u16, 0xBEEF]);
        p.push(&7u64);
        assert_eq!(p.offsets(), &[0, 2, 8]);
        assert_eq!(p.sizes(), &[1, 4, 8]);
        assert_eq!(p.as_bytes().len(), 16);
        assert_eq!(&p.as_bytes()[2..6], &[0x34, 0x12, 0xEF, 0xBE]);

        let mut p = PackedArgs::new();
        p.push(&1u8);
        p.push(&Sv { a: 1, b: [2, 3], c: 1.0 });
        p.push(&0u64);
        assert_eq!(p.offsets(), &[0, 4, 16]);
        assert_eq!(Param::of::<Sv>(), Param { size: 8, align: 4 });
    }
}
