//! Host kernels registered with each parameter's alignment, and a kernel's
//! parameter layout as the library knows it: the packing rule's other half
//! (see [`PackedArgs`](crate::PackedArgs)).

use crate::context::{Context, HostKernelFn};
use crate::error::{check, Result};
use crate::kernel::{Kernel, Module};
use crate::pack::Param;
use crate::util::c_string;
use metrale_gpu_sys as sys;
use std::ffi::c_void;

impl Context {
    /// Registers `f` as `module::func` on the host backend with each
    /// parameter's size and alignment ([`Param::of`]): the library lays the
    /// parameters out by the packing rule, as nvcc does the same kernel, so
    /// launches packed by [`Launch`](crate::Launch) reach `f` right. Prefer it
    /// to [`Context::register_host_kernel`], which infers each alignment from
    /// the size and is wrong for arrays and structs (`[u16; 2]` aligns to 2,
    /// not 4): a launch then fails with InvalidArgument instead.
    pub fn register_host_kernel_layout(
        &self,
        module: &str,
        func: &str,
        f: HostKernelFn,
        params: &[Param],
    ) -> Result<Module> {
        // SAFETY: a NULL user pointer is never dereferenced by the library.
        unsafe { self.register_host_kernel_layout_with_user(module, func, f, std::ptr::null_mut(), params) }
    }

    /// As [`Context::register_host_kernel_layout`] with a user pointer passed to `f`.
    ///
    /// # Safety
    /// `user` must stay valid for as long as the kernel can be launched.
    pub unsafe fn register_host_kernel_layout_with_user(
        &self,
        module: &str,
        func: &str,
        f: HostKernelFn,
        user: *mut c_void,
        params: &[Param],
    ) -> Result<Module> {
        let (m, fname) = (c_string(module)?, c_string(func)?);
        let sizes: Vec<usize> = params.iter().map(|p| p.size).collect();
        let aligns: Vec<usize> = params.iter().map(|p| p.align).collect();
        self.call(|c| unsafe {
            sys::metrale_module_register_host_layout(
                c,
                m.as_ptr(),
                fname.as_ptr(),
                Some(f),
                user,
                sizes.as_ptr(),
                aligns.as_ptr(),
                params.len(),
            )
        })?;
        Ok(Module::new(self, module))
    }
}

impl Kernel {
    /// The kernel's parameters as `(offset, size)` pairs, as the library
    /// knows them (a host kernel's registration, or the driver's
    /// cuFuncGetParamInfo). `Err` with `Status::Unsupported` when unknown: a
    /// host kernel registered without sizes, or a driver older than 12.4.
    pub fn param_layout(&self) -> Result<Vec<(usize, usize)>> {
        self.shared.with(|c| {
            let mut n = 0usize;
            // SAFETY: a size query (cap 0, NULL arrays) and valid out-pointers.
            check(unsafe {
                sys::metrale_kernel_param_layout(c, self.raw, std::ptr::null_mut(), std::ptr::null_mut(), 0, &mut n)
            })?;
            let (mut offsets, mut sizes) = (vec![0usize; n], vec![0usize; n]);
            if n > 0 {
                // SAFETY: both arrays hold n entries; a kernel's layout never changes.
                check(unsafe {
                    sys::metrale_kernel_param_layout(c, self.raw, offsets.as_mut_ptr(), sizes.as_mut_ptr(), n, &mut n)
                })?;
            }
            Ok(offsets.drain(..).zip(sizes.drain(..)).collect())
        })
    }
}
