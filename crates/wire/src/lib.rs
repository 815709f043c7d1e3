//! SMB2/3 wire codec.
#![forbid(unsafe_code)]
