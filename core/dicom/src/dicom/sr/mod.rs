//! DICOM Structured Reports: a content tree, written as a Comprehensive 3D SR file and read
//! back.
//!
//! This module knows how SR is encoded (PS3.3 C.17: content items, relationships, value
//! types, the evidence that cites the source images), not what a report says: the templates
//! (TID 1500 and its parts) are built in `tessera-core`. It writes new files only.
//!
//! ```
//! use tessera_dicom::dicom::sr::{Code, Item, Relationship, Value};
//!
//! let root = Item::container(Code::new("126000", "DCM", "Imaging Measurement Report"))
//!     .template("1500")
//!     .with(Item::new(
//!         Relationship::Contains,
//!         Code::new("121106", "DCM", "Comment"),
//!         Value::Text("no findings".into()),
//!     ));
//! assert_eq!(root.children.len(), 1);
//! ```

mod decode;
mod encode;

pub use decode::{ReadSr, read_sr};
pub use encode::{SrDocument, sr_bytes, write_sr};

use serde::{Deserialize, Serialize};

use crate::volume::SourceInstance;

/// The SOP class every SR this module writes has.
pub const COMPREHENSIVE_3D_SR: &str = dicom_dictionary_std::uids::COMPREHENSIVE3_DSR_STORAGE;

/// A coded concept: value, coding scheme designator, meaning.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Code {
    pub value: String,
    pub scheme: String,
    pub meaning: String,
}

impl Code {
    pub fn new(value: &str, scheme: &str, meaning: &str) -> Self {
        Self {
            value: value.into(),
            scheme: scheme.into(),
            meaning: meaning.into(),
        }
    }

    /// Same concept: value and scheme agree (meanings are free text and may differ).
    pub fn is(&self, other: &Code) -> bool {
        self.value == other.value && self.scheme == other.scheme
    }
}

/// How a content item relates to its parent (PS3.3 C.17.3.2.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relationship {
    Contains,
    HasObsContext,
    HasConceptMod,
    HasProperties,
    InferredFrom,
    SelectedFrom,
}

impl Relationship {
    pub const ALL: [Self; 6] = [
        Self::Contains,
        Self::HasObsContext,
        Self::HasConceptMod,
        Self::HasProperties,
        Self::InferredFrom,
        Self::SelectedFrom,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Contains => "CONTAINS",
            Self::HasObsContext => "HAS OBS CONTEXT",
            Self::HasConceptMod => "HAS CONCEPT MOD",
            Self::HasProperties => "HAS PROPERTIES",
            Self::InferredFrom => "INFERRED FROM",
            Self::SelectedFrom => "SELECTED FROM",
        }
    }
}

/// The shapes a SCOORD3D item may have (PS3.3 C.18.9.1.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GraphicType3d {
    Point,
    Multipoint,
    Polyline,
    Polygon,
    Ellipse,
    /// Six points: the end points of three orthogonal axes.
    Ellipsoid,
}

impl GraphicType3d {
    pub const ALL: [Self; 6] = [
        Self::Point,
        Self::Multipoint,
        Self::Polyline,
        Self::Polygon,
        Self::Ellipse,
        Self::Ellipsoid,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Point => "POINT",
            Self::Multipoint => "MULTIPOINT",
            Self::Polyline => "POLYLINE",
            Self::Polygon => "POLYGON",
            Self::Ellipse => "ELLIPSE",
            Self::Ellipsoid => "ELLIPSOID",
        }
    }
}

/// A content item's value, by value type.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// Children in `Item::children`; continuity is always SEPARATE.
    Container,
    Code(Code),
    Text(String),
    Num {
        value: f64,
        units: Code,
    },
    UidRef(String),
    PName(String),
    /// DICOM DT (`YYYYMMDDHHMMSS`).
    DateTime(String),
    Image(SourceInstance),
    /// Points in the frame of reference's patient coordinates (LPS, mm).
    Scoord3d {
        graphic_type: GraphicType3d,
        points_lps_mm: Vec<[f64; 3]>,
        frame_of_reference_uid: String,
    },
}

impl Value {
    /// The Value Type attribute's text.
    pub fn value_type(&self) -> &'static str {
        match self {
            Self::Container => "CONTAINER",
            Self::Code(_) => "CODE",
            Self::Text(_) => "TEXT",
            Self::Num { .. } => "NUM",
            Self::UidRef(_) => "UIDREF",
            Self::PName(_) => "PNAME",
            Self::DateTime(_) => "DATETIME",
            Self::Image(_) => "IMAGE",
            Self::Scoord3d { .. } => "SCOORD3D",
        }
    }
}

/// One content item and the items under it.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    /// To the parent (the root's is not written).
    pub relationship: Relationship,
    /// The concept name; `None` only where a template has none (an image library entry).
    pub concept: Option<Code>,
    pub value: Value,
    /// A container's template (TID), written as DCMR.
    pub template: Option<String>,
    pub children: Vec<Item>,
}

impl Item {
    pub fn new(relationship: Relationship, concept: Code, value: Value) -> Self {
        Self::unnamed(relationship, value).named(concept)
    }

    /// An item without a concept name.
    pub fn unnamed(relationship: Relationship, value: Value) -> Self {
        Self {
            relationship,
            concept: None,
            value,
            template: None,
            children: Vec::new(),
        }
    }

    /// A container under its parent by CONTAINS (or the root).
    pub fn container(concept: Code) -> Self {
        Self::new(Relationship::Contains, concept, Value::Container)
    }

    fn named(mut self, concept: Code) -> Self {
        self.concept = Some(concept);
        self
    }

    pub fn template(mut self, tid: &str) -> Self {
        self.template = Some(tid.into());
        self
    }

    pub fn with(mut self, child: Item) -> Self {
        self.children.push(child);
        self
    }

    /// Children with this concept, in order.
    pub fn children_named<'a>(&'a self, concept: &'a Code) -> impl Iterator<Item = &'a Item> {
        self.children
            .iter()
            .filter(|c| c.concept.as_ref().is_some_and(|n| n.is(concept)))
    }

    /// The first child with this concept.
    pub fn child(&self, concept: &Code) -> Option<&Item> {
        self.children
            .iter()
            .find(|c| c.concept.as_ref().is_some_and(|n| n.is(concept)))
    }
}
