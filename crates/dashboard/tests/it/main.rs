//! The dashboard's integration tests, one binary (linking is the slow part on small machines):
//! pages over real HTTP, and the browser flow.

mod admin_pages;
mod axe;
mod browser;
mod common;
mod e2e;
mod e2e_terminal;
mod git_pages;
mod pages;
mod template_pages;
mod terminal;
