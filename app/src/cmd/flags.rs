//! Flag parsers shared by the subcommands. Closed sets go through clap's possible values, so
//! `--help` lists each value with a line on what it does and a typo gets the list back.

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use tessera_plan::blend::BlendMode;
use tessera_plan::device::CpuAllocator;
use tessera_plan::model::Precision;

/// `--ort-lib`, on the commands that load ONNX Runtime (the viewer, detect, sweep, runtime).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct OrtLib {
    /// ONNX Runtime library to load (default: ORT_DYLIB_PATH, then the one installed beside
    /// the executable, in the user's data folder, or in the checkout's .runtime/).
    #[arg(long = "ort-lib", value_name = "FILE")]
    pub library: Option<std::path::PathBuf>,
}

/// How `--memory-budget` reads a size, said once for every command that takes one.
pub const SIZE_UNITS: &str = "K, M, G, T and KiB, MiB, GiB, TiB are powers of 1024 (512M = 512 MiB); KB, MB, GB, TB are powers of 1000 (2GB = 2e9 bytes); no unit: bytes";

/// `--blend`: how overlapping windows combine.
pub fn blend() -> impl TypedValueParser<Value = BlendMode> {
    PossibleValuesParser::new([
        PossibleValue::new("halo").help(
            "exact: windows overlap by the receptive field and each writes only its core, so the output equals one whole-volume pass",
        ),
        PossibleValue::new("gaussian")
            .help("average overlapping outputs with a Gaussian weight (MONAI's default); uses --overlap"),
        PossibleValue::new("constant")
            .help("average overlapping outputs with equal weights; uses --overlap"),
    ])
    .try_map(|s| s.parse::<BlendMode>())
}

/// `--allocator`: ONNX Runtime's host memory strategy.
pub fn allocator() -> impl TypedValueParser<Value = CpuAllocator> {
    PossibleValuesParser::new([
        PossibleValue::new("none").help(
            "no arena, no memory pattern: the lowest peak, about the same for every window of a size",
        ),
        PossibleValue::new("tight-arena").help(
            "an arena that grows by what is asked: faster, but later windows need more than the first",
        ),
        PossibleValue::new("arena").help("ONNX Runtime's default arena (power-of-two growth)"),
    ])
    .try_map(|s| s.parse::<CpuAllocator>())
}

/// `--precision`.
pub fn precision() -> impl TypedValueParser<Value = Precision> {
    PossibleValuesParser::new([
        PossibleValue::new("fp32").help("full precision"),
        PossibleValue::new("fp16").help(
            "half precision, when the card ships an fp16 variant; the drift from fp32 is measured on the first window",
        ),
    ])
    .try_map(|s| s.parse::<Precision>())
}

/// `--overlap`: a fraction in [0, 1), refused at parse time otherwise.
pub fn overlap(text: &str) -> Result<f64, String> {
    let value: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("'{text}' is not a number"))?;
    if (0.0..1.0).contains(&value) {
        Ok(value)
    } else {
        Err(format!("overlap {text} must be at least 0 and below 1"))
    }
}

/// `--score-threshold`: a probability, finite, from 0 to 1.
pub fn score(text: &str) -> Result<f32, String> {
    let value: f32 = text
        .trim()
        .parse()
        .map_err(|_| format!("'{text}' is not a number"))?;
    if (0.0..=1.0).contains(&value) {
        Ok(value)
    } else {
        Err(format!("score {text} must be a number from 0 to 1"))
    }
}

/// A finite number, 0 or more (tolerances).
pub fn non_negative(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("'{text}' is not a finite number of 0 or more")),
    }
}

/// `--threads`: 1 to 1024.
pub fn threads(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(n) if (1..=1024).contains(&n) => Ok(n),
        _ => Err(format!("'{text}' is not a thread count from 1 to 1024")),
    }
}

/// A spacing in mm for resampling: one value (isotropic) or `x,y,z`, each within the range a
/// CT voxel can have.
pub fn spacing_mm(text: &str) -> Result<[f64; 3], String> {
    use tessera_dicom::dicom::{MAX_SPACING_MM, MIN_SPACING_MM};
    let values: Vec<f64> = text
        .split(',')
        .map(|p| p.trim().parse::<f64>())
        .collect::<Result<_, _>>()
        .map_err(|_| format!("'{text}' is not a spacing like 1.25 or 0.7,0.7,1.25 (mm)"))?;
    let spacing = match values.as_slice() {
        [s] => [*s; 3],
        [x, y, z] => [*x, *y, *z],
        _ => return Err(format!("'{text}' needs one value or three (x,y,z)")),
    };
    if spacing
        .iter()
        .all(|s| (MIN_SPACING_MM..=MAX_SPACING_MM).contains(s))
    {
        Ok(spacing)
    } else {
        Err(format!(
            "spacing {text} mm must be from {MIN_SPACING_MM} to {MAX_SPACING_MM} mm on each axis"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_outside_their_range_are_refused_at_parse_time() {
        for bad in ["NaN", "inf", "-0.1", "1.5", "x"] {
            assert!(score(bad).is_err(), "{bad}");
        }
        assert_eq!(score("0.5"), Ok(0.5));
        for bad in ["NaN", "-inf", "1", "-0.2"] {
            assert!(overlap(bad).is_err(), "{bad}");
        }
        for bad in ["1e-9", "NaN", "inf", "0", "-1", "1,1", "200"] {
            assert!(spacing_mm(bad).is_err(), "{bad}");
        }
        assert_eq!(spacing_mm("1.25"), Ok([1.25; 3]));
        assert_eq!(spacing_mm("0.7,0.7,2"), Ok([0.7, 0.7, 2.0]));
        assert!(threads("0").is_err());
        assert_eq!(threads("2"), Ok(2));
    }
}
