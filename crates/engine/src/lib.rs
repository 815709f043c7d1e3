//! io_uring engine.
