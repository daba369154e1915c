//! HTTP tests of the pages through poem's `TestClient`, over the application's in-memory fakes
//! (a real `Service` behind `Ports`), and over mocks of the inbound ports (`fake_ports`).

mod admin;
mod console;
mod fake_ports;
mod harness;
mod offers;
mod public_pages;
mod purchases;
mod teams;
