//! The log closure's lifetime and panics. A binary of its own: the closure
//! is process-wide, and these tests replace it while lines are logged.

mod common;

use common::test_ctx;
use std::process::Command;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

/// The tests here replace the process-wide closure; one at a time.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The old closure owns the only handle of a context whose destroy logs a
/// warning (the leak below); replacing the closure destroys it, and that
/// line must reach the new closure rather than deadlock on the sink's lock.
#[test]
fn replacing_a_closure_that_owns_the_last_context_returns() {
    let _serial = serial();
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = lines.clone();
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        let ctx = test_ctx(0);
        ctx.alloc::<u8>(64).unwrap().into_raw();
        metrale_gpu::set_log_callback(move |_, _| {
            let _owned = &ctx;
        });
        metrale_gpu::set_log_callback(move |_, text| sink.lock().unwrap().push(text.to_string()));
        metrale_gpu::clear_log_callback();
        done.send(()).unwrap();
    });
    // A deadlock would hang the test forever; it fails here instead.
    finished
        .recv_timeout(Duration::from_secs(30))
        .expect("set_log_callback did not return: dropping the old closure deadlocked");
    let got = lines.lock().unwrap();
    assert!(got.iter().any(|t| t.contains(file!())), "the destroy's leak warning did not reach the new closure: {got:?}");
}

/// Set in the child process that `a_panic_whose_payload_panics_on_drop_is_contained`
/// runs; the test of the same name does nothing without it.
const CHILD: &str = "METRALE_LOG_TEST_PANICKING_PAYLOAD";

/// Run in a child process: were the second panic to reach C, the process
/// would abort, which the parent sees as a failed exit.
#[test]
fn a_panic_whose_payload_panics_on_drop_is_contained() {
    let _serial = serial();
    if std::env::var_os(CHILD).is_some() {
        struct Bomb;
        impl Drop for Bomb {
            fn drop(&mut self) {
                panic!("the payload's drop panics too");
            }
        }
        metrale_gpu::set_log_callback(|_, _| std::panic::panic_any(Bomb));
        {
            let ctx = test_ctx(0);
            ctx.alloc::<u8>(8).unwrap().into_raw();
            ctx.sweep_unreleased().unwrap(); // logs a warning
        }
        metrale_gpu::clear_log_callback();
        return;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "a_panic_whose_payload_panics_on_drop_is_contained", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the child exited with {}:\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // The child must have run the test, not filtered it out.
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 passed"), "{}", String::from_utf8_lossy(&out.stdout));
}
