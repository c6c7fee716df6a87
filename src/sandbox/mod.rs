//! The Docker sandbox.
