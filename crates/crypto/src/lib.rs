//! SMB signing, key derivation and encryption.
#![forbid(unsafe_code)]
