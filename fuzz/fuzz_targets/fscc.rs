//! MS-FSCC information classes (smbq_wire::fscc): SET_INFO buffers the server decodes and the
//! QUERY_INFO / QUERY_DIRECTORY buffers the client decodes.
//!
//! Input: byte 0 is the class, byte 1 % 4 picks file, file system, a QUERY_DIRECTORY list or a
//! security descriptor; the rest is the buffer. See `smbq_fuzz::fscc` for the invariants.
#![no_main]

use libfuzzer_sys::fuzz_target;
use smbq_fuzz::fscc;
use smbq_wire::fscc::FileInfoClass;
use smbq_wire::fscc::dir_info::DirClass;
use smbq_wire::query_info::InfoType;

fuzz_target!(|data: &[u8]| {
    let [class, kind, buf @ ..] = data else {
        return;
    };
    match kind % 4 {
        0 => fscc::check(InfoType::FILE, *class, buf),
        1 => fscc::check(InfoType::FILESYSTEM, *class, buf),
        3 => fscc::check_security(buf),
        _ => {
            if let Some(dir) = DirClass::from_info_class(FileInfoClass(*class)) {
                fscc::check_dir_list(dir, buf);
            }
        }
    }
});
