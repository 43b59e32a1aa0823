//! Protocol adapters.
