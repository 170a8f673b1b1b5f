//! Packed-argument kernel launches.

use crate::buffer::{DeviceBuffer, Pod};
use crate::error::{check, Error, Result};
use crate::kernel::{Dim3, Kernel};
use crate::shared::Shared;
use crate::stream::Stream;
use metrale_gpu_sys as sys;

/// A value that can be a kernel argument: packed at its own alignment.
pub trait KernelArg {
    /// Appends this argument's bytes to the packed argument buffer.
    fn pack(&self, args: &mut Vec<u8>);
}

fn pack_pod<T: Pod>(v: &T, args: &mut Vec<u8>) {
    let align = std::mem::align_of::<T>();
    args.resize(args.len().next_multiple_of(align), 0);
    // SAFETY: a Pod value is plain bytes.
    let bytes = unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), std::mem::size_of::<T>()) };
    args.extend_from_slice(bytes);
}

impl<T: Pod> KernelArg for T {
    fn pack(&self, args: &mut Vec<u8>) {
        pack_pod(self, args)
    }
}

/// A buffer is passed as its device pointer.
impl<T: Pod> KernelArg for &DeviceBuffer<T> {
    fn pack(&self, args: &mut Vec<u8>) {
        pack_pod(&self.as_devptr(), args)
    }
}

/// A kernel launch being put together. Arguments are packed in order, each
/// at its own alignment, the layout a kernel's parameter list has.
#[must_use = "a launch does nothing until run"]
pub struct Launch<'a> {
    kernel: &'a Kernel,
    grid: Dim3,
    block: Dim3,
    shared_bytes: u32,
    stream: Option<&'a Stream>,
    args: Vec<u8>,
    error: Option<Error>,
}

impl<'a> Launch<'a> {
    pub(crate) fn new(kernel: &'a Kernel, grid: Dim3, block: Dim3) -> Launch<'a> {
        Launch { kernel, grid, block, shared_bytes: 0, stream: None, args: Vec::new(), error: None }
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
        &self.args
    }

    /// Launches. The library checks the packed size against the kernel's
    /// parameter layout where it knows it (InvalidArgument on mismatch).
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
        let (args, len) = if self.args.is_empty() {
            (std::ptr::null(), 0)
        } else {
            (self.args.as_ptr().cast(), self.args.len())
        };
        self.kernel.shared.with(|c| {
            check(sys::metrale_launch_packed(
                c,
                self.kernel.raw,
                self.grid.into(),
                self.block.into(),
                self.shared_bytes,
                stream,
                args,
                len,
            ))
        })
    }
}
