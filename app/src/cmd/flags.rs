//! Flag parsers shared by the subcommands. Closed sets go through clap's possible values, so
//! `--help` lists each value with a line on what it does and a typo gets the list back.

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use tessera_core::infer::arena::CpuAllocator;
use tessera_core::model::Precision;
use tessera_core::plan::BlendMode;

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
        PossibleValue::new("none").help("no arena: the lowest and most predictable peak"),
        PossibleValue::new("tight-arena").help("an arena that grows by what is asked"),
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
