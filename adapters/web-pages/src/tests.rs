//! HTTP tests of the pages through poem's `TestClient`, over the application's in-memory fakes.

mod admin;
mod console;
mod harness;
mod offers;
mod public_pages;
mod purchases;
