//! Sans-I/O SMB server core.
#![forbid(unsafe_code)]
