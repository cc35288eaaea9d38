//! smbq-proto's server connection engine (MS-SMB2 3.3.5): the input is the byte stream a
//! client sends, deframed and processed as the server does, with a fixed clock and seeded RNG.
//!
//! Byte 0 picks the starting state: even = a fresh connection; odd = after a valid SMB 3.1.1
//! NEGOTIATE (message id 0); odd with bit 1 set = also after a real NTLMv2 logon in two
//! SESSION_SETUPs (message ids 1, 2; session id `driver::FIRST_SESSION_ID`). Violations are
//! fine (the server disconnects); panics are not, and every frame sent must be well-formed
//! (see `driver::check_frame`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use smbq_fuzz::driver::Driver;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, stream)) = data.split_first() else {
        return;
    };
    let mut d = Driver::new();
    if sel & 1 == 1 {
        d.negotiate();
        if sel & 2 == 2 {
            d.authenticate();
        }
    }
    let _ = d.feed(stream);
});
