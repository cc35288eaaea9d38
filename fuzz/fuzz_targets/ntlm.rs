//! smbq-auth with raw NTLMSSP tokens (MS-NLMP 3.2.5, 3.1.5): the acceptor fed hostile
//! NEGOTIATE / AUTHENTICATE messages (fresh, after a valid first leg, or a real AUTHENTICATE
//! with bits flipped) and the initiator fed a hostile CHALLENGE. See `smbq_fuzz::auth::run`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| smbq_fuzz::auth::run(data, false));
