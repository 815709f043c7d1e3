//! GSS (stub)
