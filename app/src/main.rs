//! `tessera`: the viewer and the command line over `tessera-core`.
//!
//! Subcommands are thin: parse, call the core, print. Errors are reported once, here, with the
//! chain of context, and a non-zero exit code.

use tessera::{cmd, gui};

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "tessera",
    version,
    about = "Memory-bounded tiled 3D detection on CT scans",
    long_about = "Memory-bounded tiled 3D detection on CT scans.\n\nWithout a subcommand, opens the viewer on PATH (or on the built-in demo study)."
)]
struct Cli {
    /// For the viewer, or for a subcommand that loads ONNX Runtime when given before it.
    #[command(flatten)]
    ort_lib: cmd::flags::OrtLib,

    /// Study to open in the viewer (a DICOM file or folder, a NIfTI or MetaImage volume);
    /// without it, the demo study.
    path: Option<PathBuf>,

    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Open the viewer (the default without a subcommand).
    View(ViewArgs),
    /// List the CT series found in a file or folder (no PATH: the built-in demo study).
    Info(cmd::info::InfoArgs),
    /// Write a synthetic chest-CT phantom as a DICOM series, with its ground truth.
    Phantom(cmd::phantom::PhantomArgs),
    /// Run the tiled detector and write det.json (and a LUNA16 CSV).
    Detect(cmd::detect::DetectArgs),
    /// Run the detector over a manifest of studies (resumable, with a summary), or one of
    /// them per task of a cluster's job array.
    Batch(cmd::batch::BatchArgs),
    /// FROC and CPM of runs against phantom truth or LIDC readers.
    Evaluate(cmd::evaluate::EvaluateArgs),
    /// The LIDC-IDRI reader annotations of a case, grouped across readers.
    Lidc(cmd::lidc::LidcArgs),
    /// A series as the pipeline feeds it to a model (resampled), as .npy for training.
    Resample(cmd::resample::ResampleArgs),
    /// Compare two det.json runs detection by detection; exit 0 only within tolerance.
    Parity(cmd::parity::ParityArgs),
    /// List a PACS's studies (DICOMweb QIDO-RS), or retrieve one's CT series (WADO-RS).
    Pull(cmd::pacs::PullArgs),
    /// Store DICOM files (a study, an SR) on a PACS (DICOMweb STOW-RS).
    Push(cmd::pacs::PushArgs),
    /// Record a reader's decisions on a run's findings (review.json) without the viewer.
    Review(cmd::review::ReviewArgs),
    /// A run's findings (and a reader's review) as a DICOM SR (TID 1500); --dump reads one.
    Sr(cmd::sr::SrArgs),
    /// Run several patch sizes against a reference: the hardware profiling report.
    Sweep(cmd::sweep::SweepArgs),
    /// Load ONNX Runtime and say which library and version were found.
    Runtime(cmd::runtime::RuntimeArgs),
    /// Print speed figures (loading a series, generating a phantom).
    Bench(cmd::bench::BenchArgs),
}

#[derive(Debug, clap::Args)]
struct ViewArgs {
    /// A DICOM file or folder, or a NIfTI (.nii, .nii.gz) or MetaImage (.mhd, .mha) volume;
    /// without it, the demo study.
    path: Option<PathBuf>,
    #[command(flatten)]
    ort_lib: cmd::flags::OrtLib,
    /// Run the detector (default settings) once the study is open.
    #[arg(long)]
    run: bool,
    /// Draw the window seams.
    #[arg(long)]
    seams: bool,
    /// Draw the run's lung field (chest-CT models).
    #[arg(long)]
    lungs: bool,
    /// Save the window as a PNG when done (after --run, with the best detection selected),
    /// then close: for documentation and checks.
    #[arg(long, value_name = "FILE")]
    screenshot: Option<PathBuf>,
    /// Interpolate over missing or unreadable slices instead of refusing the series (File >
    /// Allow gaps in the viewer); filled slices are listed and marked.
    #[arg(long)]
    allow_gaps: bool,
    /// Show this DICOM SR's findings over the study (File > Open SR in the viewer).
    #[arg(long, value_name = "FILE")]
    sr: Option<PathBuf>,
    /// Choose this model folder (with model.json) in the run panel, e.g. a converted MONAI
    /// bundle; the picker lists it with the installed ones.
    #[arg(long, value_name = "DIR")]
    model: Option<PathBuf>,
    /// List the studies of this `tessera batch` output folder (File > Open batch results).
    #[arg(long, value_name = "DIR")]
    batch: Option<PathBuf>,
    /// With --batch: open this study (its id) with its run's detections.
    #[arg(long, value_name = "ID", requires = "batch")]
    batch_study: Option<String>,
}

fn main() -> ExitCode {
    tessera::mark_process_start();
    // Before any run allocates: the memory forecasts are calibrated with it.
    tessera_plan::memory::probe::pin_allocator();
    let words: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some(message) = cmd::typo::mistyped_subcommand(&words, &subcommand_names()) {
        eprintln!("error: {message}");
        return ExitCode::from(2);
    }
    let cli = Cli::parse();
    // Global options may stand before or after a subcommand; a study path goes after it.
    if let (Some(path), Some(_)) = (&cli.path, &cli.command) {
        eprintln!(
            "error: '{}' before the subcommand: give the study after it (e.g. `tessera detect {}`)",
            path.display(),
            path.display()
        );
        return ExitCode::from(2);
    }
    if let (None, Some(path)) = (&cli.command, &cli.path)
        && !path.exists()
    {
        eprintln!(
            "error: '{}' is neither a subcommand nor a file or folder to view (`tessera --help` lists the subcommands)",
            path.display()
        );
        return ExitCode::from(2);
    }
    let before = cli.ort_lib.library;
    // `--ort-lib` before the subcommand applies to it, where it loads a runtime.
    let ort_lib = |own: cmd::flags::OrtLib| own.library.or_else(|| before.clone());
    if before.is_some()
        && let Some(name) = cli.command.as_ref().and_then(loads_no_runtime)
    {
        eprintln!("error: --ort-lib: `tessera {name}` loads no ONNX Runtime");
        return ExitCode::from(2);
    }
    let done = |r: anyhow::Result<()>| r.map(|()| ExitCode::SUCCESS);
    let result = match cli.command {
        None => done(gui::run(cli.path, before.clone(), gui::Startup::default())),
        Some(Command::View(args)) => done(gui::run(
            args.path,
            ort_lib(args.ort_lib),
            gui::Startup {
                run: args.run,
                screenshot: args.screenshot,
                seams: args.seams,
                lungs: args.lungs,
                allow_gaps: args.allow_gaps,
                sr: args.sr,
                model: args.model,
                batch: args.batch,
                batch_study: args.batch_study,
            },
        )),
        Some(Command::Info(args)) => done(cmd::info::run(&args)),
        Some(Command::Phantom(args)) => done(cmd::phantom::run(&args)),
        Some(Command::Detect(args)) => {
            let lib = ort_lib(args.ort_lib.clone());
            cmd::detect::run(&args, lib.as_deref())
        }
        Some(Command::Batch(args)) => {
            let lib = ort_lib(args.ort_lib.clone());
            cmd::batch::run(&args, lib.as_deref())
        }
        Some(Command::Evaluate(args)) => done(cmd::evaluate::run(&args)),
        Some(Command::Lidc(args)) => done(cmd::lidc::run(&args)),
        Some(Command::Resample(args)) => done(cmd::resample::run(&args)),
        Some(Command::Parity(args)) => cmd::parity::run(&args),
        Some(Command::Pull(args)) => done(cmd::pacs::pull(&args)),
        Some(Command::Push(args)) => done(cmd::pacs::push(&args)),
        Some(Command::Review(args)) => done(cmd::review::run(&args)),
        Some(Command::Sr(args)) => done(cmd::sr::run(&args)),
        Some(Command::Sweep(args)) => {
            let lib = ort_lib(args.ort_lib.clone());
            cmd::sweep::run(&args, lib.as_deref())
        }
        Some(Command::Runtime(args)) => {
            let lib = ort_lib(args.ort_lib.clone());
            done(cmd::runtime::run(&args, lib.as_deref()))
        }
        Some(Command::Bench(args)) => done(cmd::bench::run(&args)),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            // A refused output path is a refusal like a refused plan: nothing was written.
            if error.downcast_ref::<cmd::outputs::Refused>().is_some() {
                return ExitCode::from(2);
            }
            ExitCode::FAILURE
        }
    }
}

/// Every subcommand's name (for the typo check).
fn subcommand_names() -> Vec<String> {
    use clap::CommandFactory as _;
    Cli::command()
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect()
}

/// The name of a subcommand that loads no ONNX Runtime (where `--ort-lib` means nothing).
fn loads_no_runtime(command: &Command) -> Option<&'static str> {
    match command {
        Command::View(_)
        | Command::Detect(_)
        | Command::Batch(_)
        | Command::Sweep(_)
        | Command::Runtime(_) => None,
        Command::Info(_) => Some("info"),
        Command::Phantom(_) => Some("phantom"),
        Command::Evaluate(_) => Some("evaluate"),
        Command::Lidc(_) => Some("lidc"),
        Command::Resample(_) => Some("resample"),
        Command::Parity(_) => Some("parity"),
        Command::Pull(_) => Some("pull"),
        Command::Push(_) => Some("push"),
        Command::Review(_) => Some("review"),
        Command::Sr(_) => Some("sr"),
        Command::Bench(_) => Some("bench"),
    }
}

#[cfg(test)]
mod tests {
    // Test code: a failed unwrap is a failed test.
    #![allow(clippy::unwrap_used, clippy::panic)]

    use super::{Cli, Command};
    use clap::{CommandFactory as _, Parser as _};

    /// Every option and positional of every subcommand says what it is.
    #[test]
    fn every_argument_has_help() {
        fn walk(command: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in command.get_arguments() {
                let id = arg.get_id().as_str();
                if !matches!(id, "help" | "version")
                    && arg.get_help().is_none()
                    && arg.get_long_help().is_none()
                {
                    missing.push(format!("{path} {id}"));
                }
            }
            for sub in command.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(&Cli::command(), "tessera", &mut missing);
        assert!(missing.is_empty(), "arguments without help: {missing:?}");
        Cli::command().debug_assert();
    }

    #[test]
    fn ort_lib_goes_before_or_after_a_subcommand_that_loads_a_runtime() -> Result<(), clap::Error> {
        let cli = Cli::try_parse_from(["tessera", "--ort-lib", "lib.so", "runtime"])?;
        assert!(matches!(cli.command, Some(Command::Runtime(_))), "{cli:?}");
        assert_eq!(cli.ort_lib.library.as_deref(), Some("lib.so".as_ref()));
        let cli = Cli::try_parse_from(["tessera", "runtime", "--ort-lib", "lib.so"])?;
        let Some(Command::Runtime(args)) = cli.command else {
            panic!("{cli:?}");
        };
        assert_eq!(args.ort_lib.library.as_deref(), Some("lib.so".as_ref()));
        // Commands that load no runtime do not offer it.
        for command in ["sr", "review", "info", "parity"] {
            let mut root = Cli::command();
            let Some(sub) = root.find_subcommand_mut(command) else {
                panic!("no subcommand {command}");
            };
            assert!(
                sub.get_arguments().all(|a| a.get_long() != Some("ort-lib")),
                "{command}"
            );
            assert!(
                !sub.render_long_help().to_string().contains("--ort-lib"),
                "{command} offers --ort-lib"
            );
        }
        let cli = Cli::try_parse_from([
            "tessera",
            "--ort-lib",
            "lib.so",
            "sr",
            "det.json",
            "--out",
            "sr.dcm",
        ])?;
        assert_eq!(
            cli.command.as_ref().and_then(super::loads_no_runtime),
            Some("sr")
        );
        Ok(())
    }

    #[test]
    fn a_closed_set_lists_its_values() {
        let err = Cli::try_parse_from(["tessera", "detect", "--blend", "median"]).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("[possible values: halo, gaussian, constant]"),
            "{text}"
        );
        let mut cli = Cli::command();
        let help = cli
            .find_subcommand_mut("detect")
            .map(|detect| detect.render_long_help().to_string())
            .unwrap_or_default();
        assert!(help.contains("halo:"), "{help}");
        assert!(help.contains("tight-arena:"), "{help}");
    }
}
