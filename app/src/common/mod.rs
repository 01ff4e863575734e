//! What the CLI and the viewer share: the demo study, size parsing, series rows, a batch's
//! records. Neither
//! `cmd` nor `gui` imports the other; both import this.

pub mod batch;
pub mod demo;
pub mod parse;
pub mod series;
pub mod settings;
