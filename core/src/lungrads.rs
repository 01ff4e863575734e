//! A Lung-RADS category suggested for a finding and for a study, from ACR Lung-RADS v2022's
//! baseline size and type rules. A suggestion with the rule that gave it, for a reader to
//! accept or change: what the rules also need and Tessera does not know (prior studies and
//! growth, calcification and fat, perifissural or juxtapleural shape, airway nodules,
//! suspicious features for 4X, findings outside the lungs) is the reader's.
//!
//! Sizes are mean diameters (long and short axis) rounded to 0.1 mm; a boundary belongs to
//! the higher category (6.0 mm is "6 mm or more").

use serde::{Deserialize, Serialize};

use crate::measure::{AxialAxes, Measurements, NoduleType};

/// The rules' version, written beside every suggestion.
pub const VERSION: &str = "ACR Lung-RADS v2022, baseline";

/// Categories a baseline size and type rule can give (0 and 4X need what Tessera does not
/// know).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Category {
    #[serde(rename = "1")]
    One,
    #[serde(rename = "2")]
    Two,
    #[serde(rename = "3")]
    Three,
    #[serde(rename = "4A")]
    FourA,
    #[serde(rename = "4B")]
    FourB,
}

impl Category {
    pub const ALL: [Self; 5] = [Self::One, Self::Two, Self::Three, Self::FourA, Self::FourB];

    pub fn label(self) -> &'static str {
        match self {
            Self::One => "1",
            Self::Two => "2",
            Self::Three => "3",
            Self::FourA => "4A",
            Self::FourB => "4B",
        }
    }

    pub fn from_label(label: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.label() == label)
    }
}

/// A suggested category and the rule that gave it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Suggestion {
    pub category: Category,
    pub rule: String,
}

impl Suggestion {
    fn new(category: Category, rule: String) -> Self {
        Self { category, rule }
    }
}

/// The suggestion for one nodule of `nodule_type` (`None`: not typed, taken as solid) and
/// mean diameter `mean_mm`, with its solid component's mean diameter when part-solid.
pub fn nodule(nodule_type: Option<NoduleType>, mean_mm: f64, solid_mm: Option<f64>) -> Suggestion {
    use Category::*;
    match nodule_type.unwrap_or(NoduleType::Solid) {
        NoduleType::Solid => {
            let (category, range) = match mean_mm {
                d if d < 6.0 => (Two, "< 6 mm"),
                d if d < 8.0 => (Three, ">= 6 to < 8 mm"),
                d if d < 15.0 => (FourA, ">= 8 to < 15 mm"),
                _ => (FourB, ">= 15 mm"),
            };
            let untyped = if nodule_type.is_none() {
                " (type not measured: taken as solid)"
            } else {
                ""
            };
            Suggestion::new(
                category,
                format!("solid nodule {range} at baseline{untyped}: {mean_mm:.1} mm"),
            )
        }
        NoduleType::PartSolid => {
            let solid = solid_mm.unwrap_or(0.0);
            let (category, rule) = if mean_mm < 6.0 {
                (Two, "part-solid nodule < 6 mm total diameter at baseline")
            } else if solid < 6.0 {
                (
                    Three,
                    "part-solid nodule >= 6 mm total with solid component < 6 mm",
                )
            } else if solid < 8.0 {
                (
                    FourA,
                    "part-solid nodule >= 6 mm with solid component >= 6 to < 8 mm",
                )
            } else {
                (FourB, "part-solid nodule with solid component >= 8 mm")
            };
            Suggestion::new(
                category,
                format!("{rule}: {mean_mm:.1} mm, solid {solid:.1} mm"),
            )
        }
        NoduleType::GroundGlass => {
            let (category, rule) = if mean_mm < 30.0 {
                (Two, "non-solid nodule < 30 mm")
            } else {
                (Three, "non-solid nodule >= 30 mm at baseline")
            };
            Suggestion::new(category, format!("{rule}: {mean_mm:.1} mm"))
        }
    }
}

/// The suggestion for a finding's measurements.
pub fn of(m: &Measurements) -> Suggestion {
    nodule(m.nodule_type, m.mean_diameter_mm, m.solid_mean_diameter_mm)
}

/// The suggestion for a finding's measurements with the axes a reader drew instead.
pub fn with_axes(m: &Measurements, axes: &AxialAxes) -> Suggestion {
    nodule(
        m.nodule_type,
        axes.mean_diameter_mm(),
        m.solid_mean_diameter_mm,
    )
}

/// The study's suggestion from its findings as `(name, category, rejected)`: the rejected
/// ones and those without a category left out (the viewer's study line and the SR's).
pub fn study_of_findings(
    findings: impl IntoIterator<Item = (String, Option<Category>, bool)>,
) -> Suggestion {
    let kept: Vec<(String, Category)> = findings
        .into_iter()
        .filter(|(_, _, rejected)| !rejected)
        .filter_map(|(name, category, _)| Some((name, category?)))
        .collect();
    study(&kept)
}

/// The study's suggestion: its most suspicious nodule's (`nodules`: each finding's
/// category), or 1 when there is none.
pub fn study(nodules: &[(String, Category)]) -> Suggestion {
    match nodules.iter().max_by_key(|(_, c)| *c) {
        Some((name, category)) => Suggestion::new(
            *category,
            format!(
                "the most suspicious nodule ({name}) is category {}",
                category.label()
            ),
        ),
        None => Suggestion::new(
            Category::One,
            "no lung nodule among the findings kept".to_string(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::Category::*;
    use super::*;

    #[test]
    fn solid_nodules_change_category_at_6_8_and_15_mm() {
        for (mm, category) in [
            (5.9, Two),
            (6.0, Three),
            (7.9, Three),
            (8.0, FourA),
            (14.9, FourA),
            (15.0, FourB),
            (40.0, FourB),
        ] {
            assert_eq!(
                nodule(Some(NoduleType::Solid), mm, None).category,
                category,
                "{mm} mm"
            );
            assert_eq!(nodule(None, mm, None).category, category, "untyped {mm} mm");
        }
        assert!(nodule(None, 5.0, None).rule.contains("taken as solid"));
    }

    #[test]
    fn part_solid_nodules_go_by_total_size_then_solid_component() {
        for (total, solid, category) in [
            (5.9, 5.0, Two),
            (6.0, 0.0, Three),
            (20.0, 5.9, Three),
            (6.0, 6.0, FourA),
            (20.0, 7.9, FourA),
            (20.0, 8.0, FourB),
        ] {
            assert_eq!(
                nodule(Some(NoduleType::PartSolid), total, Some(solid)).category,
                category,
                "{total} mm, solid {solid} mm"
            );
        }
    }

    #[test]
    fn ground_glass_nodules_are_category_2_below_30_mm() {
        let ggn = |mm| nodule(Some(NoduleType::GroundGlass), mm, None).category;
        assert_eq!((ggn(29.9), ggn(30.0), ggn(4.0)), (Two, Three, Two));
    }

    #[test]
    fn a_study_takes_its_most_suspicious_nodule() {
        let found = [
            ("1".to_string(), Three),
            ("2".to_string(), FourA),
            ("3".to_string(), Two),
        ];
        let s = study(&found);
        assert_eq!(s.category, FourA);
        assert!(s.rule.contains("(2)"), "{}", s.rule);
        assert_eq!(study(&[]).category, One);
        assert_eq!(Category::from_label("4B"), Some(FourB));
        assert_eq!(
            serde_json::to_string(&FourA).ok().as_deref(),
            Some("\"4A\"")
        );
    }
}
