//! A detector model on disk: `model.onnx` plus its card, `model.json`.
//!
//! The card says everything the engine needs and must not guess: input normalisation, target
//! spacing, output names, stride and receptive field (the halo and the window alignment come
//! from them), the default threshold. A model without a card, or whose file does not match the
//! card's hash, is refused before anything runs.

mod card;
mod check;

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

pub use card::{
    CoarsePass, Combine, DisplayWindow, Head, InputSpec, MemoryCoefficients, ModelCard,
    OutputFamily, OutputSpec, Outputs, Precision, RescoreSpec, RetinaLevel, RetinaSpec, Stride,
    Tiling, Variant,
};
use check::check_family;

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

    #[test]
    fn lung_nodule_models_suggest_lung_rads_with_or_without_a_lung_field() {
        let card = |name: &str| ModelCard::read(&shipped_models_dir().join(name)).unwrap(); // ok: test code
        let nodule = card("tessera-nodule");
        assert!(nodule.lung_field && nodule.lung_rads.is_none() && nodule.suggests_lung_rads());
        let bundle = card("tessera-test-retinanet");
        assert!(!bundle.lung_field && bundle.suggests_lung_rads());
        assert!(!card("tessera-test-tiny").suggests_lung_rads());
    }
}
