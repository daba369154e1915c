# Everyday recipes: one-line aliases of cargo commands (logic lives in Rust, not here).

# Run the service on its embedded default (SQLite under ./data/, provider sandbox).
run:
    cargo run -p bootstrap --bin tally -- serve

# Validate config/payment.toml and config/credits.toml and print the plans.
check-config:
    cargo run -p bootstrap --bin tally -- check-config

# The test suite (PostgreSQL variants run when TEST_DATABASE_URL is set).
test:
    cargo test --workspace

# Lints as CI runs them.
lint:
    cargo clippy --workspace --all-targets -- -D warnings

# Format the workspace.
fmt:
    cargo fmt --all

# The TypeScript client's tests (and the integration guide's snippets) against a real `tally serve`.
client-test:
    cd clients/typescript && npm ci && npm test

# Everything CI runs (starts a throwaway PostgreSQL).
check:
    bash .ci/run

# Benchmarks (release build).
bench:
    cargo run --release -p bench --bin tally-bench

# The reliability suite: webhook fuzzing, several instances on PostgreSQL, kill -9 under load,
# a database outage, schemathesis (starts a throwaway PostgreSQL unless TEST_DATABASE_URL is set).
reliability:
    bash .ci/reliability
