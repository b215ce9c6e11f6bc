#!/usr/bin/env bash
# The test command (README quick start; CI runs it through .ci/run): every check, as
# `cargo xtask ci` runs them (xtask/src/ci.rs lists them and why). Without a GPU the GPU tests
# are reported as ignored; with one, they all run. Arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo xtask ci "$@"
