//! From files to a volume: scan a folder, group and sort a DICOM CT series, decode it into
//! voxels with their patient geometry, or read one NIfTI or MetaImage volume; plus the small file helpers every layer uses (atomic
//! writes, regular-file reads), `.npy` output, LIDC-IDRI reader annotations and slice images.
//! Nothing here knows about models or runs.

pub mod dicom;
pub mod geometry;
pub mod image_file;
pub mod io;
pub mod lidc;
pub mod npy;
pub mod places;
pub mod study;
pub mod view;
pub mod volume;

pub use volume::{Geometry, SeriesInfo, Volume, Voxels};
