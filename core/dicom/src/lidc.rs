//! LIDC-IDRI reader annotations: the XML beside each case's slices, turned into nodules in the
//! patient (LPS mm) and grouped across the four readers.
//!
//! Each reader outlines nodules of 3 mm or more slice by slice (`roi` with an `edgeMap`
//! contour in pixel columns and rows, and the slice's `imageZposition`) and marks smaller ones
//! with a single point. Readers worked independently, so the same nodule appears up to four
//! times; [`consensus`] groups them by position. The evaluation of a detector against them
//! (FROC, misses) builds on this. Data: LIDC-IDRI, CC BY 3.0 (see `../shared/data/lidc/ATTRIBUTION`).

use std::path::{Path, PathBuf};

use crate::geometry::{Vec3, norm, sub};
use crate::volume::Geometry;

/// One reader's nodule.
#[derive(Debug, Clone, PartialEq)]
pub struct ReaderNodule {
    pub reader: String,
    pub id: String,
    /// Outlined (3 mm or more) or a single point (smaller).
    pub outlined: bool,
    /// Radiologist's malignancy rating 1-5, when characterised.
    pub malignancy: Option<u8>,
    /// Box around every contour point, LPS mm: `min`, `max`.
    pub min_lps_mm: Vec3,
    pub max_lps_mm: Vec3,
}

impl ReaderNodule {
    pub fn center_lps_mm(&self) -> Vec3 {
        std::array::from_fn(|a| 0.5 * (self.min_lps_mm[a] + self.max_lps_mm[a]))
    }

    /// Largest in-plane extent, mm (0 for a point).
    pub fn diameter_mm(&self) -> f64 {
        (self.max_lps_mm[0] - self.min_lps_mm[0]).max(self.max_lps_mm[1] - self.min_lps_mm[1])
    }
}

/// A nodule as the readers agree on it.
#[derive(Debug, Clone, PartialEq)]
pub struct ConsensusNodule {
    pub center_lps_mm: Vec3,
    /// Mean of the readers' diameters (0 when every reader marked a point).
    pub diameter_mm: f64,
    /// How many readers marked it (1 to 4).
    pub readers: usize,
    pub outlined: bool,
    pub reads: Vec<ReaderNodule>,
}

/// The annotations of one series.
#[derive(Debug, Clone, PartialEq)]
pub struct LidcReads {
    pub path: PathBuf,
    pub series_uid: String,
    pub readers: usize,
    pub nodules: Vec<ReaderNodule>,
}

#[derive(Debug, thiserror::Error)]
pub enum LidcError {
    #[error("cannot read {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is not LIDC reader XML: {reason}", path.display())]
    Format { path: PathBuf, reason: String },
    #[error("{} annotates series {xml}, not the loaded series {loaded}", path.display())]
    OtherSeries {
        path: PathBuf,
        xml: String,
        loaded: String,
    },
}

/// Finds the reader XML in a case folder (the first `*.xml` holding a `LidcReadMessage`).
pub fn find_xml(dir: &Path) -> Option<PathBuf> {
    let mut stack = vec![dir.to_path_buf()];
    let mut found = Vec::new();
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d)
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
        {
            let p = entry.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|e| e.eq_ignore_ascii_case("xml")) {
                found.push(p);
            }
        }
    }
    found.sort();
    found
        .into_iter()
        .find(|p| std::fs::read_to_string(p).is_ok_and(|t| t.contains("LidcReadMessage")))
}

/// Reads the annotations in `path` for the series with `geometry` and `series_uid`.
pub fn read(path: &Path, geometry: &Geometry, series_uid: &str) -> Result<LidcReads, LidcError> {
    let text = std::fs::read_to_string(path).map_err(|source| LidcError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let format = |reason: String| LidcError::Format {
        path: path.to_path_buf(),
        reason,
    };
    let doc = roxmltree::Document::parse(&text).map_err(|e| format(e.to_string()))?;
    let root = doc.root_element();
    if root.tag_name().name() != "LidcReadMessage" {
        return Err(format(format!(
            "root element is {}",
            root.tag_name().name()
        )));
    }
    let xml_series = root
        .descendants()
        .find(|n| n.tag_name().name() == "SeriesInstanceUid")
        .and_then(|n| n.text())
        .map(|t| t.trim().to_string())
        .unwrap_or_default();
    if xml_series != series_uid {
        return Err(LidcError::OtherSeries {
            path: path.to_path_buf(),
            xml: xml_series,
            loaded: series_uid.to_string(),
        });
    }
    let sessions: Vec<_> = root
        .children()
        .filter(|n| n.tag_name().name() == "readingSession")
        .collect();
    let mut nodules = Vec::new();
    for session in &sessions {
        let reader = text_of(*session, "servicingRadiologistID").unwrap_or_default();
        for nodule in session
            .children()
            .filter(|n| n.tag_name().name() == "unblindedReadNodule")
        {
            let id = text_of(nodule, "noduleID").unwrap_or_default();
            let malignancy = child(nodule, "characteristics")
                .and_then(|c| text_of(c, "malignancy"))
                .and_then(|m| m.parse().ok());
            let mut min = [f64::INFINITY; 3];
            let mut max = [f64::NEG_INFINITY; 3];
            let mut points = 0usize;
            for roi in nodule.children().filter(|n| n.tag_name().name() == "roi") {
                let z_mm: f64 = text_of(roi, "imageZposition")
                    .and_then(|z| z.parse().ok())
                    .ok_or_else(|| {
                        format(format!(
                            "nodule {id} of reader {reader}: roi without imageZposition"
                        ))
                    })?;
                for edge in roi.children().filter(|n| n.tag_name().name() == "edgeMap") {
                    let coordinate =
                        |name: &str| text_of(edge, name).and_then(|v| v.parse::<f64>().ok());
                    let (Some(x), Some(y)) = (coordinate("xCoord"), coordinate("yCoord")) else {
                        return Err(format(format!(
                            "nodule {id} of reader {reader}: edgeMap without xCoord/yCoord"
                        )));
                    };
                    let p = lps_of(geometry, x, y, z_mm);
                    for a in 0..3 {
                        min[a] = min[a].min(p[a]);
                        max[a] = max[a].max(p[a]);
                    }
                    points += 1;
                }
            }
            if points == 0 {
                continue;
            }
            nodules.push(ReaderNodule {
                reader: reader.clone(),
                id,
                outlined: points > 1,
                malignancy,
                min_lps_mm: min,
                max_lps_mm: max,
            });
        }
    }
    Ok(LidcReads {
        path: path.to_path_buf(),
        series_uid: xml_series,
        readers: sessions.len(),
        nodules,
    })
}

fn child<'a, 'input>(
    node: roxmltree::Node<'a, 'input>,
    name: &str,
) -> Option<roxmltree::Node<'a, 'input>> {
    node.children().find(|c| c.tag_name().name() == name)
}

fn text_of(node: roxmltree::Node<'_, '_>, name: &str) -> Option<String> {
    child(node, name)
        .and_then(|c| c.text())
        .map(|t| t.trim().to_string())
}

/// Pixel column `x`, row `y` on the slice at `z_mm` (LIDC's `imageZposition`, the slice's z),
/// in LPS mm. LIDC series are axial: the slice is found by its z, the pixel by the geometry.
fn lps_of(geometry: &Geometry, x: f64, y: f64, z_mm: f64) -> Vec3 {
    let origin_z = geometry.origin_lps_mm()[2];
    let step_z = geometry.world_from_voxel.column(2)[2];
    let k = if step_z.abs() > 0.0 {
        (z_mm - origin_z) / step_z
    } else {
        0.0
    };
    let mut p = geometry.world_from_voxel.apply([x, y, k]);
    p[2] = z_mm;
    p
}

/// Reads closer than this (mm), or than half a diameter, are one nodule (the CLI's default).
pub const SAME_NODULE_MM: f64 = 5.0;

/// Groups the readers' nodules: a read joins the first group whose centre is closer than
/// half the larger diameter or `min_distance_mm`, whichever is more.
pub fn consensus(reads: &LidcReads, min_distance_mm: f64) -> Vec<ConsensusNodule> {
    let mut groups: Vec<ConsensusNodule> = Vec::new();
    let mut sorted = reads.nodules.clone();
    // Outlined reads first, largest first: small marks then join the nodule they belong to.
    sorted.sort_by(|a, b| {
        b.outlined
            .cmp(&a.outlined)
            .then(b.diameter_mm().total_cmp(&a.diameter_mm()))
    });
    for read in sorted {
        let centre = read.center_lps_mm();
        let home = groups.iter_mut().find(|g| {
            let reach = (0.5 * g.diameter_mm.max(read.diameter_mm())).max(min_distance_mm);
            norm(sub(g.center_lps_mm, centre)) <= reach
                && !g.reads.iter().any(|r| r.reader == read.reader)
        });
        match home {
            Some(g) => g.reads.push(read),
            None => groups.push(ConsensusNodule {
                center_lps_mm: centre,
                diameter_mm: read.diameter_mm(),
                readers: 0,
                outlined: read.outlined,
                reads: vec![read],
            }),
        }
    }
    for g in &mut groups {
        let n = g.reads.len() as f64;
        g.readers = g.reads.len();
        g.center_lps_mm =
            std::array::from_fn(|a| g.reads.iter().map(|r| r.center_lps_mm()[a]).sum::<f64>() / n);
        g.diameter_mm = g.reads.iter().map(ReaderNodule::diameter_mm).sum::<f64>() / n;
        g.outlined = g.reads.iter().any(|r| r.outlined);
    }
    groups.sort_by(|a, b| {
        b.readers
            .cmp(&a.readers)
            .then(b.diameter_mm.total_cmp(&a.diameter_mm))
    });
    groups
}
