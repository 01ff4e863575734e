//! The coded concepts Tessera's SR uses: DICOM (DCM), SNOMED CT (SCT), LOINC (LN), UCUM, and
//! Tessera's own scheme for what no standard code says (a reader's accept/reject call).

use tessera_dicom::dicom::sr::Code;

/// Tessera's private coding scheme (`99` prefix: local, PS3.16 8.2).
pub const TESSERA_SCHEME: &str = "99TESSERA";

fn dcm(value: &str, meaning: &str) -> Code {
    Code::new(value, "DCM", meaning)
}

pub fn imaging_measurement_report() -> Code {
    dcm("126000", "Imaging Measurement Report")
}
pub fn language() -> Code {
    dcm("121049", "Language of Content Item and Descendants")
}
pub fn english() -> Code {
    Code::new("en-US", "RFC5646", "English (United States)")
}
pub fn observer_type() -> Code {
    dcm("121005", "Observer Type")
}
pub fn person() -> Code {
    dcm("121006", "Person")
}
pub fn device() -> Code {
    dcm("121007", "Device")
}
pub fn person_observer_name() -> Code {
    dcm("121008", "Person Observer Name")
}
pub fn device_observer_uid() -> Code {
    dcm("121012", "Device Observer UID")
}
pub fn device_observer_name() -> Code {
    dcm("121013", "Device Observer Name")
}
pub fn device_observer_manufacturer() -> Code {
    dcm("121014", "Device Observer Manufacturer")
}
pub fn device_observer_model_name() -> Code {
    dcm("121015", "Device Observer Model Name")
}
pub fn procedure_reported() -> Code {
    dcm("121058", "Procedure reported")
}
pub fn ct_chest() -> Code {
    Code::new("24627-2", "LN", "CT Chest")
}
pub fn image_library() -> Code {
    dcm("111028", "Image Library")
}
pub fn image_library_group() -> Code {
    dcm("126200", "Image Library Group")
}
pub fn imaging_measurements() -> Code {
    dcm("126010", "Imaging Measurements")
}
pub fn measurement_group() -> Code {
    dcm("125007", "Measurement Group")
}
pub fn tracking_identifier() -> Code {
    dcm("112039", "Tracking Identifier")
}
pub fn tracking_uid() -> Code {
    dcm("112040", "Tracking Unique Identifier")
}
pub fn finding() -> Code {
    dcm("121071", "Finding")
}
pub fn nodule() -> Code {
    Code::new("27925004", "SCT", "Nodule")
}
pub fn volume_surface() -> Code {
    dcm("121231", "Volume Surface")
}
pub fn source_series_for_segmentation() -> Code {
    dcm("121232", "Source series for segmentation")
}
pub fn diameter() -> Code {
    Code::new("81827009", "SCT", "Diameter")
}
pub fn millimetre() -> Code {
    Code::new("mm", "UCUM", "millimeter")
}
pub fn certainty_of_finding() -> Code {
    dcm("111012", "Certainty of Finding")
}
pub fn percent() -> Code {
    Code::new("%", "UCUM", "Percent")
}
pub fn algorithm_name() -> Code {
    dcm("111001", "Algorithm Name")
}
pub fn algorithm_version() -> Code {
    dcm("111003", "Algorithm Version")
}
pub fn algorithm_parameters() -> Code {
    dcm("111002", "Algorithm Parameters")
}
pub fn comment() -> Code {
    dcm("121106", "Comment")
}
pub fn reader_decision() -> Code {
    Code::new("decision", TESSERA_SCHEME, "Reader decision")
}
pub fn decision(label: &str) -> Code {
    let meaning = match label {
        "accepted" => "Accepted",
        "rejected" => "Rejected",
        _ => "Unsure",
    };
    Code::new(label, TESSERA_SCHEME, meaning)
}
pub fn long_axis() -> Code {
    Code::new("103339001", "SCT", "Long Axis")
}
pub fn short_axis() -> Code {
    Code::new("103340004", "SCT", "Short Axis")
}
pub fn volume() -> Code {
    Code::new("118565006", "SCT", "Volume")
}
pub fn cubic_millimetre() -> Code {
    Code::new("mm3", "UCUM", "cubic millimeter")
}
pub fn attenuation_coefficient() -> Code {
    dcm("112031", "Attenuation Coefficient")
}
pub fn hounsfield_unit() -> Code {
    Code::new("[hnsf'U]", "UCUM", "Hounsfield unit")
}
/// A numeric measurement's modifier: how the value was derived.
pub fn derivation() -> Code {
    dcm("121401", "Derivation")
}
pub fn mean() -> Code {
    Code::new("373098007", "SCT", "Mean")
}
/// TID 1500's container of the report's qualitative evaluations.
pub fn qualitative_evaluations() -> Code {
    dcm("126011", "Qualitative Evaluations")
}
/// A nodule's type (no standard code names Lung-RADS' solid / part-solid / non-solid).
pub fn nodule_type() -> Code {
    Code::new("nodule-type", TESSERA_SCHEME, "Nodule type")
}
pub fn nodule_type_value(label: &str) -> Code {
    let meaning = match label {
        "solid" => "Solid",
        "part-solid" => "Part-solid",
        _ => "Ground-glass (non-solid)",
    };
    Code::new(label, TESSERA_SCHEME, meaning)
}
/// The Lung-RADS category, as the reader set it or (`suggested`) as Tessera's rules gave it.
pub fn lung_rads(suggested: bool) -> Code {
    match suggested {
        true => Code::new(
            "lungrads-suggest",
            TESSERA_SCHEME,
            "Lung-RADS category suggested",
        ),
        false => Code::new("lungrads", TESSERA_SCHEME, "Lung-RADS category"),
    }
}
pub fn lung_rads_value(label: &str) -> Code {
    Code::new(label, TESSERA_SCHEME, &format!("Lung-RADS {label}"))
}
/// The rule that gave a suggested category.
pub fn lung_rads_rule() -> Code {
    Code::new("lungrads-rule", TESSERA_SCHEME, "Lung-RADS rule")
}
