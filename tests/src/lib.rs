//! Helpers for the multi-process integration tests.
