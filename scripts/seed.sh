#!/usr/bin/env bash
# The main job (README quick start): the seed program's pipeline on this crate.
# Sets up what the build needs (scripts/dev-env.sh), then runs examples/seed_pipeline.rs.
# Extra arguments go to the program, e.g. `bash scripts/seed.sh --strategy naive`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/dev-env.sh
cargo run --release --locked --example seed_pipeline -- "$@"
