//! SPNEGO (stub)
