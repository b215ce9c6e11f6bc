#!/usr/bin/env bash
# The test command (README quick start; CI runs it through .ci/run).
# Sets up what the build needs (scripts/dev-env.sh), checks formatting and lints, and runs every
# test. Without a GPU the GPU tests are reported as ignored; with one, they all run.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/dev-env.sh
if cargo fmt --version >/dev/null 2>&1; then
  cargo fmt --all --check
else
  echo "test.sh: rustfmt not installed, skipping the format check" >&2
fi
if cargo clippy --version >/dev/null 2>&1; then
  cargo clippy --all-targets --locked -- -D warnings
else
  echo "test.sh: clippy not installed, skipping lints" >&2
fi
cargo test --locked "$@"
