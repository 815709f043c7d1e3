//! Empty: every request decoder and response encoder now lives in the wire
//! crate (`ringshare_wire::{file, dir, info, lock, ioctl}`). Kept only until
//! `mod msgs` is dropped from `lib.rs`.
