//! Device buffers: typed, freed on Drop, bounds-checked copies.

use crate::context::Context;
use crate::error::{check, Error, Result, Status};
use crate::shared::Shared;
use crate::stream::Stream;
use crate::util::Site;
use metrale_gpu_sys as sys;
use std::marker::PhantomData;
use std::sync::Arc;

/// Plain data that may be copied to and from the device byte for byte.
///
/// # Safety
/// Every bit pattern must be a valid value and the type must hold no
/// pointers or references (implement it only for `#[repr(C)]` structs of
/// `Pod` fields without padding).
pub unsafe trait Pod: Copy + Send + Sync + 'static {}

macro_rules! pod {
    ($($t:ty),*) => {$(unsafe impl Pod for $t {})*};
}
pod!(u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize, f32, f64);
unsafe impl<T: Pod, const N: usize> Pod for [T; N] {}

/// `len` elements of `T` in device memory, on the context's ledger.
/// Dropping it frees it (silently after the context was closed, since the
/// context's destroy already did).
pub struct DeviceBuffer<T: Pod> {
    pub(crate) shared: Arc<Shared>,
    ptr: sys::metrale_devptr_t,
    len: usize,
    _elem: PhantomData<T>,
}

fn bytes_of<T>(len: usize) -> Result<usize> {
    len.checked_mul(std::mem::size_of::<T>())
        .ok_or_else(|| Error::new(Status::InvalidArgument, format!("{len} elements overflow usize bytes")))
}

fn size_mismatch(what: &str, have: usize, want: usize) -> Error {
    Error::new(Status::InvalidArgument, format!("{what}: {have} elements given, the buffer holds {want}"))
}

impl<T: Pod> DeviceBuffer<T> {
    pub(crate) fn alloc(ctx: &Context, len: usize, managed: bool, site: Site) -> Result<Self> {
        let bytes = bytes_of::<T>(len)?;
        let mut ptr = 0;
        ctx.call(|c| unsafe {
            if managed {
                sys::metrale_alloc_managed_at(c, bytes, site.file.as_ptr(), site.line, &mut ptr)
            } else {
                sys::metrale_alloc_at(c, bytes, site.file.as_ptr(), site.line, &mut ptr)
            }
        })?;
        Ok(DeviceBuffer { shared: ctx.shared.clone(), ptr, len, _elem: PhantomData })
    }

    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn bytes(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }
    /// The device address (a host address on the host backend).
    pub fn as_devptr(&self) -> sys::metrale_devptr_t {
        self.ptr
    }

    fn call(&self, f: impl FnOnce(*mut sys::metrale_context_t) -> sys::metrale_status_t) -> Result<()> {
        self.shared.with(|c| check(f(c)))
    }

    /// Copies `src` to the start of the buffer; `src` may not be longer.
    pub fn copy_from_host(&self, src: &[T]) -> Result<()> {
        if src.len() > self.len {
            return Err(size_mismatch("copy_from_host", src.len(), self.len));
        }
        let bytes = std::mem::size_of_val(src);
        self.call(|c| unsafe { sys::metrale_copy_h2d(c, src.as_ptr().cast(), bytes, self.ptr) })
    }

    /// Copies the start of the buffer into `dst`; `dst` may not be longer.
    pub fn copy_to_host(&self, dst: &mut [T]) -> Result<()> {
        if dst.len() > self.len {
            return Err(size_mismatch("copy_to_host", dst.len(), self.len));
        }
        let bytes = std::mem::size_of_val(dst);
        self.call(|c| unsafe { sys::metrale_copy_d2h(c, self.ptr, dst.as_mut_ptr().cast(), bytes) })
    }

    /// The whole buffer as a Vec.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        let mut v = Vec::<T>::with_capacity(self.len);
        let bytes = self.bytes();
        self.call(|c| unsafe { sys::metrale_copy_d2h(c, self.ptr, v.as_mut_ptr().cast(), bytes) })?;
        // SAFETY: the copy wrote all len elements; any bit pattern is a T.
        unsafe { v.set_len(self.len) };
        Ok(v)
    }

    /// Device-to-device copy of all of `src` to the start of this buffer.
    pub fn copy_from(&self, src: &DeviceBuffer<T>) -> Result<()> {
        Shared::same(&self.shared, &src.shared)?;
        if src.len > self.len {
            return Err(size_mismatch("copy_from", src.len, self.len));
        }
        self.call(|c| unsafe { sys::metrale_copy_d2d(c, src.ptr, self.ptr, src.bytes()) })
    }

    /// Sets every byte of the buffer to `value`.
    pub fn memset(&self, value: u8) -> Result<()> {
        self.call(|c| unsafe { sys::metrale_memset(c, self.ptr, value, self.bytes()) })
    }

    /// Host to device on `stream`; `src` may be reused on return (the
    /// library waits when it would read `src` later).
    pub fn copy_from_host_async(&self, src: &[T], stream: &Stream) -> Result<()> {
        Shared::same(&self.shared, &stream.shared)?;
        if src.len() > self.len {
            return Err(size_mismatch("copy_from_host_async", src.len(), self.len));
        }
        let bytes = std::mem::size_of_val(src);
        self.call(|c| unsafe {
            sys::metrale_copy_h2d_async(c, src.as_ptr().cast(), bytes, self.ptr, stream.raw)
        })
    }

    /// Device to host on `stream`, waiting for the stream before returning.
    pub fn copy_to_host_on_stream(&self, dst: &mut [T], stream: &Stream) -> Result<()> {
        Shared::same(&self.shared, &stream.shared)?;
        if dst.len() > self.len {
            return Err(size_mismatch("copy_to_host_on_stream", dst.len(), self.len));
        }
        let bytes = std::mem::size_of_val(dst);
        self.call(|c| unsafe {
            sys::metrale_copy_d2h_on_stream(c, self.ptr, dst.as_mut_ptr().cast(), bytes, stream.raw)
        })
    }

    /// Device-to-device copy on `stream` (recorded when the stream captures).
    pub fn copy_from_async(&self, src: &DeviceBuffer<T>, stream: &Stream) -> Result<()> {
        Shared::same(&self.shared, &src.shared)?;
        Shared::same(&self.shared, &stream.shared)?;
        if src.len > self.len {
            return Err(size_mismatch("copy_from_async", src.len, self.len));
        }
        self.call(|c| unsafe { sys::metrale_copy_d2d_async(c, src.ptr, self.ptr, src.bytes(), stream.raw) })
    }

    pub fn memset_async(&self, value: u8, stream: &Stream) -> Result<()> {
        Shared::same(&self.shared, &stream.shared)?;
        self.call(|c| unsafe { sys::metrale_memset_async(c, self.ptr, value, self.bytes(), stream.raw) })
    }

    /// Frees now and reports the library's status (Drop ignores it).
    pub fn free(mut self) -> Result<()> {
        let ptr = std::mem::replace(&mut self.ptr, 0);
        self.call(|c| unsafe { sys::metrale_free(c, ptr) })
    }
}

impl<T: Pod> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        if self.ptr != 0 {
            let ptr = self.ptr;
            let _ = self.call(|c| unsafe { sys::metrale_free(c, ptr) });
        }
    }
}

impl<T: Pod> std::fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceBuffer<{}>({:#x}, {} elements)", std::any::type_name::<T>(), self.ptr, self.len)
    }
}
