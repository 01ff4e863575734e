//! Tessera's core: memory-bounded, tiled 3D detection on CT volumes.
//!
//! The layers, each a crate that Cargo keeps from importing upwards (see `ARCHITECTURE.md`):
//! `tessera-dicom` (files to [`volume`]) -> `tessera-plan` ([`model`] card, [`plan`],
//! [`stitch`], [`resample`], [`orient`], [`detect`], [`retina`], [`lung`], [`extent`]; no
//! runtime) ->
//! `tessera-infer` ([`infer`], ONNX Runtime) -> this crate: the [`pipeline`] that drives them,
//! the [`rescore`] stage, [`report`] files, [`parity`], [`evaluate`] and the [`phantom`].
//! The lower crates' modules are re-exported here under their own names, so that the app and
//! the tests see one library. No GUI dependency lives here.

pub mod cases;
pub mod evaluate;
pub mod lungrads;
pub mod measure;
pub mod parity;
pub mod phantom;
pub mod pipeline;
pub mod report;
pub mod rescore;
pub mod review;
pub mod sr;

pub use tessera_dicom::{Geometry, SeriesInfo, Volume, Voxels};
pub use tessera_dicom::{dicom, geometry, image_file, io, lidc, npy, places, study, view, volume};
pub use tessera_infer as infer;
pub use tessera_pacs as pacs;
pub use tessera_plan::{
    detect, device, extent, grid_map, lung, memory, model, orient, plan, request, resample, retina,
    stitch,
};
