//! `tessera`: the command line (and, later, the viewer) over `tessera-core`.
//!
//! Subcommands are thin: parse, call the core, print. Errors are reported once, here, with the
//! chain of context, and a non-zero exit code.

mod cmd;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "tessera",
    version,
    about = "Memory-bounded tiled 3D detection on CT scans"
)]
struct Cli {
    /// ONNX Runtime library to load (default: ORT_DYLIB_PATH, then the project's .runtime/).
    #[arg(long, global = true, value_name = "FILE")]
    ort_lib: Option<PathBuf>,

    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List the CT series found in a file or folder (no PATH: the built-in demo study).
    Info(cmd::info::InfoArgs),
    /// Write a synthetic chest-CT phantom as a DICOM series, with its ground truth.
    Phantom(cmd::phantom::PhantomArgs),
    /// Run the tiled detector and write det.json (and a LUNA16 CSV).
    Detect(cmd::detect::DetectArgs),
    /// FROC and CPM of runs against phantom truth or LIDC readers.
    Evaluate(cmd::evaluate::EvaluateArgs),
    /// The LIDC-IDRI reader annotations of a case, grouped across readers.
    Lidc(cmd::lidc::LidcArgs),
    /// Compare two det.json runs detection by detection; exit 0 only within tolerance.
    Parity(cmd::parity::ParityArgs),
    /// Run several patch sizes against a reference: the hardware profiling report.
    Sweep(cmd::sweep::SweepArgs),
    /// Load ONNX Runtime and say which library and version were found.
    Runtime(cmd::runtime::RuntimeArgs),
    /// Print speed figures (loading a series, generating a phantom).
    Bench(cmd::bench::BenchArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let done = |r: anyhow::Result<()>| r.map(|()| ExitCode::SUCCESS);
    let result = match cli.command {
        // Until the viewer lands, the main job is `info` on the demo study.
        None => done(cmd::info::run(&cmd::info::InfoArgs::default())),
        Some(Command::Info(args)) => done(cmd::info::run(&args)),
        Some(Command::Phantom(args)) => done(cmd::phantom::run(&args)),
        Some(Command::Detect(args)) => cmd::detect::run(&args, cli.ort_lib.as_deref()),
        Some(Command::Evaluate(args)) => done(cmd::evaluate::run(&args)),
        Some(Command::Lidc(args)) => done(cmd::lidc::run(&args)),
        Some(Command::Parity(args)) => cmd::parity::run(&args),
        Some(Command::Sweep(args)) => done(cmd::sweep::run(&args, cli.ort_lib.as_deref())),
        Some(Command::Runtime(args)) => done(cmd::runtime::run(&args, cli.ort_lib.as_deref())),
        Some(Command::Bench(args)) => done(cmd::bench::run(&args)),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
