//! The driver's side of watching directories through the kernel: the trait it implements,
//! the events it hands over and inotify's mask bits. What the core does with them is
//! crate::notify's kernel part (notify/kernel.rs).

pub use crate::notify::kernel::{mask, KernelEvent, KernelWatch, ECHO_MS, HOLD_MS, TREE_DIRS_MAX};
