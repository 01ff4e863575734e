//! A detector model on disk: `model.onnx` plus its card, `model.json`.
//!
//! The card says everything the engine needs and must not guess: input normalisation, target
//! spacing, output names, stride and receptive field (the halo and the window alignment come
//! from them), the default threshold. A model without a card, or whose file does not match the
//! card's hash, is refused before anything runs.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// How the raw outputs become boxes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputFamily {
    /// Heatmap peaks with size and offset heads, at the model's stride.
    Centernet,
    /// A probability map turned into boxes by connected components (e.g. nnU-Net exports).
    Segmentation,
    /// MONAI's RetinaNet: classification and box-regression maps per pyramid level, each at
    /// its own stride, decoded against anchors ([`RetinaSpec`], `crate::retina`).
    Retinanet,
}

/// The input tensor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputSpec {
    pub name: String,
    /// Always `NCDHW` (D = z, H = y, W = x) for now.
    pub layout: String,
    /// HU are clipped to `[lo, hi]`, then mapped to `[0, 1]` (air is 0).
    pub hu_window: [f32; 2],
    #[serde(default)]
    pub normalisation: String,
    /// The voxel order the network was trained on, as axis codes (`RAS`: x increases toward the
    /// patient's right, y anterior, z superior). The model's grid is the study flipped to it;
    /// `None`: the study's own order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub orientation: Option<String>,
}

/// One output tensor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputSpec {
    pub name: String,
    #[serde(default)]
    pub meaning: String,
}

/// Names of the CenterNet heads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outputs {
    pub heatmap: OutputSpec,
    pub size: Option<OutputSpec>,
    pub offset: Option<OutputSpec>,
}

/// One output head the pipeline reads: its name in the ONNX graph and its channels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head<'a> {
    pub name: &'a str,
    /// Channels of the `[1, channels, z, y, x]` output: 1 for a heatmap or probability map,
    /// 3 (x, y, z) for the size and offset heads; anchors x classes or anchors x 6 for a
    /// RetinaNet level's.
    pub channels: usize,
    /// Input voxels per output cell, `[x, y, z]`.
    pub stride: [usize; 3],
}

/// Input voxels per output cell, `[x, y, z]`; a card writes one number when the axes agree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Stride {
    Same(usize),
    PerAxis([usize; 3]),
}

impl Stride {
    pub fn per_axis(self) -> [usize; 3] {
        match self {
            Self::Same(s) => [s; 3],
            Self::PerAxis(s) => s,
        }
    }
}

/// One pyramid level of a RetinaNet: its two outputs, its stride and its anchors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RetinaLevel {
    /// `[1, anchors x classes, z, y, x]` logits; channel `a * classes + k`.
    pub classification: String,
    /// `[1, anchors x 6, z, y, x]` box codes; channel `a * 6 + j`, `j` = dx, dy, dz, dw, dh, dd.
    pub box_regression: String,
    pub stride: [usize; 3],
    /// The cell's anchors, `[x0, y0, z0, x1, y1, z1]` in input voxels about the cell's centre
    /// (`index * stride + stride / 2`), as MONAI's anchor generator computes them.
    pub anchors: Vec<[f64; 6]>,
}

/// How a RetinaNet's maps become boxes, as MONAI's `RetinaNetDetector` does it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RetinaSpec {
    pub num_classes: usize,
    pub levels: Vec<RetinaLevel>,
    pub box_coder_weights: [f64; 6],
    /// The largest log size change a box code may apply (MONAI: `ln(1000 / 16)`).
    pub box_transform_clip: f64,
    pub topk_candidates_per_level: usize,
    pub nms_threshold: f64,
    pub detections_per_image: usize,
    /// What MONAI pads the image to before the network, `[x, y, z]`.
    pub size_divisible: [usize; 3],
}

/// How a card's model is tiled by default (a bundle's own sliding window).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Tiling {
    pub blend: crate::plan::BlendMode,
    pub overlap: f64,
}

/// A card's memory calibration for one kind of device: the bound and what it was fitted on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryCoefficients {
    #[serde(flatten)]
    pub model: crate::memory::line::MemoryModel,
    /// How it was measured (study, device, precision, allocator settings).
    #[serde(default)]
    pub measured_on: String,
    /// `(largest window voxels, peak bytes above what the process and the pass held)` of each
    /// pass of each calibration run (`memory::file::MemoryModelFile::points`), so that the
    /// bound can be checked against what it was fitted on.
    #[serde(default)]
    pub points: Vec<(usize, u64)>,
}

/// Numeric precision of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Precision {
    #[default]
    Fp32,
    Fp16,
}

impl std::str::FromStr for Precision {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "fp32" => Ok(Self::Fp32),
            "fp16" => Ok(Self::Fp16),
            other => Err(format!("precision '{other}' is not fp32 or fp16")),
        }
    }
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Fp32 => "fp32",
            Self::Fp16 => "fp16",
        })
    }
}

/// The same network run once more on the study resampled to a coarser grid: a lesion wider
/// than the receptive field at the card's spacing fits in it there. Its findings of
/// `min_size_mm` or more (mean side) join the main pass's candidates before non-maximum
/// suppression; smaller ones are the main pass's job.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CoarsePass {
    pub spacing_mm: [f64; 3],
    pub min_size_mm: f64,
}

/// Another file of the same network, e.g. its fp16 export.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Variant {
    pub model_file: String,
    pub sha256: String,
}

/// How the rescoring stage's probability and the detector's score make the final score.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Combine {
    /// The classifier's probability alone.
    Classifier,
    /// `sqrt(detector * classifier)`: a finding needs both.
    GeometricMean,
}

impl Combine {
    pub fn score(self, detector: f32, classifier: f32) -> f32 {
        match self {
            Self::Classifier => classifier,
            Self::GeometricMean => (detector * classifier).sqrt(),
        }
    }
}

/// A second stage that rescores the detector's best candidates (false-positive reduction): a
/// classifier that sees a cube of the resampled volume around each candidate, normalised like
/// the detector's input; its probability and the detector's score make the final score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RescoreSpec {
    pub model_file: String,
    /// SHA-256 of `model_file`, hex; the file must match.
    pub sha256: String,
    /// Input tensor name: `[n, 1, p, p, p]` (NCDHW), `p` = `patch_voxels`.
    pub input: String,
    /// Output tensor name: `[n, 1]`, a probability.
    pub output: String,
    /// Edge of the cube, in voxels of the model's grid, centred on the candidate's voxel.
    pub patch_voxels: usize,
    /// How many of the detector's best candidates are rescored; the others are dropped.
    pub candidates: usize,
    /// The detector's score a candidate needs.
    pub candidate_threshold: f32,
    pub combine: Combine,
    /// Default threshold on the final score (the card's top-level one is the detector's).
    pub default_score_threshold: f32,
    /// A candidate whose box is wider than this (mean side, model voxels) is seen through a
    /// cube `mean side / this` times `patch_voxels` wide, resampled to `patch_voxels`: a large
    /// lesion is shown at the size the classifier was trained on. Absent: never scaled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_above_voxels: Option<f64>,
    #[serde(default)]
    pub meaning: String,
    #[serde(default)]
    pub training: serde_json::Value,
}

impl RescoreSpec {
    /// How much wider than `patch_voxels` the cube around a candidate of `size` (voxels) is.
    pub fn patch_scale(&self, size: [f64; 3]) -> f64 {
        let side = size.iter().sum::<f64>() / 3.0;
        self.scale_above_voxels
            .map_or(1.0, |above| (side / above).max(1.0))
    }
}

/// `model.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelCard {
    pub name: String,
    pub version: String,
    #[serde(default)]
    pub purpose: String,
    pub model_file: String,
    /// SHA-256 of `model_file`, hex; the file must match.
    pub sha256: String,
    /// Other precisions of the same network (`fp16`), each checked like the main file.
    #[serde(default)]
    pub variants: std::collections::BTreeMap<String, Variant>,
    pub output_family: OutputFamily,
    pub input: InputSpec,
    /// Spacing the model was trained at; input is resampled to it. `None`: native spacing.
    pub target_spacing_mm: Option<[f64; 3]>,
    /// Total stride of the outputs relative to the input, in voxels: windows start on it and
    /// the volume is padded to it (for a RetinaNet, the coarsest level's and `size_divisible`).
    pub stride: Stride,
    /// Receptive field of one output cell, in input voxels (all axes).
    pub receptive_field_voxels: usize,
    /// Why one window's outputs depend on all of the window (normalisation over it): halo mode
    /// cannot be exact and is refused; the blending modes need no core.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_dependent: Option<String>,
    /// The heads of a CenterNet or segmentation model.
    #[serde(default)]
    pub outputs: Option<Outputs>,
    /// The levels and decoding of a RetinaNet model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retinanet: Option<RetinaSpec>,
    /// The tiling a run uses unless told otherwise; absent: exact halo tiling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tiling: Option<Tiling>,
    pub recommended_patch: [usize; 3],
    /// Default threshold on the detector's own scores.
    pub default_score_threshold: f32,
    /// The rescoring stage, when the model has one.
    #[serde(default)]
    pub rescore: Option<RescoreSpec>,
    /// A second pass for lesions wider than the receptive field, when the model has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coarse_pass: Option<CoarsePass>,
    /// A chest-CT model: findings whose centre is outside the lung field ([`crate::lung`])
    /// are dropped (or flagged, when the run keeps them).
    #[serde(default)]
    pub lung_field: bool,
    /// The display window its findings are read in (a chest model's: lung), where a viewer
    /// opens a study for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_window: Option<DisplayWindow>,
    /// Measured memory per device kind (`cpu`, `cuda`), if calibrated.
    #[serde(default)]
    pub memory: std::collections::BTreeMap<String, MemoryCoefficients>,
    #[serde(default)]
    pub training: serde_json::Value,
    #[serde(default)]
    pub metrics: serde_json::Value,
}

/// A display window in HU, named.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DisplayWindow {
    pub name: String,
    pub center_hu: f32,
    pub width_hu: f32,
}

impl ModelCard {
    /// The card in `dir` (its `model.json`), parsed but neither checked nor its files hashed:
    /// enough to tell models apart by name or hash before loading one.
    pub fn read(dir: &Path) -> Result<Self, ModelError> {
        let card_path = dir.join("model.json");
        if !card_path.exists() {
            return Err(ModelError::NoCard {
                dir: dir.to_path_buf(),
            });
        }
        let text =
            tessera_dicom::io::read_regular_file(&card_path).map_err(|source| ModelError::Io {
                path: card_path.clone(),
                source,
            })?;
        serde_json::from_slice(&text).map_err(|e| ModelError::BadCard {
            path: card_path,
            reason: e.to_string(),
        })
    }

    /// The heads the pipeline reads, in the order of the window outputs and the stitched maps:
    /// the heatmap (1 channel), then for CenterNet the size and offset heads (3 each); for a
    /// RetinaNet every level's classification, then every level's box regression. The engine
    /// checks them against the ONNX graph when it loads ([`Model::load`] checks that the
    /// family's section is there).
    pub fn heads(&self) -> Vec<Head<'_>> {
        let stride = self.stride.per_axis();
        fn head(spec: &OutputSpec, channels: usize, stride: [usize; 3]) -> Head<'_> {
            Head {
                name: &spec.name,
                channels,
                stride,
            }
        }
        match (self.output_family, &self.outputs, &self.retinanet) {
            (OutputFamily::Segmentation, Some(outputs), _) => {
                vec![head(&outputs.heatmap, 1, stride)]
            }
            (OutputFamily::Centernet, Some(outputs), _) => {
                std::iter::once(head(&outputs.heatmap, 1, stride))
                    .chain(
                        [&outputs.size, &outputs.offset]
                            .into_iter()
                            .flatten()
                            .map(|spec| head(spec, 3, stride)),
                    )
                    .collect()
            }
            (OutputFamily::Retinanet, _, Some(retina)) => {
                let anchors = |l: &RetinaLevel| l.anchors.len();
                let classes = retina.levels.iter().map(|l| Head {
                    name: &l.classification,
                    channels: anchors(l) * retina.num_classes,
                    stride: l.stride,
                });
                let boxes = retina.levels.iter().map(|l| Head {
                    name: &l.box_regression,
                    channels: anchors(l) * 6,
                    stride: l.stride,
                });
                classes.chain(boxes).collect()
            }
            _ => Vec::new(),
        }
    }

    /// Receptive-field radius in input voxels: how far one output cell sees.
    pub fn receptive_radius(&self) -> usize {
        self.receptive_field_voxels / 2
    }

    /// What the model imposes on windows.
    pub fn grid(&self) -> crate::plan::ModelGrid {
        crate::plan::ModelGrid {
            stride: self.stride.per_axis(),
            receptive_radius: self.receptive_radius(),
            window_dependent: self.window_dependent.is_some(),
        }
    }
}

/// A checked model: its card, where its ONNX file is, and that file's hash.
#[derive(Debug, Clone)]
pub struct Model {
    pub dir: PathBuf,
    pub card: ModelCard,
    pub onnx_path: PathBuf,
    pub sha256: String,
    /// The rescoring stage's file and hash, checked like the detector's.
    pub rescore_file: Option<(PathBuf, String)>,
}

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("model {model} has no {precision} variant in its card")]
    NoVariant { model: String, precision: Precision },
    #[error("model folder {} has no model.json card: Tessera runs only models with a card", dir.display())]
    NoCard { dir: PathBuf },
    #[error("cannot read {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("model card {} is not valid: {reason}", path.display())]
    BadCard { path: PathBuf, reason: String },
    #[error("{} does not match its card: sha256 is {actual}, the card says {expected}", path.display())]
    HashMismatch {
        path: PathBuf,
        expected: String,
        actual: String,
    },
    #[error(
        "no trained detector is shipped yet in {}: pass --model {}/tessera-test-tiny to run the engine's test model (random weights, finds nothing meaningful)",
        dir.display(),
        dir.display()
    )]
    NoDetector { dir: PathBuf },
}

impl Model {
    /// Loads and checks the model in `dir` (a folder with `model.json`).
    pub fn load(dir: &Path) -> Result<Self, ModelError> {
        let card = ModelCard::read(dir)?;
        let card_path = dir.join("model.json");
        let bad = |reason: String| ModelError::BadCard {
            path: card_path.clone(),
            reason,
        };
        if card.stride.per_axis().contains(&0) || card.receptive_field_voxels == 0 {
            return Err(bad(
                "stride and receptive_field_voxels must be positive".into()
            ));
        }
        if let Some(spacing) = card.target_spacing_mm
            && !spacing.iter().all(|s| s.is_finite() && *s > 0.0)
        {
            return Err(bad(format!(
                "target_spacing_mm {spacing:?} must be three positive, finite numbers"
            )));
        }
        if card.recommended_patch.contains(&0) {
            return Err(bad(format!(
                "recommended_patch {:?} must be positive on every axis",
                card.recommended_patch
            )));
        }
        let thresholds = std::iter::once(card.default_score_threshold)
            .chain(card.rescore.as_ref().map(|r| r.default_score_threshold));
        for t in thresholds {
            if !(0.0..=1.0).contains(&t) {
                return Err(bad(format!(
                    "score threshold {t} must be a number from 0 to 1"
                )));
            }
        }
        if card.input.layout != "NCDHW" {
            return Err(bad(format!(
                "input layout {} is not supported (NCDHW only)",
                card.input.layout
            )));
        }
        let [lo, hi] = card.input.hu_window;
        if lo.partial_cmp(&hi) != Some(std::cmp::Ordering::Less) {
            return Err(bad(format!("hu_window [{lo}, {hi}] is empty")));
        }
        check_family(&card).map_err(bad)?;
        let onnx_path = dir.join(&card.model_file);
        let sha256 = checked_hash(&onnx_path, &card.sha256)?;
        for variant in card.variants.values() {
            checked_hash(&dir.join(&variant.model_file), &variant.sha256)?;
        }
        let rescore_file = match &card.rescore {
            Some(r) if r.patch_voxels == 0 || r.candidates == 0 => {
                return Err(bad(
                    "rescore.patch_voxels and rescore.candidates must be positive".into(),
                ));
            }
            Some(r)
                if r.scale_above_voxels
                    .is_some_and(|v| !(v.is_finite() && v > 0.0)) =>
            {
                return Err(bad(
                    "rescore.scale_above_voxels must be a positive number of voxels".into(),
                ));
            }
            Some(r) => {
                let path = dir.join(&r.model_file);
                let hash = checked_hash(&path, &r.sha256)?;
                Some((path, hash))
            }
            None => None,
        };
        Ok(Self {
            dir: dir.to_path_buf(),
            card,
            onnx_path,
            sha256,
            rescore_file,
        })
    }
}

/// What the card's output family needs from it.
fn check_family(card: &ModelCard) -> Result<(), String> {
    match (card.output_family, &card.outputs, &card.retinanet) {
        (OutputFamily::Centernet, Some(o), _) if o.size.is_none() || o.offset.is_none() => {
            Err("a centernet model needs size and offset outputs".into())
        }
        (OutputFamily::Centernet | OutputFamily::Segmentation, None, _) => {
            Err("a centernet or segmentation model needs its outputs".into())
        }
        (OutputFamily::Retinanet, _, None) => {
            Err("a retinanet model needs its retinanet section".into())
        }
        (OutputFamily::Retinanet, _, Some(retina)) => crate::retina::check(retina, card),
        _ => Ok(()),
    }
}

/// The file for `precision`, and its hash.
impl Model {
    pub fn file_for(&self, precision: Precision) -> Result<(PathBuf, String), ModelError> {
        match precision {
            Precision::Fp32 => Ok((self.onnx_path.clone(), self.sha256.clone())),
            Precision::Fp16 => self
                .card
                .variants
                .get("fp16")
                .map(|v| (self.dir.join(&v.model_file), v.sha256.to_ascii_lowercase()))
                .ok_or(ModelError::NoVariant {
                    model: self.card.name.clone(),
                    precision,
                }),
        }
    }
}

/// The file's SHA-256, refused when it is not the card's.
fn checked_hash(path: &Path, expected: &str) -> Result<String, ModelError> {
    let bytes = tessera_dicom::io::read_regular_file(path).map_err(|source| ModelError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let actual = hex(&Sha256::digest(&bytes));
    if expected.eq_ignore_ascii_case(&actual) {
        Ok(actual)
    } else {
        Err(ModelError::HashMismatch {
            path: path.to_path_buf(),
            expected: expected.to_string(),
            actual,
        })
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The folder of the shipped models (`assets/models`), found next to the executable or in the
/// source tree this binary was built from.
pub fn shipped_models_dir() -> PathBuf {
    let candidates = tessera_dicom::places::candidates("models", "models", "assets/models");
    candidates
        .iter()
        .find(|dir| dir.is_dir())
        .or(candidates.last())
        .cloned()
        .unwrap_or_else(|| PathBuf::from("assets/models"))
}

/// The model folders (with a `model.json`) in [`shipped_models_dir`], sorted by name.
pub fn shipped_model_dirs() -> std::io::Result<Vec<PathBuf>> {
    let root = shipped_models_dir();
    let root = root.canonicalize().unwrap_or(root);
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join("model.json").is_file())
        .collect();
    dirs.sort();
    Ok(dirs)
}

/// The shipped detector's folder: the first shipped model that is not a test model (what
/// `tessera detect`, the sweep, the benches and the viewer run without `--model`).
pub fn default_detector() -> Result<PathBuf, ModelError> {
    let root = shipped_models_dir();
    shipped_model_dirs()
        .map_err(|source| ModelError::Io {
            path: root.clone(),
            source,
        })?
        .into_iter()
        .find(|p| !is_test_model(p))
        .ok_or(ModelError::NoDetector { dir: root })
}

/// The engine's test models are named `*test*`; the shipped detector is the first other one.
pub fn is_test_model(dir: &Path) -> bool {
    dir.file_name()
        .is_some_and(|n| n.to_string_lossy().contains("test"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn test_model_dir() -> PathBuf {
        shipped_models_dir().join("tessera-test-tiny")
    }

    #[test]
    fn shipped_test_model_loads_and_matches_its_hash() {
        let model = Model::load(&test_model_dir()).unwrap(); // ok: test code
        assert_eq!(model.card.stride, Stride::Same(2));
        assert_eq!(model.card.receptive_radius(), 4);
        assert_eq!(model.sha256.len(), 64);
    }

    #[test]
    fn a_changed_model_file_is_refused() {
        let dir = tempfile::tempdir().unwrap(); // ok: test code
        for f in ["model.json", "model.onnx", "model_fp16.onnx"] {
            std::fs::copy(test_model_dir().join(f), dir.path().join(f)).unwrap(); // ok: test code
        }
        let mut bytes = std::fs::read(dir.path().join("model.onnx")).unwrap(); // ok: test code
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(dir.path().join("model.onnx"), bytes).unwrap(); // ok: test code
        let err = Model::load(dir.path()).unwrap_err();
        assert!(matches!(err, ModelError::HashMismatch { .. }), "{err}");
        assert!(err.to_string().contains("does not match its card"));
    }

    #[test]
    fn a_model_without_card_is_refused() {
        let dir = tempfile::tempdir().unwrap(); // ok: test code
        std::fs::copy(
            test_model_dir().join("model.onnx"),
            dir.path().join("model.onnx"),
        )
        .unwrap(); // ok: test code
        let err = Model::load(dir.path()).unwrap_err();
        assert!(err.to_string().contains("has no model.json card"), "{err}");
    }
}
