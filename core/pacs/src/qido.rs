//! QIDO-RS: studies and series, from the DICOM JSON model (PS3.18 F.2).

use serde_json::Value as Json;

use crate::{PacsError, Server};

/// What a study list shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StudyRow {
    pub study_uid: String,
    pub patient_name: String,
    pub patient_id: String,
    /// DICOM DA (`YYYYMMDD`).
    pub study_date: String,
    pub description: String,
    pub modalities: Vec<String>,
    pub series: Option<u64>,
    pub instances: Option<u64>,
}

/// What a series list shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SeriesRow {
    pub series_uid: String,
    pub modality: String,
    pub description: String,
    pub number: Option<i64>,
    pub instances: Option<u64>,
}

/// Filters for a study search (empty: all, as the server pages them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StudyQuery {
    pub study_uid: Option<String>,
    /// DICOM wildcard matching (`DOE*`).
    pub patient_name: Option<String>,
    pub patient_id: Option<String>,
    /// `YYYYMMDD` or a range `YYYYMMDD-YYYYMMDD`.
    pub study_date: Option<String>,
    pub limit: Option<usize>,
}

const STUDY_FIELDS: &str =
    "includefield=00081030&includefield=00080061&includefield=00201206&includefield=00201208";

impl Server {
    /// QIDO-RS `GET {base}/studies`.
    pub fn search_studies(&self, query: &StudyQuery) -> Result<Vec<StudyRow>, PacsError> {
        let mut params = vec![STUDY_FIELDS.to_string()];
        let filters = [
            ("StudyInstanceUID", &query.study_uid),
            ("PatientName", &query.patient_name),
            ("PatientID", &query.patient_id),
            ("StudyDate", &query.study_date),
        ];
        for (key, value) in filters {
            if let Some(value) = value {
                params.push(format!("{key}={}", percent_encode(value)));
            }
        }
        if let Some(limit) = query.limit {
            params.push(format!("limit={limit}"));
        }
        let url = self.url(&format!("studies?{}", params.join("&")));
        let rows = self.json_array(&url)?;
        Ok(rows.iter().map(study_row).collect())
    }

    /// QIDO-RS `GET {base}/studies/{uid}/series`. A study the server does not hold is
    /// [`PacsError::NoSuchStudy`].
    pub fn search_series(&self, study_uid: &str) -> Result<Vec<SeriesRow>, PacsError> {
        let url = self.url(&format!(
            "studies/{}/series?includefield=0008103E&includefield=00201209",
            percent_encode(study_uid)
        ));
        let rows = match self.json_array(&url) {
            Err(PacsError::Status { status: 404, .. }) => Vec::new(),
            other => other?,
        };
        if rows.is_empty() {
            return Err(PacsError::NoSuchStudy {
                study_uid: study_uid.into(),
            });
        }
        Ok(rows.iter().map(series_row).collect())
    }

    fn json_array(&self, url: &str) -> Result<Vec<Json>, PacsError> {
        let mut response = self.get(url, "application/dicom+json")?;
        // 204: no matches.
        if response.status().as_u16() == 204 {
            return Ok(Vec::new());
        }
        let text = response
            .body_mut()
            .with_config()
            .limit(64 << 20)
            .read_to_string()
            .map_err(|e| protocol(url, e.to_string()))?;
        if text.trim().is_empty() {
            return Ok(Vec::new());
        }
        match serde_json::from_str::<Json>(&text) {
            Ok(Json::Array(rows)) => Ok(rows),
            Ok(_) => Err(protocol(url, "the answer is not a JSON array".into())),
            Err(e) => Err(protocol(url, format!("not DICOM JSON: {e}"))),
        }
    }
}

fn protocol(url: &str, reason: String) -> PacsError {
    PacsError::Protocol {
        url: url.into(),
        reason,
    }
}

fn study_row(json: &Json) -> StudyRow {
    StudyRow {
        study_uid: first_text(json, "0020000D"),
        patient_name: first_text(json, "00100010"),
        patient_id: first_text(json, "00100020"),
        study_date: first_text(json, "00080020"),
        description: first_text(json, "00081030"),
        modalities: texts(json, "00080061"),
        series: first_number(json, "00201206"),
        instances: first_number(json, "00201208"),
    }
}

fn series_row(json: &Json) -> SeriesRow {
    SeriesRow {
        series_uid: first_text(json, "0020000E"),
        modality: first_text(json, "00080060"),
        description: first_text(json, "0008103E"),
        number: first_number(json, "00200011").and_then(|n| i64::try_from(n).ok()),
        instances: first_number(json, "00201209"),
    }
}

/// The values of attribute `tag` as text (person names: their alphabetic form).
fn texts(json: &Json, tag: &str) -> Vec<String> {
    let Some(values) = json
        .get(tag)
        .and_then(|a| a.get("Value"))
        .and_then(Json::as_array)
    else {
        return Vec::new();
    };
    values
        .iter()
        .filter_map(|v| match v {
            Json::String(s) => Some(s.clone()),
            Json::Number(n) => Some(n.to_string()),
            Json::Object(pn) => pn
                .get("Alphabetic")
                .and_then(Json::as_str)
                .map(str::to_string),
            _ => None,
        })
        .collect()
}

fn first_text(json: &Json, tag: &str) -> String {
    texts(json, tag).into_iter().next().unwrap_or_default()
}

fn first_number(json: &Json, tag: &str) -> Option<u64> {
    first_text(json, tag).trim().parse().ok()
}

/// Percent-encodes a query value (RFC 3986 unreserved characters and `*` stay).
pub(crate) fn percent_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~*".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dicom_json_rows_read_their_fields() {
        let json: Json = serde_json::from_str(
            r#"{"0020000D":{"vr":"UI","Value":["1.2.3"]},
                "00100010":{"vr":"PN","Value":[{"Alphabetic":"Doe^Jane"}]},
                "00080061":{"vr":"CS","Value":["CT","SR"]},
                "00201206":{"vr":"IS","Value":[2]},
                "00080020":{"vr":"DA"}}"#,
        )
        .unwrap_or_default();
        let row = study_row(&json);
        assert_eq!(row.study_uid, "1.2.3");
        assert_eq!(row.patient_name, "Doe^Jane");
        assert_eq!(row.modalities, ["CT", "SR"]);
        assert_eq!(row.series, Some(2));
        assert_eq!(row.study_date, "");
        assert_eq!(percent_encode("DOE^J* 1"), "DOE%5EJ*%201");
    }
}
