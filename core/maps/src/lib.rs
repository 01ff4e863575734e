//! What a run's windows produce, turned into findings without a runtime: window outputs
//! stitched into full-volume maps on each head's grid ([`stitch`]), decoded into candidate
//! boxes ([`decode`] for Tessera's CenterNet family, [`retina`] for MONAI's RetinaNet), the
//! lung field ([`lung`]) and a large finding's extent measured on the image ([`extent`], from
//! the masks of [`mask`]). The window plan these follow is `tessera-plan`'s.

pub mod decode;
pub mod extent;
pub mod lung;
pub mod mask;
pub mod retina;
pub mod stitch;
