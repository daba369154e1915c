//! Support for Tally's black-box tests: every test module compiles into the one `api` test
//! binary under `tests/api/`.
