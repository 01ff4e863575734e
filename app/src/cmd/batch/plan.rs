//! What a batch's studies will run with, known before any of them runs: the detect options
//! parsed once, as `tessera detect` parses them (a bad option is refused for the whole batch,
//! not once per study), and each study's patch, windows and predicted peak from its headers.

use std::path::Path;

use clap::Parser as _;
use tessera_plan::memory::file::MemoryModelFile;
use tessera_plan::memory::forecast::baseline_estimate_bytes;
use tessera_plan::model::Model;
use tessera_plan::request::{PatchChoice, model_geometry, plan_for};

use crate::cmd::detect::{DetectArgs, config};

#[derive(Debug, clap::Parser)]
#[command(name = "tessera detect")]
struct DetectOnly {
    #[command(flatten)]
    args: DetectArgs,
}

/// The detect options every study runs with.
pub struct Template {
    args: DetectArgs,
    model: Model,
    /// `--memory-model`'s file, read once for every study.
    memory_model: Option<tessera_plan::memory::line::MemoryModel>,
}

/// Why a study's plan could not be made.
#[derive(Debug, thiserror::Error)]
pub enum NoPlan {
    /// Its headers could not be read: a damaged study, which fails on its own turn.
    #[error("{0:#}")]
    Unreadable(anyhow::Error),
    /// Read, and its plan refused (a budget, a patch): the settings' fault.
    #[error("{0:#}")]
    Refused(anyhow::Error),
}

/// One study's plan, from its headers.
#[derive(Debug, Clone, PartialEq)]
pub struct Forecast {
    pub patch: [usize; 3],
    pub windows: usize,
    pub predicted_peak_bytes: Option<u64>,
}

impl Template {
    /// `options` as `tessera detect` would read them.
    pub fn parse(options: &[String], model: Model) -> anyhow::Result<Self> {
        let words = std::iter::once("tessera detect".to_string()).chain(options.iter().cloned());
        let parsed = DetectOnly::try_parse_from(words)
            .map_err(|e| anyhow::anyhow!("the detect options: {}", e.render()))?;
        let memory_model = match &parsed.args.memory_model {
            Some(path) => Some(MemoryModelFile::read(path)?.model),
            None => None,
        };
        Ok(Self {
            args: parsed.args,
            model,
            memory_model,
        })
    }

    /// The plan `tessera detect` would make for `study` (a refusal is the error).
    pub fn forecast(&self, study: &Path) -> Result<Forecast, NoPlan> {
        let geometry = tessera_dicom::study::open_geometry(
            study,
            self.args.series.as_deref(),
            Default::default(),
        )
        .map_err(|e| NoPlan::Unreadable(e.into()))?;
        self.plan(&geometry).map_err(NoPlan::Refused)
    }

    fn plan(&self, geometry: &tessera_dicom::Geometry) -> anyhow::Result<Forecast> {
        let model = &self.model;
        let mut config = config(&self.args, model, None, self.memory_model);
        let choice = match (self.args.patch, self.args.memory_budget) {
            (None, Some(budget_bytes)) => PatchChoice::Budget { budget_bytes },
            _ => PatchChoice::Fixed(config.tile.patch),
        };
        config.tile.patch =
            tessera_plan::request::resolve_patch(geometry, model, &config, choice)?.patch;
        let size = model_geometry(geometry, model).size;
        let baseline = baseline_estimate_bytes(geometry, model, config.device);
        let plan = plan_for(size, model, &config, baseline)
            .map_err(|e| anyhow::anyhow!("plan refused: {e}"))?;
        Ok(Forecast {
            patch: config.tile.patch,
            windows: plan.windows.len(),
            predicted_peak_bytes: plan.predicted_peak_bytes,
        })
    }
}
