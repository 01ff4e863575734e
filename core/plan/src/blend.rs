//! How overlapping window outputs are combined: what a card defaults to, a plan places its
//! windows by, the stitcher weighs by and the memory forecast counts weight maps for.

use serde::{Deserialize, Serialize};

/// How overlapping window outputs are combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BlendMode {
    /// Average with equal weights.
    Constant,
    /// Average with a Gaussian weight, sigma 0.125 of the window (as MONAI).
    Gaussian,
    /// Each window writes only its core; cores partition the volume. Exact.
    Halo,
}

impl std::str::FromStr for BlendMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "constant" => Ok(Self::Constant),
            "gaussian" => Ok(Self::Gaussian),
            "halo" => Ok(Self::Halo),
            other => Err(format!(
                "blend mode '{other}' is not one of halo, gaussian, constant"
            )),
        }
    }
}

impl std::fmt::Display for BlendMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Constant => "constant",
            Self::Gaussian => "gaussian",
            Self::Halo => "halo",
        })
    }
}
