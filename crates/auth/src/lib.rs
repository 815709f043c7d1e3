//! Authentication: NTLMSSP, SPNEGO, smbpasswd.
#![forbid(unsafe_code)]
