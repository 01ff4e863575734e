//! A deterministic synthetic chest CT with known nodules: the demo study, test fixtures and
//! training data.
//!
//! The same [`PhantomSpec`] (seed included) always gives the same voxels, the same DICOM bytes
//! and the same `truth.json`. Anatomy is analytic ([`anatomy`]), vessels, airways and nodules
//! are painted over it ([`structures`]), then the volume is blurred and given CT-like noise.
//!
//! ```
//! use tessera_core::phantom::{PhantomSpec, generate};
//!
//! let spec = PhantomSpec { size: [96, 96, 48], spacing_mm: [2.0, 2.0, 4.0], nodules: 2, ..PhantomSpec::default() };
//! let phantom = generate(&spec)?;
//! assert_eq!(phantom.volume.geometry.size, [96, 96, 48]);
//! assert_eq!(phantom.truth.nodules.len(), 2);
//! # Ok::<(), tessera_core::phantom::PhantomError>(())
//! ```

pub mod anatomy;
mod render;
pub mod rng;
pub mod structures;
mod truth;
mod write;

use serde::{Deserialize, Serialize};

pub use render::{add_noise_and_quantise, blur};
pub use truth::{NoduleTruth, Truth};
pub use write::{TRUTH_FILE, write_series};

use anatomy::Chest;
use rng::Rng;
use structures::Lesions;
use tessera_dicom::dicom::write::CT_IMAGE_STORAGE;
use tessera_dicom::volume::{Geometry, SeriesInfo, SourceInstance, StudyIdentity, Volume, Voxels};

/// What to generate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhantomSpec {
    pub seed: u64,
    /// Voxels `[x, y, z]`.
    pub size: [usize; 3],
    /// `[x, y, z]` mm; z is both slice spacing and slice thickness.
    pub spacing_mm: [f64; 3],
    pub nodules: usize,
    /// Standard deviation of the added noise, HU.
    pub noise_hu: f32,
    /// Masses of 20-50 mm placed after the nodules (from their own random stream, so a spec
    /// without masses gives the same bytes as before they existed).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub masses: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Default for PhantomSpec {
    fn default() -> Self {
        Self {
            seed: 1,
            size: [512, 512, 300],
            spacing_mm: [0.7, 0.7, 1.25],
            nodules: 6,
            noise_hu: 18.0,
            masses: 0,
        }
    }
}

/// A generated study.
#[derive(Debug, Clone)]
pub struct Phantom {
    pub spec: PhantomSpec,
    pub volume: Volume,
    pub truth: Truth,
}

#[derive(Debug, thiserror::Error)]
pub enum PhantomError {
    #[error("phantom size {0} is too small: each axis needs at least 8 voxels")]
    TooSmall(String),
    #[error("phantom spacing {0:?} mm must be positive and finite")]
    BadSpacing([f64; 3]),
    #[error(
        "phantom size {0} is too large: at most {max_side} voxels per axis (a DICOM image's limit) and {max_voxels} in all",
        max_side = u16::MAX,
        max_voxels = tessera_dicom::volume::MAX_VOXELS
    )]
    TooLarge(String),
    #[error(
        "could place only {placed} of {asked} {what} apart from each other in a {fov_mm:.0} mm field of view; ask for fewer {what} or a larger field of view"
    )]
    NoRoom {
        placed: usize,
        asked: usize,
        what: &'static str,
        fov_mm: f64,
    },
    #[error(transparent)]
    Write(#[from] tessera_dicom::dicom::write::WriteError),
    #[error("cannot write {}", path.display())]
    Io {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Generates the phantom described by `spec`.
pub fn generate(spec: &PhantomSpec) -> Result<Phantom, PhantomError> {
    if spec.size.iter().any(|n| *n < 8) {
        return Err(PhantomError::TooSmall(tessera_dicom::volume::format_size(
            spec.size,
        )));
    }
    let voxels = spec
        .size
        .iter()
        .try_fold(1usize, |n, side| n.checked_mul(*side));
    if spec.size.iter().any(|n| *n > usize::from(u16::MAX))
        || voxels.is_none_or(|v| v > tessera_dicom::volume::MAX_VOXELS)
    {
        return Err(PhantomError::TooLarge(tessera_dicom::volume::format_size(
            spec.size,
        )));
    }
    if spec.spacing_mm.iter().any(|s| !s.is_finite() || *s <= 0.0) {
        return Err(PhantomError::BadSpacing(spec.spacing_mm));
    }
    let [nx, ny, nz] = spec.size;
    let [sx, sy, sz] = spec.spacing_mm;
    let chest = chest(spec);
    let mut rng = Rng::new(spec.seed);
    let (vessels, airways) = structures::vessels_and_airways(&chest, &mut rng.fork(1));
    let mut nodules = Vec::with_capacity(spec.nodules + spec.masses);
    for (lesions, count, salt) in [
        (Lesions::Nodules, spec.nodules, 2),
        (Lesions::Masses, spec.masses, 3),
    ] {
        if count == 0 {
            continue;
        }
        let before = nodules.len();
        structures::place_nodules(
            &chest,
            &mut rng.fork(salt),
            &vessels,
            count,
            lesions,
            &mut nodules,
        );
        if nodules.len() - before < count {
            return Err(PhantomError::NoRoom {
                placed: nodules.len() - before,
                asked: count,
                what: lesions.name(),
                fov_mm: 2.0 * chest.half_fov_mm[0],
            });
        }
    }
    let tubes: Vec<_> = vessels.into_iter().chain(airways).collect();
    let scene = render::Scene {
        chest,
        size: spec.size,
        spacing_mm: spec.spacing_mm,
        tubes: &tubes,
        nodules: &nodules,
    };
    let mut hu = render::paint(&scene);
    blur(&mut hu);
    let voxels = add_noise_and_quantise(&hu, spec.noise_hu, rng::mix(spec.seed ^ 0x006E_015E));

    // Centred on the scanner isocentre in x/y; z runs upwards from below the lungs.
    let origin = [
        -(nx as f64 - 1.0) * sx / 2.0,
        -(ny as f64 - 1.0) * sy / 2.0,
        -(nz as f64 - 1.0) * sz / 2.0,
    ];
    let geometry = Geometry::axis_aligned(spec.size, spec.spacing_mm, origin);
    let truth = Truth::new(spec, &geometry, &nodules);
    let volume = Volume {
        voxels: Voxels::I16(voxels),
        geometry,
        info: series_info(spec),
        warnings: Vec::new(),
        filled_slices: Vec::new(),
        instances: instances(spec),
    };
    Ok(Phantom {
        spec: spec.clone(),
        volume,
        truth,
    })
}

/// The analytic chest fitted to `spec`'s field of view.
pub fn chest(spec: &PhantomSpec) -> Chest {
    let [nx, ny, nz] = spec.size;
    let [sx, sy, sz] = spec.spacing_mm;
    Chest {
        half_fov_mm: [nx as f64 * sx / 2.0, ny as f64 * sy / 2.0],
        extent_z_mm: (nz as f64 - 1.0) * sz,
    }
}

/// The lung (if any) at an LPS position of the phantom made from `spec`.
pub fn lung_at(spec: &PhantomSpec, geometry: &Geometry, lps_mm: [f64; 3]) -> Option<anatomy::Side> {
    // Phantom millimetres: x and y from the centre, z from the first slice.
    let z0 = geometry.origin_lps_mm()[2];
    let n = chest(spec).normalised([lps_mm[0], lps_mm[1], lps_mm[2] - z0]);
    chest(spec).lung(n[0], n[1], n[2])
}

/// Patient, study and series fields, all derived from the seed.
pub fn series_info(spec: &PhantomSpec) -> SeriesInfo {
    SeriesInfo {
        series_uid: rng::uid(spec.seed, 2),
        study_uid: rng::uid(spec.seed, 1),
        modality: "CT".into(),
        series_description: format!("Tessera chest phantom, seed {}", spec.seed),
        series_number: Some(1),
        patient_name: format!("PHANTOM^SEED{}", spec.seed),
        patient_id: format!("PHANTOM-{}", spec.seed),
        study_date: "20260101".into(),
        study_description: "Synthetic chest CT (Tessera phantom)".into(),
        manufacturer: "Tessera phantom".into(),
        window_hu: Some((-600.0, 1500.0)),
        slice_thickness_mm: Some(spec.spacing_mm[2]),
        frame_of_reference_uid: rng::uid(spec.seed, 3),
        identity: StudyIdentity {
            patient_name: format!("PHANTOM^SEED{}", spec.seed),
            patient_id: format!("PHANTOM-{}", spec.seed),
            study_date: "20260101".into(),
            study_time: "120000".into(),
            study_id: "1".into(),
            ..StudyIdentity::default()
        },
    }
}

/// One CT image per slice, with the UIDs [`write::write_series`] gives the files.
pub fn instances(spec: &PhantomSpec) -> Vec<SourceInstance> {
    (0..spec.size[2])
        .map(|z| SourceInstance {
            sop_class_uid: CT_IMAGE_STORAGE.into(),
            sop_instance_uid: rng::uid(spec.seed, 1000 + z as u64),
        })
        .collect()
}
