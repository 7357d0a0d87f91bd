//! Helpers for the multi-process integration tests.

pub mod harness;
