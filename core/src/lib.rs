//! Tessera's core: memory-bounded, tiled 3D detection on CT volumes.
//!
//! Data flows one way, one module per step: [`dicom`] (scan, group, sort, decode) ->
//! [`volume`] (voxels + geometry) -> plan -> [`infer`] -> stitch -> [`lung`] field -> detect ->
//! report.
//! [`phantom`] makes synthetic chest CTs with known nodules for the demo, tests and training.
//! No GUI dependency lives here.

pub mod detect;
pub mod dicom;
pub mod evaluate;
pub mod geometry;
pub mod infer;
pub mod io;
pub mod lidc;
pub mod lung;
pub mod model;
pub mod npy;
pub mod parity;
pub mod phantom;
pub mod pipeline;
pub mod plan;
pub mod report;
pub mod resample;
pub mod rescore;
pub mod stitch;
pub mod view;
pub mod volume;

pub use volume::{Geometry, SeriesInfo, Volume, Voxels};
