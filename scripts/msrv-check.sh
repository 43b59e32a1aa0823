#!/usr/bin/env bash
# MSRV check: `cargo check --locked --all-targets` with Rust 1.85, the `rust-version` in
# Cargo.toml.
#
# rustup cannot download toolchains here, so the compiler is Debian's: bookworm ships Rust
# 1.85.0 as `rustc-web`/`cargo-web` (the toolchain Debian keeps for Firefox ESR). Its .debs
# (and the few libraries they need that a Rust machine lacks) are fetched with
# `apt-get download` and unpacked with `dpkg -x` into a private directory, never installed:
# /usr/bin/cargo and /usr/bin/rustc stay untouched and the rustup toolchain on PATH stays the
# default for everything else.
#
# Cached outside the work tree (CI runs in a fresh clone on the same machine):
#   ${SPARK_BENCH_CACHE:-$HOME/.cache/spark-bench}/rust-<version>/
# The build goes to target/msrv (its own CARGO_TARGET_DIR), so the main target is not
# rebuilt afterwards.
#
# Prints "msrv check: <seconds>s (toolchain cold|warm)".
#
# Not a CI step: measured on the 2-core machine while other builds shared it (load ~11), a
# first run took 1929 s (32 min: every dependency checked with 1.85, opt-level 2 for
# dependencies); a run with target/msrv already built takes ~40 s (spark-bench alone).
#
# The lockfile must resolve to crates that support 1.85: .cargo/config.toml sets
# `resolver.incompatible-rust-versions = "fallback"`, so `cargo update` keeps it that way.
set -euo pipefail
cd "$(dirname "$0")/.."

MSRV=$(sed -n 's/^rust-version *= *"\([0-9.]*\)"/\1/p' Cargo.toml)
DEB_VERSION="1.85.0+dfsg3-1~deb12u3"
LLVM_PKG="libllvm19"
case "$DEB_VERSION" in
  "$MSRV".*) ;;
  *) echo "Cargo.toml says rust-version = $MSRV but this script pins Debian's $DEB_VERSION" >&2; exit 2 ;;
esac

CACHE="${SPARK_BENCH_CACHE:-$HOME/.cache/spark-bench}"
ROOT="$CACHE/rust-$DEB_VERSION"
LIBS="$ROOT/usr/lib/x86_64-linux-gnu:$ROOT/lib/x86_64-linux-gnu"

start=$(date +%s)
state=warm
if ! LD_LIBRARY_PATH="$LIBS" "$ROOT/usr/bin/cargo" --version >/dev/null 2>&1; then
  state=cold
  echo "unpacking Debian's Rust $DEB_VERSION into $ROOT"
  debs=$(mktemp -d)
  trap 'rm -rf "$debs"' EXIT
  # The pinned version must be in the apt lists; refresh them once if it is not.
  if ! apt-cache show "rustc-web=$DEB_VERSION" >/dev/null 2>&1; then
    apt-get update -qq
  fi
  # Download as root into a directory apt's sandbox user can write.
  chmod 777 "$debs"
  (
    cd "$debs"
    apt-get download -qq \
      "rustc-web=$DEB_VERSION" "cargo-web=$DEB_VERSION" \
      "libstd-rust-web-dev=$DEB_VERSION" "libstd-rust-web-$MSRV=$DEB_VERSION" \
      "$LLVM_PKG" libpcre3 libhttp-parser2.9
  ) || {
    echo "apt-get could not fetch Debian's rustc-web $DEB_VERSION (is it still in bookworm?)" >&2
    exit 2
  }
  rm -rf "$ROOT.partial"
  mkdir -p "$ROOT.partial"
  for deb in "$debs"/*.deb; do
    dpkg -x "$deb" "$ROOT.partial"
  done
  rm -rf "$ROOT"
  mv "$ROOT.partial" "$ROOT"
fi

export LD_LIBRARY_PATH="$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
RUSTC="$ROOT/usr/bin/rustc"
"$RUSTC" --version
"$RUSTC" --version | grep -q "^rustc $MSRV\." || { echo "not Rust $MSRV" >&2; exit 2; }

# RUSTUP_TOOLCHAIN and friends would redirect a rustup proxy, not these binaries; unset them
# anyway so nothing from the outer toolchain leaks in.
env -u RUSTUP_TOOLCHAIN -u RUSTFLAGS -u RUSTDOCFLAGS \
  RUSTC="$RUSTC" RUSTDOC="$ROOT/usr/bin/rustdoc" CARGO_TARGET_DIR=target/msrv \
  "$ROOT/usr/bin/cargo" check --locked --all-targets

echo "msrv check: $(($(date +%s) - start))s (toolchain $state)"
