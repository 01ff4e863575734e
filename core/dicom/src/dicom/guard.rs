//! Checks a DICOM file's element structure against its size before anything is parsed.
//!
//! dicom-rs allocates a value's declared length before reading it, so a 34 KB file that declares
//! 4 GiB of PixelData costs 4 GiB. This walk reads only element headers (seeking over values),
//! refuses any length that runs past the file (or its enclosing item), and finds where the pixel
//! data starts and ends, so that callers hand dicom-rs only the bytes that matter: the header
//! for a scan, the header and pixels for decoding, never a trailing tail.

use std::io::{Read, Seek, SeekFrom};
use std::ops::Range;

/// Nested sequences deeper than this are refused (no real CT nests more than a few levels).
const MAX_DEPTH: usize = 16;
const UNDEFINED: u32 = 0xFFFF_FFFF;
const ITEM: (u16, u16) = (0xFFFE, 0xE000);
const ITEM_END: (u16, u16) = (0xFFFE, 0xE00D);
const SEQUENCE_END: (u16, u16) = (0xFFFE, 0xE0DD);
const PIXEL_DATA: (u16, u16) = (0x7FE0, 0x0010);
const TRANSFER_SYNTAX: (u16, u16) = (0x0002, 0x0010);
/// The VRs with a 2-byte length in explicit VR. Any other, an unknown one too, has 2 reserved
/// bytes and a 4-byte length: that is how dicom-rs reads it, so the check must too.
const SHORT_LENGTH_VRS: [&[u8; 2]; 21] = [
    b"AE", b"AS", b"AT", b"CS", b"DA", b"DS", b"DT", b"FL", b"FD", b"IS", b"LO", b"LT", b"PN",
    b"SH", b"SL", b"SS", b"ST", b"TM", b"UI", b"UL", b"US",
];

/// Where the parts of a checked file lie, in bytes from its start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extent {
    pub file_bytes: u64,
    pub transfer_syntax_uid: String,
    /// The PixelData element's value (for encapsulated data: its items up to the delimiter).
    pub pixel_data: Option<Range<u64>>,
    /// (For a deflated data set, offsets in the inflated data.)
    /// Bytes of the file to read for the header: up to the PixelData element.
    pub header_end: u64,
    /// Bytes of the file to read for the pixels: up to the end of the PixelData element.
    pub data_end: u64,
}

/// A deflated data set may inflate to at most this (the largest volume's pixels as 16 bit,
/// plus room for its header).
const MAX_INFLATED_BYTES: u64 = (crate::volume::MAX_VOXELS as u64) * 2 + (64 << 20);

/// Walks the file behind `source` (a Part 10 file: preamble, `DICM`, meta group, data set).
///
/// The error is the reason alone; the caller names the file.
pub fn check<R: Read + Seek>(source: &mut R, file_bytes: u64) -> Result<Extent, String> {
    let mut walker = Walker {
        source,
        file_bytes,
        big_endian: false,
        pixel_data: None,
        header_end: None,
        transfer_syntax_uid: String::new(),
    };
    walker.seek(132)?;
    // The meta group is always explicit VR little endian.
    let mut at = 132;
    loop {
        if at >= file_bytes {
            break;
        }
        let head = walker.peek_group(at)?;
        if head != 0x0002 {
            break;
        }
        at = walker.element(at, file_bytes, true, 0, true)?;
    }
    let ts = walker.transfer_syntax_uid.clone();
    let explicit = match ts.as_str() {
        "1.2.840.10008.1.2" => false,
        "1.2.840.10008.1.2.2" => {
            walker.big_endian = true;
            true
        }
        "1.2.840.10008.1.2.1.99" => return check_deflated(walker.source, at, file_bytes, ts),
        "" => return Err("no TransferSyntaxUID in the file meta group".into()),
        _ => true,
    };
    while at < file_bytes {
        at = walker.element(at, file_bytes, explicit, 0, false)?;
        if walker.pixel_data.is_some() {
            break;
        }
    }
    Ok(Extent {
        file_bytes,
        transfer_syntax_uid: ts,
        header_end: walker.header_end.unwrap_or(file_bytes),
        data_end: walker.pixel_data.as_ref().map_or(file_bytes, |r| r.end),
        pixel_data: walker.pixel_data,
    })
}

/// A deflated data set: inflated (bounded) and walked in memory. dicom-rs reads the whole
/// file then, so both ends are the file's end.
fn check_deflated<R: Read + Seek>(
    source: &mut R,
    data_start: u64,
    file_bytes: u64,
    transfer_syntax_uid: String,
) -> Result<Extent, String> {
    source
        .seek(SeekFrom::Start(data_start))
        .map_err(|e| format!("cannot seek to the deflated data set at byte {data_start}: {e}"))?;
    let mut inflated = Vec::new();
    flate2::read::DeflateDecoder::new(source)
        .take(MAX_INFLATED_BYTES + 1)
        .read_to_end(&mut inflated)
        .map_err(|e| format!("cannot inflate the deflated data set: {e}"))?;
    let n = inflated.len() as u64;
    if n > MAX_INFLATED_BYTES {
        return Err(format!(
            "the deflated data set inflates to more than {MAX_INFLATED_BYTES} bytes"
        ));
    }
    let mut cursor = std::io::Cursor::new(inflated);
    let mut walker = Walker {
        source: &mut cursor,
        file_bytes: n,
        big_endian: false,
        pixel_data: None,
        header_end: None,
        transfer_syntax_uid: transfer_syntax_uid.clone(),
    };
    let mut at = 0;
    while at < n && walker.pixel_data.is_none() {
        at = walker.element(at, n, true, 0, false)?;
    }
    Ok(Extent {
        file_bytes,
        transfer_syntax_uid,
        pixel_data: walker.pixel_data,
        header_end: file_bytes,
        data_end: file_bytes,
    })
}

/// Bytes per value of a VR with fixed-size values. A length that is not a multiple of it
/// desynchronises dicom-rs (it reads the whole values and leaves the rest to be read as the
/// next element's header), so such an element is refused rather than walked differently.
fn value_unit(vr: &[u8; 2]) -> u64 {
    match vr {
        b"SS" | b"US" | b"OW" => 2,
        b"SL" | b"UL" | b"FL" | b"AT" | b"OL" | b"OF" => 4,
        b"FD" | b"OD" | b"OV" | b"SV" | b"UV" => 8,
        _ => 1,
    }
}

/// The value size dicom-rs assumes in implicit VR: the dictionary's VR for the tag.
fn implicit_value_unit(tag: (u16, u16)) -> u64 {
    use dicom_core::dictionary::{DataDictionary as _, DataDictionaryEntry as _, VirtualVr};
    match dicom_dictionary_std::StandardDataDictionary
        .by_tag(dicom_core::Tag(tag.0, tag.1))
        .map(|entry| entry.vr())
    {
        Some(VirtualVr::Exact(vr)) => value_unit(&vr.to_bytes()),
        Some(VirtualVr::Xs | VirtualVr::Lt) => 2,
        _ => 1,
    }
}

struct Walker<'a, R> {
    source: &'a mut R,
    file_bytes: u64,
    big_endian: bool,
    pixel_data: Option<Range<u64>>,
    header_end: Option<u64>,
    transfer_syntax_uid: String,
}

impl<R: Read + Seek> Walker<'_, R> {
    fn seek(&mut self, at: u64) -> Result<(), String> {
        self.source
            .seek(SeekFrom::Start(at))
            .map(|_| ())
            .map_err(|e| format!("cannot seek to byte {at}: {e}"))
    }

    fn read<const N: usize>(&mut self, at: u64, end: u64) -> Result<[u8; N], String> {
        if at + N as u64 > end {
            return Err(format!(
                "element header at byte {at} runs past the end of its container (byte {end})"
            ));
        }
        self.seek(at)?;
        let mut buf = [0u8; N];
        self.source
            .read_exact(&mut buf)
            .map_err(|e| format!("cannot read byte {at}: {e}"))?;
        Ok(buf)
    }

    fn u16(&self, b: [u8; 2], big_endian: bool) -> u16 {
        if big_endian {
            u16::from_be_bytes(b)
        } else {
            u16::from_le_bytes(b)
        }
    }

    fn u32(&self, b: [u8; 4], big_endian: bool) -> u32 {
        if big_endian {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        }
    }

    fn peek_group(&mut self, at: u64) -> Result<u16, String> {
        let b = self.read::<2>(at, self.file_bytes)?;
        Ok(u16::from_le_bytes(b))
    }

    /// Reads the element at `at` (which must end by `end`), checks it, returns where the next
    /// one starts. `in_meta` selects little endian whatever the transfer syntax.
    fn element(
        &mut self,
        at: u64,
        end: u64,
        explicit: bool,
        depth: usize,
        in_meta: bool,
    ) -> Result<u64, String> {
        let big = self.big_endian && !in_meta && at >= 132;
        let head = self.read::<8>(at, end)?;
        let tag = (
            self.u16([head[0], head[1]], big),
            self.u16([head[2], head[3]], big),
        );
        let is_delimiter = tag.0 == 0xFFFE;
        let (vr, length, value_start) = if explicit && !is_delimiter {
            let vr = [head[4], head[5]];
            if SHORT_LENGTH_VRS.contains(&&vr) {
                (
                    Some(vr),
                    u32::from(self.u16([head[6], head[7]], big)),
                    at + 8,
                )
            } else {
                let len = self.read::<4>(at + 8, end)?;
                (Some(vr), self.u32(len, big), at + 12)
            }
        } else {
            (
                None,
                self.u32([head[4], head[5], head[6], head[7]], big),
                at + 8,
            )
        };
        if tag == PIXEL_DATA && depth == 0 {
            self.header_end = Some(at);
        }
        let unit = match vr {
            Some(vr) => value_unit(&vr),
            None if is_delimiter => 1,
            None => implicit_value_unit(tag),
        };
        if length != UNDEFINED && u64::from(length) % unit != 0 {
            return Err(format!(
                "element ({:04X},{:04X}) at byte {at} has {length} bytes, not a whole number of {unit}-byte values",
                tag.0, tag.1
            ));
        }
        if length == UNDEFINED {
            if depth >= MAX_DEPTH {
                return Err(format!(
                    "sequences nested deeper than {MAX_DEPTH} levels at byte {at}"
                ));
            }
            // An undefined length is a sequence (SQ, UN read as implicit, encapsulated pixels).
            let inner_explicit = explicit && vr != Some(*b"UN");
            let pixels = tag == PIXEL_DATA;
            let after = self.items(value_start, end, inner_explicit, depth + 1, pixels)?;
            if pixels && depth == 0 {
                self.pixel_data = Some(value_start..after);
            }
            return Ok(after);
        }
        let value_end = value_start + u64::from(length);
        if value_end > end {
            return Err(format!(
                "element ({:04X},{:04X}) at byte {at} declares {length} bytes, but only {} remain{}",
                tag.0,
                tag.1,
                end.saturating_sub(value_start),
                if end < self.file_bytes {
                    " in its item"
                } else {
                    " in the file"
                }
            ));
        }
        if tag == TRANSFER_SYNTAX && in_meta {
            if length > 64 {
                return Err(format!("TransferSyntaxUID of {length} bytes"));
            }
            self.seek(value_start)?;
            let mut uid = vec![0u8; length as usize];
            self.source
                .read_exact(&mut uid)
                .map_err(|e| format!("cannot read the TransferSyntaxUID: {e}"))?;
            self.transfer_syntax_uid = String::from_utf8_lossy(&uid)
                .trim_end_matches(['\0', ' '])
                .to_string();
        }
        if vr == Some(*b"SQ") && length > 0 {
            if depth >= MAX_DEPTH {
                return Err(format!(
                    "sequences nested deeper than {MAX_DEPTH} levels at byte {at}"
                ));
            }
            let mut item_at = value_start;
            while item_at < value_end {
                item_at = self.item(item_at, value_end, explicit, depth + 1, false)?;
            }
        }
        if tag == PIXEL_DATA && depth == 0 {
            self.pixel_data = Some(value_start..value_end);
        }
        Ok(value_end)
    }

    /// Items of an undefined-length sequence, up to and including its delimiter.
    fn items(
        &mut self,
        mut at: u64,
        end: u64,
        explicit: bool,
        depth: usize,
        fragments: bool,
    ) -> Result<u64, String> {
        loop {
            let head = self.read::<8>(at, end)?;
            let big = self.big_endian;
            let tag = (
                self.u16([head[0], head[1]], big),
                self.u16([head[2], head[3]], big),
            );
            if tag == SEQUENCE_END {
                return Ok(at + 8);
            }
            at = self.item(at, end, explicit, depth, fragments)?;
        }
    }

    /// One item (`FFFE,E000`): fragments are skipped, data set items are walked.
    fn item(
        &mut self,
        at: u64,
        end: u64,
        explicit: bool,
        depth: usize,
        fragment: bool,
    ) -> Result<u64, String> {
        let big = self.big_endian;
        let head = self.read::<8>(at, end)?;
        let tag = (
            self.u16([head[0], head[1]], big),
            self.u16([head[2], head[3]], big),
        );
        if tag != ITEM {
            return Err(format!(
                "expected an item at byte {at}, found ({:04X},{:04X})",
                tag.0, tag.1
            ));
        }
        let length = self.u32([head[4], head[5], head[6], head[7]], big);
        let start = at + 8;
        if length == UNDEFINED {
            if fragment {
                return Err(format!(
                    "pixel data fragment at byte {at} has an undefined length"
                ));
            }
            let mut inner = start;
            loop {
                let h = self.read::<8>(inner, end)?;
                let t = (self.u16([h[0], h[1]], big), self.u16([h[2], h[3]], big));
                if t == ITEM_END {
                    return Ok(inner + 8);
                }
                inner = self.element(inner, end, explicit, depth, false)?;
            }
        }
        let item_end = start + u64::from(length);
        if item_end > end {
            return Err(format!(
                "item at byte {at} declares {length} bytes, but only {} remain",
                end.saturating_sub(start)
            ));
        }
        if !fragment {
            let mut inner = start;
            while inner < item_end {
                inner = self.element(inner, item_end, explicit, depth, false)?;
            }
        }
        Ok(item_end)
    }
}

#[cfg(test)]
mod tests {
    // ok: test code
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::io::Cursor;

    fn file(dataset: &[u8], ts: &str) -> Vec<u8> {
        let mut out = vec![0u8; 128];
        out.extend_from_slice(b"DICM");
        let mut uid = ts.as_bytes().to_vec();
        if uid.len() % 2 == 1 {
            uid.push(0);
        }
        out.extend_from_slice(&[0x02, 0x00, 0x10, 0x00, b'U', b'I']);
        out.extend_from_slice(&(uid.len() as u16).to_le_bytes());
        out.extend_from_slice(&uid);
        out.extend_from_slice(dataset);
        out
    }

    fn element(
        group: u16,
        elem: u16,
        vr: &[u8; 2],
        value: &[u8],
        declared: Option<u32>,
    ) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&group.to_le_bytes());
        out.extend_from_slice(&elem.to_le_bytes());
        out.extend_from_slice(vr);
        let len = declared.unwrap_or(value.len() as u32);
        if matches!(vr, b"OB" | b"OW" | b"SQ") {
            out.extend_from_slice(&[0, 0]);
            out.extend_from_slice(&len.to_le_bytes());
        } else {
            out.extend_from_slice(&(len as u16).to_le_bytes());
        }
        out.extend_from_slice(value);
        out
    }

    const EXPLICIT: &str = "1.2.840.10008.1.2.1";

    #[test]
    fn finds_the_pixel_data_and_ignores_a_tail() {
        let mut ds = element(0x0028, 0x0010, b"US", &[2, 0], None);
        ds.extend(element(0x7FE0, 0x0010, b"OW", &[1, 2, 3, 4], None));
        ds.extend(vec![0xAB; 100]); // garbage after the pixels is never parsed
        let bytes = file(&ds, EXPLICIT);
        let n = bytes.len() as u64;
        let extent = check(&mut Cursor::new(bytes), n).unwrap(); // ok: test code
        assert_eq!(extent.transfer_syntax_uid, EXPLICIT);
        let pixels = extent.pixel_data.clone().unwrap(); // ok: test code
        assert_eq!(pixels.end - pixels.start, 4);
        assert_eq!(extent.data_end, n - 100);
        assert_eq!(extent.header_end, pixels.start - 12);
    }

    #[test]
    fn refuses_a_length_past_the_end_of_the_file() {
        let ds = element(0x7FE0, 0x0010, b"OW", &[1, 2], Some(0xFFFF_FFF0));
        let bytes = file(&ds, EXPLICIT);
        let n = bytes.len() as u64;
        let err = check(&mut Cursor::new(bytes), n).unwrap_err(); // ok: test code
        assert!(
            err.contains("declares 4294967280 bytes, but only 2 remain in the file"),
            "{err}"
        );
    }

    #[test]
    fn refuses_endless_nesting() {
        let mut ds = Vec::new();
        for _ in 0..40 {
            ds.extend(element(0x0008, 0x1115, b"SQ", &[], Some(UNDEFINED)));
            ds.extend_from_slice(&[0xFE, 0xFF, 0x00, 0xE0, 0xFF, 0xFF, 0xFF, 0xFF]);
        }
        let bytes = file(&ds, EXPLICIT);
        let n = bytes.len() as u64;
        let err = check(&mut Cursor::new(bytes), n).unwrap_err(); // ok: test code
        assert!(err.contains("nested deeper"), "{err}");
    }

    /// Found by the fuzzer: dicom-rs reads an unknown VR with a 4-byte length, so a 2-byte
    /// reading let 850 MB be allocated for a 64 KB file.
    #[test]
    fn an_unknown_vr_has_a_four_byte_length() {
        let mut ds = vec![0x08, 0x00, 0x18, 0x00, b'U', 0xBF, 44, 0];
        ds.extend_from_slice(b"2.25.1234567890"); // read as the length 0x35322E32
        ds.extend(vec![b'1'; 40]);
        let bytes = file(&ds, EXPLICIT);
        let n = bytes.len() as u64;
        let err = check(&mut Cursor::new(bytes), n).unwrap_err(); // ok: test code
        assert!(err.contains("declares 892481074 bytes"), "{err}");
    }

    /// Found by the fuzzer: an SL of 2 bytes is read by dicom-rs as no value, and the 2 bytes
    /// left over become the start of the next element, which then declared 4 GB.
    #[test]
    fn a_length_that_is_not_whole_values_is_refused() {
        let mut ds = element(0x0028, 0x0103, b"SL", &[1, 0], None);
        ds.extend(element(0x7FE0, 0x0010, b"OW", &[1, 2, 3, 4], None));
        let bytes = file(&ds, EXPLICIT);
        let n = bytes.len() as u64;
        let err = check(&mut Cursor::new(bytes), n).unwrap_err(); // ok: test code
        assert!(
            err.contains(
                "(0028,0103) at byte 160 has 2 bytes, not a whole number of 4-byte values"
            ),
            "{err}"
        );
    }
}
