//! TODO-free placeholder replaced below
