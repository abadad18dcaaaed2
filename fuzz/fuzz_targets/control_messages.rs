//! The control protocol reader on any byte stream: messages or errors,
//! never a panic, and never more than the stream holds.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tightlink_wire::control::read_message;

fuzz_target!(|data: &[u8]| {
    let mut r = data;
    for _ in 0..64 {
        if read_message(&mut r).is_err() {
            break;
        }
    }
});
