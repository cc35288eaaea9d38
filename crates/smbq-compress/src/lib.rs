//! SMB2 compression transform.
#![forbid(unsafe_code)]
