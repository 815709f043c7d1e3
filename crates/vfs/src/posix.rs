//! POSIX backend.
