//! The `tessera` application: headless subcommands ([`cmd`]) and the desktop viewer ([`gui`]).
//! Both drive `tessera_core::pipeline`; neither adds detection logic of its own.

pub mod cmd;
pub mod gui;
