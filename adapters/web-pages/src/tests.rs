//! HTTP tests of the pages through poem's `TestClient`, over the application's in-memory fakes.

mod admin;
mod harness;
mod public_pages;
mod purchases;
