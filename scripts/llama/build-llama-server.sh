#!/usr/bin/env bash
# Builds llama.cpp's `llama-server` from the llama.cpp sources vendored in the llama-cpp-python
# sdist (a package registry ships it; nothing else is fetched), and links it to
# target/llama/llama-server.
#
# Idempotent and cached outside the work tree: CI runs in a fresh clone each time on the same
# machine, so the binary lives in
#   ${SPARK_BENCH_CACHE:-$HOME/.cache/spark-bench}/llama-server-<version>-<hash of build flags>/
# and a warm run only checks it and links it (no download, no build).
#
# Build: Release, only the llama-server target, static libraries, no OpenSSL, no web UI
# (neither built with npm nor downloaded), no tests/examples, GGML_NATIVE=OFF (the x86-64
# baseline of SSE4.2/AVX/AVX2/FMA/F16C/BMI2 that ggml enables without -march=native, so the
# cached binary runs on any CPU of this machine kind), -j2.
#
# Prints "llama-server build: cold|warm <seconds>s" for the CI log.
set -euo pipefail
cd "$(dirname "$0")/../.."

VERSION="0.3.36"
SDIST_SHA256="832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
CMAKE_VERSION="4.4.5"
NINJA_VERSION="1.13.2"
JOBS="${LLAMA_BUILD_JOBS:-2}"

CMAKE_FLAGS=(
  -DCMAKE_BUILD_TYPE=Release
  -DBUILD_SHARED_LIBS=OFF
  -DGGML_NATIVE=OFF
  -DGGML_CCACHE=OFF
  -DLLAMA_OPENSSL=OFF
  -DLLAMA_BUILD_UI=OFF
  -DLLAMA_USE_PREBUILT_UI=OFF
  -DLLAMA_BUILD_TESTS=OFF
  -DLLAMA_BUILD_EXAMPLES=OFF
  -DLLAMA_BUILD_APP=OFF
  -DLLAMA_BUILD_TOOLS=ON
  -DLLAMA_BUILD_SERVER=ON
)

CACHE="${SPARK_BENCH_CACHE:-${HOME:-/tmp}/.cache/spark-bench}"
# The hash covers everything that changes the binary: the source version, the flags, the
# compilers and the build tools.
HASH=$(
  {
    echo "$VERSION $SDIST_SHA256 cmake=$CMAKE_VERSION ninja=$NINJA_VERSION"
    printf '%s\n' "${CMAKE_FLAGS[@]}"
    cc --version | head -n1
    c++ --version | head -n1
    uname -m
  } | sha256sum | cut -c1-12
)
DEST="$CACHE/llama-server-$VERSION-$HASH"
LINK_DIR=target/llama
START=$(date +%s)

link_binary() {
  mkdir -p "$LINK_DIR"
  ln -sfn "$DEST/llama-server" "$LINK_DIR/llama-server"
}

usable() { [ -x "$DEST/llama-server" ] && "$DEST/llama-server" --version >/dev/null 2>&1; }

if usable; then
  link_binary
  echo "llama-server build: warm $(($(date +%s) - START))s (cached in $DEST)"
  exit 0
fi

mkdir -p "$CACHE"
# One build at a time per cache directory.
exec 9>"$CACHE/.llama-server-$VERSION-$HASH.lock"
flock 9
if usable; then
  link_binary
  echo "llama-server build: warm $(($(date +%s) - START))s (built by a concurrent run)"
  exit 0
fi

WORK="$CACHE/.build-llama-server-$VERSION-$HASH"
rm -rf "$WORK"
mkdir -p "$WORK"

# Build tools from wheels, in a venv beside the build (removed with it).
python3 -m venv "$WORK/venv"
"$WORK/venv/bin/pip" install --quiet --disable-pip-version-check \
  "cmake==$CMAKE_VERSION" "ninja==$NINJA_VERSION"

# The sdist, pinned by hash. Only llama-cpp-python itself must be a source distribution; its
# build backend (needed by pip to read the metadata) may come as wheels.
echo "llama-cpp-python==$VERSION --hash=sha256:$SDIST_SHA256" >"$WORK/requirements.txt"
"$WORK/venv/bin/pip" download --quiet --disable-pip-version-check --no-deps \
  --no-binary llama-cpp-python --require-hashes -r "$WORK/requirements.txt" -d "$WORK/dl"
tar -xzf "$WORK/dl/llama_cpp_python-$VERSION.tar.gz" -C "$WORK"
SRC="$WORK/llama_cpp_python-$VERSION/vendor/llama.cpp"
[ -f "$SRC/CMakeLists.txt" ] || { echo "no vendored llama.cpp in the sdist" >&2; exit 1; }

PATH="$WORK/venv/bin:$PATH" cmake -S "$SRC" -B "$WORK/build" -G Ninja "${CMAKE_FLAGS[@]}" \
  >"$WORK/configure.log" 2>&1 || { tail -n 40 "$WORK/configure.log"; exit 1; }
PATH="$WORK/venv/bin:$PATH" cmake --build "$WORK/build" --target llama-server -j "$JOBS" \
  >"$WORK/build.log" 2>&1 || { tail -n 60 "$WORK/build.log"; exit 1; }

mkdir -p "$DEST.tmp"
cp "$WORK/build/bin/llama-server" "$DEST.tmp/llama-server"
printf '%s\n' "llama-cpp-python $VERSION (vendored llama.cpp)" "${CMAKE_FLAGS[@]}" >"$DEST.tmp/BUILD-FLAGS"
rm -rf "$DEST"
mv "$DEST.tmp" "$DEST"
rm -rf "$WORK"
usable || { echo "built llama-server does not run" >&2; exit 1; }
link_binary
echo "llama-server build: cold $(($(date +%s) - START))s (cached in $DEST)"
