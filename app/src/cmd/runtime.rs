//! `tessera runtime`: which ONNX Runtime is loaded, from where.

use std::path::Path;

use anyhow::Context as _;
use tessera_core::infer::init_runtime;

pub fn run(explicit: Option<&Path>) -> anyhow::Result<()> {
    let runtime = init_runtime(explicit).context("loading ONNX Runtime")?;
    println!("ONNX Runtime {}", runtime.version);
    println!("library: {}", runtime.path.display());
    println!("found via: {}", runtime.source);
    Ok(())
}
