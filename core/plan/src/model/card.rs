//! The model card (`model.json`): what a model's folder says of it, read and parsed.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::ModelError;

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
    pub blend: crate::blend::BlendMode,
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
    /// A chest-CT model: findings whose centre is outside the lung field (`tessera_maps::lung`)
    /// are dropped (or flagged, when the run keeps them).
    #[serde(default)]
    pub lung_field: bool,
    /// Its findings are lung nodules, so each gets a Lung-RADS category suggested; absent: a
    /// model with a lung field's are ([`Self::suggests_lung_rads`]). A MONAI lung nodule
    /// bundle has no lung field but says so here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lung_rads: Option<bool>,
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

    /// The head whose values are the findings' scores: the heatmap or probability map, or a
    /// RetinaNet's finest classification level (what a precision check compares).
    pub fn score_head(&self) -> Option<Head<'_>> {
        self.heads().into_iter().next()
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

    /// Whether its findings get a Lung-RADS category suggested: its `lung_rads`, else
    /// whether it has a lung field.
    pub fn suggests_lung_rads(&self) -> bool {
        self.lung_rads.unwrap_or(self.lung_field)
    }

    /// What the model imposes on windows.
    pub fn grid(&self) -> crate::model_grid::ModelGrid {
        crate::model_grid::ModelGrid {
            stride: self.stride.per_axis(),
            receptive_radius: self.receptive_radius(),
            window_dependent: self.window_dependent.is_some(),
        }
    }
}
