//! The simulator's output corpus: original code and prose written for spark-bench.
//!
//! Owns: the text a simulated model "generates". Does not own: tokenisation (see `text`).
//! Nothing here is copied from elsewhere; it only has to look like plausible assistant output.

/// Code answers: a snake game, a rate limiter, a debounce helper, a ring buffer.
pub const CODE: &str = r##"Here is a small, self-contained version you can run directly.

```python
import random
import curses

WIDTH, HEIGHT = 40, 20
UP, DOWN, LEFT, RIGHT = (0, -1), (0, 1), (-1, 0), (1, 0)
KEYS = {curses.KEY_UP: UP, curses.KEY_DOWN: DOWN, curses.KEY_LEFT: LEFT, curses.KEY_RIGHT: RIGHT}


def place_food(snake):
    while True:
        cell = (random.randrange(1, WIDTH - 1), random.randrange(1, HEIGHT - 1))
        if cell not in snake:
            return cell


def step(snake, direction, food):
    head_x, head_y = snake[0]
    dx, dy = direction
    head = (head_x + dx, head_y + dy)
    if head in snake or not (0 < head[0] < WIDTH - 1 and 0 < head[1] < HEIGHT - 1):
        return None, food
    snake.insert(0, head)
    if head == food:
        food = place_food(snake)
    else:
        snake.pop()
    return snake, food


def main(screen):
    curses.curs_set(0)
    screen.timeout(120)
    snake = [(WIDTH // 2, HEIGHT // 2)]
    direction = RIGHT
    food = place_food(snake)
    score = 0
    while True:
        key = screen.getch()
        new = KEYS.get(key)
        if new and (new[0] != -direction[0] or new[1] != -direction[1]):
            direction = new
        length = len(snake)
        snake, food = step(snake, direction, food)
        if snake is None:
            break
        if len(snake) > length:
            score += 10
        screen.erase()
        screen.border()
        screen.addstr(0, 2, f" score {score} ")
        screen.addch(food[1], food[0], "*")
        for x, y in snake:
            screen.addch(y, x, "#")
        screen.refresh()
    return score


if __name__ == "__main__":
    print("final score:", curses.wrapper(main))
```

The game loop reads one key per tick, refuses to reverse into itself, and grows the
snake only when the head lands on the food. Next, the same idea for a token bucket in Rust:

```rust
use std::time::{Duration, Instant};

/// A token bucket: `capacity` requests at once, refilled at `rate` per second.
pub struct Bucket {
    capacity: f64,
    tokens: f64,
    rate: f64,
    last: Instant,
}

impl Bucket {
    pub fn new(capacity: u32, rate: f64) -> Self {
        Bucket { capacity: capacity as f64, tokens: capacity as f64, rate, last: crate::clock::now() }
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate).min(self.capacity);
        self.last = now;
    }

    /// Takes one token, or says how long to wait for the next one.
    pub fn try_take(&mut self) -> Result<(), Duration> {
        self.refill(crate::clock::now());
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            let missing = 1.0 - self.tokens;
            Err(Duration::from_secs_f64(missing / self.rate))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empties_then_refuses() {
        let mut b = Bucket::new(2, 1.0);
        assert!(b.try_take().is_ok());
        assert!(b.try_take().is_ok());
        assert!(b.try_take().is_err());
    }
}
```

A ring buffer keeps the last N samples without reallocating:

```rust
pub struct Ring<T> {
    items: Vec<Option<T>>,
    next: usize,
    len: usize,
}

impl<T: Clone> Ring<T> {
    pub fn with_capacity(n: usize) -> Self {
        Ring { items: vec![None; n.max(1)], next: 0, len: 0 }
    }

    pub fn push(&mut self, value: T) {
        let cap = self.items.len();
        self.items[self.next] = Some(value);
        self.next = (self.next + 1) % cap;
        self.len = (self.len + 1).min(cap);
    }

    pub fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        let cap = self.items.len();
        let start = (self.next + cap - self.len) % cap;
        (0..self.len).filter_map(move |i| self.items[(start + i) % cap].as_ref())
    }
}
```

And in JavaScript, a debounce that keeps the latest arguments:

```javascript
export function debounce(fn, waitMs) {
  let timer = null;
  let lastArgs = [];
  return function debounced(...args) {
    lastArgs = args;
    if (timer !== null) {
      clearTimeout(timer);
    }
    timer = setTimeout(() => {
      timer = null;
      fn.apply(this, lastArgs);
    }, waitMs);
  };
}

export async function fetchJson(url, { retries = 3, backoffMs = 200 } = {}) {
  for (let attempt = 0; attempt <= retries; attempt += 1) {
    const res = await fetch(url);
    if (res.ok) {
      return res.json();
    }
    if (res.status < 500 || attempt === retries) {
      throw new Error(`GET ${url} failed with ${res.status}`);
    }
    await new Promise((resolve) => setTimeout(resolve, backoffMs * 2 ** attempt));
  }
  return null;
}
```

To check the snake logic without a terminal, call `step` directly:

```python
def test_step_grows_on_food():
    snake = [(5, 5)]
    grown, _ = step(snake, RIGHT, (6, 5))
    assert grown[0] == (6, 5)
    assert len(grown) == 2


def test_step_hits_wall():
    snake = [(WIDTH - 2, 5)]
    dead, _ = step(snake, RIGHT, (1, 1))
    assert dead is None
```

Run the tests with `pytest -q`, then start the game with `python snake.py`.
"##;

/// Prose answers for prompts that do not look like code requests.
pub const PROSE: &str = r##"Latency in a streaming answer has three parts that are easy to mix up. The first is
the time before the service starts working on the request: connection setup, the request
upload, authentication and routing. The second is the time the model needs before it can
emit its first token, which grows with the amount of context it has not already seen. The
third is the pace of the tokens that follow, which depends on the hardware and on how the
server batches requests together.

A persistent connection removes most of the first part. It also lets the service keep the
previous turn in memory, so the next request only carries what is new. That matters most
for agents that call tools many times in a row, because each call is a full round trip.

When you measure, record when each byte arrives rather than when your code gets around to
parsing it, keep the clock monotonic, and report distributions rather than single numbers.
A median hides the slow tail that users remember, and a mean hides almost everything else.
"##;
