//! Stop requests for long-running services: SIGINT and SIGTERM bump a
//! counter the service polls, so it can finish (or drop) the work in
//! flight and close its files cleanly instead of dying mid-write.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};

static STOPS: AtomicUsize = AtomicUsize::new(0);

extern "C" fn on_stop(_: libc::c_int) {
    // Async-signal-safe: one atomic add.
    STOPS.fetch_add(1, Ordering::SeqCst);
}

/// Installs the handler for SIGINT and SIGTERM (replacing the default,
/// which ends the process at once).
pub fn catch_stop_signals() -> io::Result<()> {
    on_stop_signals(on_stop)
}

/// Installs `handler` for SIGINT and SIGTERM.
fn on_stop_signals(handler: extern "C" fn(libc::c_int)) -> io::Result<()> {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction with a handler that only touches an
        // atomic or calls _exit; sa_mask empty; no SA_RESTART, so
        // blocking calls return.
        let rc = unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = handler as *const () as libc::sighandler_t;
            libc::sigemptyset(&mut act.sa_mask);
            libc::sigaction(sig, &act, std::ptr::null_mut())
        };
        if rc != 0 {
            return Err(io::Error::other(format!(
                "sigaction({sig}): {}",
                io::Error::last_os_error()
            )));
        }
    }
    Ok(())
}

extern "C" fn exit_now(sig: libc::c_int) {
    // SAFETY: _exit is async-signal-safe.
    unsafe { libc::_exit(128 + sig) }
}

/// SIGINT and SIGTERM end the process at once, as their default does,
/// also where it is PID 1 (a container's entry point), which the kernel
/// spares signals it has no handler for. For services with nothing to
/// finish (the server and the reflector keep no files open for writing).
pub fn exit_on_stop_signals() -> io::Result<()> {
    on_stop_signals(exit_now)
}

/// How many stop signals arrived since the start (0: keep running; a
/// second one means the user wants out now).
pub fn stop_signals() -> usize {
    STOPS.load(Ordering::SeqCst)
}
