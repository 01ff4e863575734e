//! `multipart/related` bodies (RFC 2387) as DICOMweb uses them: one DICOM file per part.

/// The `boundary` parameter of a Content-Type header.
pub(crate) fn boundary(content_type: &str) -> Option<String> {
    content_type.split(';').skip(1).find_map(|param| {
        let (key, value) = param.split_once('=')?;
        key.trim()
            .eq_ignore_ascii_case("boundary")
            .then(|| value.trim().trim_matches('"').to_string())
            .filter(|b| !b.is_empty())
    })
}

/// The parts' bodies, in order. Refuses a body that does not end with the closing delimiter
/// (a retrieval cut short must not pass as a smaller series).
pub(crate) fn split<'a>(body: &'a [u8], boundary: &str) -> Result<Vec<&'a [u8]>, String> {
    let delimiter = format!("--{boundary}");
    let delimiter = delimiter.as_bytes();
    let mut starts = Vec::new();
    let mut at = 0;
    while let Some(found) = find(&body[at..], delimiter) {
        let start = at + found;
        // A delimiter starts the body or a line; the same bytes inside a file are data.
        if start == 0 || body[..start].ends_with(b"\r\n") {
            starts.push(start);
        }
        at = start + delimiter.len();
    }
    let Some(&last) = starts.last() else {
        return Err("no multipart boundary in the body".into());
    };
    if !body[last + delimiter.len()..].starts_with(b"--") {
        return Err("the body ends before its closing boundary (cut short)".into());
    }
    let mut parts = Vec::with_capacity(starts.len().saturating_sub(1));
    for pair in starts.windows(2) {
        let part = &body[pair[0] + delimiter.len()..pair[1]];
        // Headers end at the first empty line; the CRLF before the next delimiter is not data.
        let Some(header_end) = find(part, b"\r\n\r\n") else {
            return Err("a part has no header/body separator".into());
        };
        let data = &part[header_end + 4..];
        parts.push(data.strip_suffix(b"\r\n").unwrap_or(data));
    }
    Ok(parts)
}

/// One body from `files`, each a part of type `application/dicom`.
pub(crate) fn join(files: &[&[u8]], boundary: &str) -> Vec<u8> {
    let mut body =
        Vec::with_capacity(files.iter().map(|f| f.len()).sum::<usize>() + 128 * files.len());
    for file in files {
        body.extend_from_slice(
            format!("--{boundary}\r\nContent-Type: application/dicom\r\n\r\n").as_bytes(),
        );
        body.extend_from_slice(file);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    body
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_split_back_as_joined() {
        let files: [&[u8]; 3] = [b"first\r\nfile", b"", b"--not-a-boundary"];
        let body = join(&files, "b0undary");
        let parts = split(&body, "b0undary");
        assert_eq!(parts, Ok(files.to_vec()));
        let cut = &body[..body.len() - 10];
        assert!(split(cut, "b0undary").is_err(), "a cut body is refused");
        assert_eq!(
            boundary("multipart/related; type=\"application/dicom\"; boundary=\"abc\""),
            Some("abc".into())
        );
        assert_eq!(boundary("application/dicom"), None);
    }
}
