//! Text the CLI's flags and the viewer's fields both accept: sizes and spacings.

/// `512x512x64` -> `[512, 512, 64]`.
pub fn parse_size(text: &str) -> Result<[usize; 3], String> {
    let parts: Vec<&str> = text.split(['x', 'X']).collect();
    let values: Result<Vec<usize>, _> = parts.iter().map(|p| p.trim().parse::<usize>()).collect();
    match values {
        Ok(v) if v.len() == 3 && v.iter().all(|n| *n > 0) => Ok([v[0], v[1], v[2]]),
        _ => Err(format!("'{text}' is not a size like 512x512x64")),
    }
}

/// `0.7,0.7,1.25` -> `[0.7, 0.7, 1.25]`.
pub fn parse_spacing(text: &str) -> Result<[f64; 3], String> {
    let values: Result<Vec<f64>, _> = text.split(',').map(|p| p.trim().parse::<f64>()).collect();
    match values {
        Ok(v) if v.len() == 3 && v.iter().all(|s| s.is_finite() && *s > 0.0) => {
            Ok([v[0], v[1], v[2]])
        }
        _ => Err(format!(
            "'{text}' is not a spacing like 0.7,0.7,1.25 (mm, all positive)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_spacings_parse_or_explain() {
        assert_eq!(parse_size("512x512x64"), Ok([512, 512, 64]));
        assert!(parse_size("512x512").unwrap_err().contains("512x512x64"));
        assert!(parse_size("0x1x1").is_err());
        assert_eq!(parse_spacing("0.7,0.7,1.25"), Ok([0.7, 0.7, 1.25]));
        assert!(parse_spacing("0.7,-1,1").is_err());
    }
}
