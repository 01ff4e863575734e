//! One module per subcommand.

pub mod batch;
pub mod bench;
pub mod chart;
pub mod detect;
pub mod evaluate;
pub mod flags;
pub mod info;
pub mod lidc;
pub mod measure_bench;
pub mod outputs;
pub mod pacs;
pub mod parity;
pub mod phantom;
pub mod resample;
pub mod review;
pub mod runtime;
pub mod sr;
pub mod sweep;
pub mod typo;
