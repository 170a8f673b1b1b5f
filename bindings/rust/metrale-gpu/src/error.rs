//! Status codes and the error type every fallible call returns.

use metrale_gpu_sys as sys;
use std::ffi::CStr;
use std::fmt;

/// The library's status codes (`metrale_status_t`), `Ok` excluded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Status {
    /// An argument is NULL, zero, out of range or unknown.
    InvalidArgument,
    /// The device (or host) could not provide the bytes.
    OutOfMemory,
    /// No such allocation, module, kernel or entry.
    NotFound,
    /// libcuda.so.1 is missing, a stub, or cuInit failed.
    NoDriver,
    /// The driver answers but has no such device.
    NoDevice,
    /// This backend or driver cannot do it.
    Unsupported,
    /// A sticky device fault: the context is unusable.
    ContextLost,
    /// A scan found overwritten red-zone pads.
    RedzoneCorrupted,
    /// Checked pointers: a range outside any live allocation.
    OutOfBounds,
    /// Stream capture is active, invalidated or absent.
    Capture,
    /// The caller's buffer holds less than the answer.
    BufferTooSmall,
    /// Any other driver failure; the message has its code.
    Driver,
    /// A bug in the library (or a status this crate does not know).
    Internal,
}

impl Status {
    /// The status for a raw non-OK code; a code this crate does not know
    /// (a newer library) maps to `Internal`.
    pub fn from_raw(raw: sys::metrale_status_t) -> Status {
        match raw {
            sys::METRALE_ERROR_INVALID_ARGUMENT => Status::InvalidArgument,
            sys::METRALE_ERROR_OUT_OF_MEMORY => Status::OutOfMemory,
            sys::METRALE_ERROR_NOT_FOUND => Status::NotFound,
            sys::METRALE_ERROR_NO_DRIVER => Status::NoDriver,
            sys::METRALE_ERROR_NO_DEVICE => Status::NoDevice,
            sys::METRALE_ERROR_UNSUPPORTED => Status::Unsupported,
            sys::METRALE_ERROR_CONTEXT_LOST => Status::ContextLost,
            sys::METRALE_ERROR_REDZONE_CORRUPTED => Status::RedzoneCorrupted,
            sys::METRALE_ERROR_OUT_OF_BOUNDS => Status::OutOfBounds,
            sys::METRALE_ERROR_CAPTURE => Status::Capture,
            sys::METRALE_ERROR_BUFFER_TOO_SMALL => Status::BufferTooSmall,
            sys::METRALE_ERROR_DRIVER => Status::Driver,
            _ => Status::Internal,
        }
    }

    /// The C value of this status.
    pub fn to_raw(self) -> sys::metrale_status_t {
        match self {
            Status::InvalidArgument => sys::METRALE_ERROR_INVALID_ARGUMENT,
            Status::OutOfMemory => sys::METRALE_ERROR_OUT_OF_MEMORY,
            Status::NotFound => sys::METRALE_ERROR_NOT_FOUND,
            Status::NoDriver => sys::METRALE_ERROR_NO_DRIVER,
            Status::NoDevice => sys::METRALE_ERROR_NO_DEVICE,
            Status::Unsupported => sys::METRALE_ERROR_UNSUPPORTED,
            Status::ContextLost => sys::METRALE_ERROR_CONTEXT_LOST,
            Status::RedzoneCorrupted => sys::METRALE_ERROR_REDZONE_CORRUPTED,
            Status::OutOfBounds => sys::METRALE_ERROR_OUT_OF_BOUNDS,
            Status::Capture => sys::METRALE_ERROR_CAPTURE,
            Status::BufferTooSmall => sys::METRALE_ERROR_BUFFER_TOO_SMALL,
            Status::Driver => sys::METRALE_ERROR_DRIVER,
            Status::Internal => sys::METRALE_ERROR_INTERNAL,
        }
    }

    /// The enumerator's C name, e.g. `"METRALE_ERROR_NOT_FOUND"`.
    pub fn name(self) -> &'static str {
        // SAFETY: metrale_status_name returns static storage, never NULL.
        unsafe { CStr::from_ptr(sys::metrale_status_name(self.to_raw())) }
            .to_str()
            .unwrap_or("METRALE_UNKNOWN_STATUS")
    }
}

/// A failed call: the status and the library's message for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// What kind of failure.
    pub status: Status,
    /// The library's message: the site, the argument, what to do.
    pub message: String,
}

/// `std::result::Result` with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An error raised by this crate itself (before the library was called).
    pub fn new(status: Status, message: impl Into<String>) -> Error {
        Error { status, message: message.into() }
    }

    /// Reads the thread-local message right after the failing call (Rust
    /// threads do not migrate, so the message is the one that call set).
    pub(crate) fn last(raw: sys::metrale_status_t) -> Error {
        // SAFETY: never NULL, valid until the next call on this thread.
        let message = unsafe { CStr::from_ptr(sys::metrale_last_error_message()) }
            .to_string_lossy()
            .into_owned();
        let status = Status::from_raw(raw);
        if status == Status::Internal && raw != sys::METRALE_ERROR_INTERNAL {
            return Error::new(status, format!("unknown status {raw}: {message}"));
        }
        Error { status, message }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.message.is_empty() {
            write!(f, "{}", self.status.name())
        } else {
            write!(f, "{}: {}", self.status.name(), self.message)
        }
    }
}

impl std::error::Error for Error {}

/// `Ok(())` for METRALE_OK, else the error with this thread's message.
pub(crate) fn check(raw: sys::metrale_status_t) -> Result<()> {
    if raw == sys::METRALE_OK {
        Ok(())
    } else {
        Err(Error::last(raw))
    }
}
