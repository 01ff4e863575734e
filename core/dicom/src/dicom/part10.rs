//! A DICOM file as the Part 10 stream the reader walks (preamble, `DICM`, meta group, data
//! set): the file itself, or, for a file written without some of those (no preamble, `DICM`
//! first; a meta group with no `DICM`; or a bare data set, as `dcmconv -F` writes and pydicom
//! and Slicer read), the file's bytes behind the parts it lacks, in memory. A bare data set's
//! transfer syntax is told from its first element: explicit VR little endian when a VR follows
//! the tag, implicit otherwise (what DICOM's default is).

use std::fs::File;
use std::io::{Cursor, Read, Seek, SeekFrom};
use std::path::Path;

const EXPLICIT_LE: &str = "1.2.840.10008.1.2.1";
const IMPLICIT_LE: &str = "1.2.840.10008.1.2";
/// A file read into memory to be completed may be this large (a multi-frame series file is
/// larger than a slice, but not than this); larger ones are refused, not loaded.
const MAX_IN_MEMORY_BYTES: u64 = 2 << 30;
/// The VRs an explicit-VR element may carry.
const VRS: [&[u8; 2]; 34] = [
    b"AE", b"AS", b"AT", b"CS", b"DA", b"DS", b"DT", b"FL", b"FD", b"IS", b"LO", b"LT", b"OB",
    b"OD", b"OF", b"OL", b"OV", b"OW", b"PN", b"SH", b"SL", b"SQ", b"SS", b"ST", b"SV", b"TM",
    b"UC", b"UI", b"UL", b"UN", b"UR", b"US", b"UT", b"UV",
];

/// The bytes of a Part 10 stream.
pub(crate) enum Part10 {
    File(File),
    Memory(Cursor<Vec<u8>>),
}

impl Read for Part10 {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Self::File(f) => f.read(buf),
            Self::Memory(c) => c.read(buf),
        }
    }
}

impl Seek for Part10 {
    fn seek(&mut self, pos: SeekFrom) -> std::io::Result<u64> {
        match self {
            Self::File(f) => f.seek(pos),
            Self::Memory(c) => c.seek(pos),
        }
    }
}

/// What a file turned out to be.
pub(crate) enum Opened {
    /// A Part 10 stream and its length.
    Dicom(Part10, u64),
    /// Not DICOM, and why.
    NotDicom(String),
}

/// Opens `path` (a regular file; see [`crate::io::open_regular`]) as a Part 10 stream.
pub(crate) fn open(path: &Path) -> std::io::Result<Opened> {
    let (mut file, bytes) = crate::io::open_regular(path)?;
    let mut head = Vec::with_capacity(132);
    (&mut file).take(132).read_to_end(&mut head)?;
    if head.get(128..132) == Some(b"DICM") {
        file.seek(SeekFrom::Start(0))?;
        return Ok(Opened::Dicom(Part10::File(file), bytes));
    }
    let prefix: Vec<u8> = if head.starts_with(b"DICM") {
        vec![0; 128]
    } else if first_group(&head) == Some(0x0002) {
        [&[0u8; 128][..], b"DICM"].concat()
    } else if first_group(&head) == Some(0x0008) {
        let explicit = head
            .get(4..6)
            .is_some_and(|vr| VRS.iter().any(|v| v[..] == *vr));
        [
            &[0u8; 128][..],
            b"DICM",
            &meta_group(if explicit { EXPLICIT_LE } else { IMPLICIT_LE }),
        ]
        .concat()
    } else {
        return Ok(Opened::NotDicom(
            "no DICM marker at byte 128 and no DICOM data set at its start (not a DICOM file)"
                .into(),
        ));
    };
    if bytes > MAX_IN_MEMORY_BYTES {
        return Ok(Opened::NotDicom(format!(
            "a DICOM data set without the Part 10 preamble and meta group, of {bytes} bytes: over the {MAX_IN_MEMORY_BYTES} read that way"
        )));
    }
    let mut stream = prefix;
    file.seek(SeekFrom::Start(0))?;
    file.read_to_end(&mut stream)?;
    let length = stream.len() as u64;
    Ok(Opened::Dicom(Part10::Memory(Cursor::new(stream)), length))
}

/// The group of the element at the start of `head`, when it is little endian and the element
/// number is one a data set starts with (below 0x0100).
fn first_group(head: &[u8]) -> Option<u16> {
    let group = u16::from_le_bytes([*head.first()?, *head.get(1)?]);
    let element = u16::from_le_bytes([*head.get(2)?, *head.get(3)?]);
    (element < 0x0100).then_some(group)
}

/// A meta group holding only its length and `transfer_syntax` (explicit VR little endian, as
/// the meta group always is).
fn meta_group(transfer_syntax: &str) -> Vec<u8> {
    let mut uid = transfer_syntax.as_bytes().to_vec();
    if uid.len() % 2 == 1 {
        uid.push(0);
    }
    let mut ts = vec![0x02, 0x00, 0x10, 0x00, b'U', b'I'];
    ts.extend((uid.len() as u16).to_le_bytes());
    ts.extend(uid);
    let mut group = vec![0x02, 0x00, 0x00, 0x00, b'U', b'L', 4, 0];
    group.extend((ts.len() as u32).to_le_bytes());
    group.extend(ts);
    group
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_made_up_meta_group_holds_the_transfer_syntax_padded_to_even() {
        let meta = meta_group(IMPLICIT_LE);
        assert_eq!(&meta[..8], &[2, 0, 0, 0, b'U', b'L', 4, 0]);
        assert_eq!(
            u32::from_le_bytes([meta[8], meta[9], meta[10], meta[11]]),
            26
        );
        assert_eq!(&meta[12..18], &[2, 0, 0x10, 0, b'U', b'I']);
        assert_eq!(&meta[20..], b"1.2.840.10008.1.2\0");
        assert_eq!(first_group(&[8, 0, 5, 0, b'C', b'S']), Some(8));
        assert_eq!(first_group(b"hello"), None);
    }
}
