//! The library's log lines routed into a Rust closure.

use crate::error::{check, Result};
use metrale_gpu_sys as sys;
use std::ffi::{c_char, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{PoisonError, RwLock};

/// Log levels, lowest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Every step.
    Trace,
    /// Details for debugging.
    Debug,
    /// Notable events.
    Info,
    /// Something is likely wrong (leaks at destroy, waits on pinned sources).
    Warn,
    /// A call failed.
    Error,
    /// The context is unusable.
    Critical,
    /// Nothing is logged.
    Off,
}

impl Level {
    fn to_raw(self) -> sys::metrale_log_level_t {
        self as sys::metrale_log_level_t
    }
    fn from_raw(raw: sys::metrale_log_level_t) -> Level {
        match raw {
            sys::METRALE_LOG_TRACE => Level::Trace,
            sys::METRALE_LOG_DEBUG => Level::Debug,
            sys::METRALE_LOG_INFO => Level::Info,
            sys::METRALE_LOG_WARN => Level::Warn,
            sys::METRALE_LOG_ERROR => Level::Error,
            sys::METRALE_LOG_CRITICAL => Level::Critical,
            _ => Level::Off,
        }
    }
}

type Sink = Box<dyn Fn(Level, &str) + Send + Sync>;

/// Held for reading while a line is delivered, so replacing the sink waits
/// for lines in flight and never frees a closure that is running.
static SINK: RwLock<Option<Sink>> = RwLock::new(None);

unsafe extern "C" fn trampoline(level: sys::metrale_log_level_t, message: *const c_char, _user: *mut c_void) {
    // A panic must not unwind into C: it is caught and the line dropped.
    let caught = catch_unwind(AssertUnwindSafe(|| {
        if message.is_null() {
            return;
        }
        let text = CStr::from_ptr(message).to_string_lossy();
        let guard = SINK.read().unwrap_or_else(PoisonError::into_inner);
        if let Some(sink) = guard.as_ref() {
            sink(Level::from_raw(level), &text);
        }
    }));
    if let Err(payload) = caught {
        // The payload's own Drop may panic (`panic_any` takes any value),
        // and that panic must not unwind into C either; a payload that
        // panics again is leaked rather than dropped a second time.
        if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(payload))) {
            std::mem::forget(again);
        }
    }
}

/// Sends every log line of the library to `f` instead of stderr. `f` may
/// run on any thread, concurrently. It may call this crate (lines those
/// calls log go to stderr, not back into `f`), except `set_log_callback`,
/// `clear_log_callback` (they wait for `f` to return) and dropping the last
/// owner of a context (a `Context` or any handle made from it: the library
/// refuses a destroy from inside the callback, and the context leaks).
pub fn set_log_callback<F>(f: F)
where
    F: Fn(Level, &str) + Send + Sync + 'static,
{
    let old = std::mem::replace(&mut *SINK.write().unwrap_or_else(PoisonError::into_inner), Some(Box::new(f)));
    // SAFETY: the trampoline is a valid fn for the library's whole lifetime.
    unsafe { sys::metrale_log_set_callback(Some(trampoline), std::ptr::null_mut()) };
    // Dropped only now, outside the lock: the old closure may own the last
    // handle of a context, whose destroy logs through the trampoline, which
    // takes SINK for reading.
    drop(old);
}

/// Restores logging to stderr and drops the closure.
pub fn clear_log_callback() {
    unsafe { sys::metrale_log_set_callback(None, std::ptr::null_mut()) };
    let old = SINK.write().unwrap_or_else(PoisonError::into_inner).take();
    // Outside the lock, as in `set_log_callback`: another thread may have
    // set a callback again by the time the old closure's context logs.
    drop(old);
}

/// Sets the level for every context (`METRALE_LOG` sets it too).
pub fn set_log_level(level: Level) -> Result<()> {
    check(unsafe { sys::metrale_log_set_level(level.to_raw()) })
}
