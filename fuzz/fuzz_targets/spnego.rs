//! smbq-auth with SPNEGO-wrapped tokens (RFC 4178, MS-SPNG): NegTokenInit / NegTokenResp DER
//! parsing, mechanism selection and mechListMIC, around the same NTLM legs as the `ntlm`
//! target. See `smbq_fuzz::auth::run`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| smbq_fuzz::auth::run(data, true));
