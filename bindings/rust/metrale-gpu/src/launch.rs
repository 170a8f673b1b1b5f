//! Packed-argument kernel launches.

use crate::buffer::{DeviceBuffer, Pod};
use crate::error::{check, Error, Result};
use crate::kernel::{Dim3, Kernel};
use crate::pack::PackedArgs;
use crate::shared::Shared;
use crate::stream::Stream;
use metrale_gpu_sys as sys;

/// A value that can be a kernel argument, packed by the library's one rule
/// (see [`PackedArgs`]): at its natural alignment. Any [`Pod`] type (a
/// `#[repr(C)]` struct passed by value included) and `&DeviceBuffer`.
pub trait KernelArg {
    /// Appends this argument to `args`.
    fn pack(&self, args: &mut PackedArgs);
}

impl<T: Pod> KernelArg for T {
    fn pack(&self, args: &mut PackedArgs) {
        args.push(self)
    }
}

/// A buffer is passed as its device pointer.
impl<T: Pod> KernelArg for &DeviceBuffer<T> {
    fn pack(&self, args: &mut PackedArgs) {
        args.push(&self.as_devptr())
    }
}

/// A kernel launch being put together. Arguments are packed in order, each
/// at its natural alignment: the layout nvcc gives the kernel's parameters
/// (the rule `include/metrale_gpu.h` documents under "Kernel parameter
/// layout").
#[must_use = "a launch does nothing until run"]
pub struct Launch<'a> {
    kernel: &'a Kernel,
    grid: Dim3,
    block: Dim3,
    shared_bytes: u32,
    stream: Option<&'a Stream>,
    args: PackedArgs,
    error: Option<Error>,
}

impl<'a> Launch<'a> {
    pub(crate) fn new(kernel: &'a Kernel, grid: Dim3, block: Dim3) -> Launch<'a> {
        Launch { kernel, grid, block, shared_bytes: 0, stream: None, args: PackedArgs::new(), error: None }
    }

    /// Dynamic shared memory bytes.
    pub fn shared_mem(mut self, bytes: u32) -> Self {
        self.shared_bytes = bytes;
        self
    }

    /// The stream to launch on (default: the context's default stream).
    pub fn stream(mut self, stream: &'a Stream) -> Self {
        if let Err(e) = Shared::same(&self.kernel.shared, &stream.shared) {
            self.error.get_or_insert(e);
        }
        self.stream = Some(stream);
        self
    }

    /// Appends one argument.
    pub fn arg<A: KernelArg>(mut self, a: A) -> Self {
        a.pack(&mut self.args);
        self
    }

    /// The packed argument bytes so far.
    pub fn packed_args(&self) -> &[u8] {
        self.args.as_bytes()
    }

    /// The arguments so far, with each one's offset and size.
    pub fn packed(&self) -> &PackedArgs {
        &self.args
    }

    /// Launches. Where the library knows the kernel's parameter layout (the
    /// driver's, or a host kernel's registration), each argument's offset
    /// and size must match it: else InvalidArgument naming the parameter,
    /// nothing launched.
    ///
    /// # Safety
    /// A kernel reads and writes whatever its pointer arguments point at:
    /// the caller vouches that they are valid for what the kernel does. On
    /// a capturing stream ([`Capture::stream`](crate::Capture::stream)) the
    /// kernel runs again at every replay of the graph: the memory must stay
    /// valid, and untouched by other code while a replay runs, for as long
    /// as the graph lives (lending the buffers to the capture,
    /// [`Capture::lend`](crate::Capture::lend), makes the borrow checker
    /// hold them).
    pub unsafe fn run(self) -> Result<()> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let stream = self.stream.map_or(std::ptr::null_mut(), |s| s.raw);
        let bytes = self.args.as_bytes();
        let args = if bytes.is_empty() { std::ptr::null() } else { bytes.as_ptr().cast() };
        self.kernel.shared.with(|c| {
            check(sys::metrale_launch_packed_layout(
                c,
                self.kernel.raw,
                self.grid.into(),
                self.block.into(),
                self.shared_bytes,
                stream,
                args,
                bytes.len(),
                self.args.offsets().as_ptr(),
                self.args.sizes().as_ptr(),
                self.args.len(),
            ))
        })
    }
}
