//! One module per subcommand.

pub mod info;
pub mod phantom;
pub mod runtime;
