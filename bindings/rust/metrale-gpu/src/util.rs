//! Small conversions shared by the modules.

use crate::error::{Error, Result, Status};
use std::ffi::{c_char, c_int, CStr, CString};
use std::panic::Location;

/// A C string for the library; a NUL inside is an error, not a panic.
pub(crate) fn c_string(s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::new(Status::InvalidArgument, format!("{s:?} contains a NUL byte")))
}

/// The caller's site as the library wants it: the file as a C string kept
/// alive for the call (the library copies it) and the line.
pub(crate) struct Site {
    pub file: CString,
    pub line: c_int,
}

#[track_caller]
pub(crate) fn site() -> Site {
    let loc = Location::caller();
    let file = CString::new(loc.file().replace('\0', "?")).expect("NULs replaced");
    Site { file, line: c_int::try_from(loc.line()).unwrap_or(c_int::MAX) }
}

/// An owned copy of a C string the library keeps (NULL becomes "").
pub(crate) fn owned(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        // SAFETY: the library's strings stay valid until context destroy,
        // and callers hold the context open while copying.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}
