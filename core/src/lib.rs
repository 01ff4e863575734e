//! Tessera's core: memory-bounded, tiled 3D detection on CT volumes.
//!
//! The layers, each a crate that Cargo keeps from importing upwards (see `ARCHITECTURE.md`):
//! `tessera-dicom` (files to volumes) -> `tessera-plan` (model card, request, window plan,
//! memory model; no runtime) -> `tessera-maps` (stitching, decoding, lung field; no runtime)
//! -> `tessera-infer` (ONNX Runtime) -> this crate: the [`pipeline`] that drives them, the
//! [`rescore`] stage, the findings' [`measure`]ments and [`lungrads`] suggestion, [`report`]
//! files, [`review`], [`sr`], [`parity`], [`evaluate`] and the [`phantom`].
//! Nothing is re-exported: each item is imported from the crate that owns it. No GUI
//! dependency lives here.

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
