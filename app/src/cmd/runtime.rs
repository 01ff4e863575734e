//! `tessera runtime [--gpu]`: which ONNX Runtime is loaded, from where.

use std::path::Path;

use anyhow::Context as _;
use tessera_infer::init_runtime;
use tessera_infer::runtime::Flavour;

#[derive(Debug, clap::Args)]
pub struct RuntimeArgs {
    #[command(flatten)]
    pub ort_lib: super::flags::OrtLib,
    /// Prefer the GPU build (from `./scripts/setup.sh --gpu`) and preload its CUDA libraries.
    #[arg(long)]
    pub gpu: bool,
}

pub fn run(args: &RuntimeArgs, explicit: Option<&Path>) -> anyhow::Result<()> {
    let flavour = if args.gpu { Flavour::Gpu } else { Flavour::Cpu };
    let runtime = init_runtime(explicit, flavour).context("loading ONNX Runtime")?;
    println!("ONNX Runtime {}", runtime.version);
    println!("library: {}", runtime.path.display());
    println!("found via: {}", runtime.source);
    println!(
        "shipped models: {}",
        tessera_plan::model::shipped_models_dir().display()
    );
    if args.gpu {
        println!("CUDA libraries preloaded: {}", runtime.cuda_libraries);
    }
    Ok(())
}
