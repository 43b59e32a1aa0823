//! How late does `timer::sleep_until` wake? `cargo run --release --example timer_precision`
use std::time::{Duration, Instant};

#[tokio::main]
async fn main() {
    let mut late = Vec::new();
    for i in 0..200u64 {
        let d = Duration::from_micros(500 + (i % 10) * 700);
        let deadline = Instant::now() + d;
        spark_bench::clock::timer::sleep_until(deadline).await;
        late.push(
            Instant::now()
                .saturating_duration_since(deadline)
                .as_micros() as u64,
        );
    }
    late.sort();
    println!(
        "lateness µs: p50 {} p90 {} p99 {} max {}",
        late[100], late[180], late[198], late[199]
    );
}
