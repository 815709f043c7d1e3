//! The `ringshare` binary's library half: configuration, command line and user management,
//! kept out of `main.rs` so that they can be tested.
#![forbid(unsafe_code)]

pub mod cli;
pub mod config;
