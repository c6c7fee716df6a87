//! Models: provider-neutral chat types, the OpenAI-compatible adapter, the
//! provider chain with retries and fallback, and the scripted action source.

pub mod types;
