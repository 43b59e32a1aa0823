//! One integration-test binary: every test starts real servers on 127.0.0.1:0.

mod common;
mod compare_synthetic;
