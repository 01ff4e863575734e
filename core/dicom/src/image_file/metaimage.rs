//! MetaImage (ITK's MetaIO): a `Key = Value` text header, then the voxels in the file its
//! `ElementDataFile` names (`.mhd`), or after the header (`LOCAL`, `.mha`), raw or zlib.
//! Positions are already LPS; `TransformMatrix` row `i` is axis `i`'s direction, as ITK writes.

use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use super::{Header, ImageFileError, SampleType, read_exact_capped};
use crate::geometry::Affine3;
use crate::volume::{SeriesInfo, Volume};

/// The most header text read before `ElementDataFile`: real headers are a few hundred bytes.
const MAX_HEADER_BYTES: u64 = 64 * 1024;

pub fn read(path: &Path) -> Result<Volume, ImageFileError> {
    let fail = ImageFileError::maker(path, super::Format::MetaImage.name());
    let (file, _) = crate::io::open_regular(path).map_err(|e| fail(e.to_string()))?;
    let mut reader = BufReader::new(file);
    let fields = fields(&mut reader).map_err(&fail)?;
    let header_end = reader
        .stream_position()
        .map_err(|e| fail(format!("reading its header: {e}")))?;
    let mut warnings = Vec::new();
    let header = header(&fields, &mut warnings).map_err(&fail)?;
    let bytes = header.check().map_err(&fail)?;
    let compressed = is_true(&fields, "CompressedData");
    let data = match data_source(path, &fields).map_err(&fail)? {
        DataSource::Local => read_data(reader, header_end, &fields, bytes, compressed),
        DataSource::File(data_path) => {
            let (file, _) = crate::io::open_regular(&data_path)
                .map_err(|e| fail(format!("its data file {}: {e}", data_path.display())))?;
            read_data(BufReader::new(file), 0, &fields, bytes, compressed)
                .map_err(|e| format!("its data file {}: {e}", data_path.display()))
        }
    }
    .map_err(&fail)?;
    header.volume(&data, info(path), warnings).map_err(&fail)
}

/// The separate data file a header names (`None` for `LOCAL`).
pub fn data_file(path: &Path) -> Result<Option<PathBuf>, String> {
    let (file, _) =
        crate::io::open_regular(path).map_err(|e| format!("cannot open the header: {e}"))?;
    let fields = fields(&mut BufReader::new(file))?;
    Ok(match data_source(path, &fields)? {
        DataSource::Local => None,
        DataSource::File(p) => Some(p),
    })
}

type Fields = Vec<(String, String)>;

/// The header's fields up to and including `ElementDataFile`, which MetaIO puts last.
fn fields(reader: &mut BufReader<std::fs::File>) -> Result<Fields, String> {
    let mut fields = Fields::new();
    let mut read = 0u64;
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = reader
            .by_ref()
            .take(MAX_HEADER_BYTES - read)
            .read_until(b'\n', &mut line)
            .map_err(|e| format!("reading its header: {e}"))?;
        read += n as u64;
        if n == 0 || (read >= MAX_HEADER_BYTES && line.last() != Some(&b'\n')) {
            return Err(format!(
                "no ElementDataFile line in its first {read} bytes: not a MetaImage header"
            ));
        }
        let text = std::str::from_utf8(&line)
            .map_err(|_| format!("header line {} is not text", fields.len() + 1))?;
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        let Some((key, value)) = text.split_once('=') else {
            return Err(format!(
                "header line {} ({text:?}) is not `Key = Value`: not a MetaImage header",
                fields.len() + 1
            ));
        };
        let key = key.trim().to_string();
        let last = key.eq_ignore_ascii_case("ElementDataFile");
        fields.push((key, value.trim().to_string()));
        if last {
            return Ok(fields);
        }
    }
}

fn field<'a>(fields: &'a Fields, key: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(key))
        .map(|(_, v)| v.as_str())
}

fn is_true(fields: &Fields, key: &str) -> bool {
    field(fields, key).is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

/// `count` numbers from the first of `keys` present, or `None` when none is.
fn numbers(fields: &Fields, keys: &[&str], count: usize) -> Result<Option<Vec<f64>>, String> {
    let Some((key, value)) = keys.iter().find_map(|k| field(fields, k).map(|v| (k, v))) else {
        return Ok(None);
    };
    let values: Vec<f64> = value
        .split_whitespace()
        .map(|t| t.parse::<f64>().ok().filter(|v| v.is_finite()))
        .collect::<Option<_>>()
        .ok_or_else(|| format!("{key} ({value:?}) is not a list of numbers"))?;
    if values.len() != count {
        return Err(format!("{key} has {} numbers, not {count}", values.len()));
    }
    Ok(Some(values))
}

fn header(fields: &Fields, warnings: &mut Vec<String>) -> Result<Header, String> {
    match field(fields, "NDims") {
        Some("3") => {}
        Some(n) => return Err(format!("NDims is {n}; only 3D volumes are read")),
        None => return Err("no NDims".into()),
    }
    if let Some(channels) = field(fields, "ElementNumberOfChannels")
        && channels != "1"
    {
        return Err(format!("{channels} values per voxel; a CT volume has one"));
    }
    let dims = numbers(fields, &["DimSize"], 3)?.ok_or("no DimSize")?;
    let size: [usize; 3] = std::array::from_fn(|i| {
        let d = dims[i];
        if d.fract() == 0.0 && d >= 0.0 && d <= f64::from(u32::MAX) {
            d as usize
        } else {
            0
        }
    });
    let spacing = match numbers(fields, &["ElementSpacing", "ElementSize"], 3)? {
        Some(s) => s,
        None => {
            warnings.push(
                "its header gives no ElementSpacing: 1 mm per voxel, as MetaIO assumes".into(),
            );
            vec![1.0; 3]
        }
    };
    let origin = match numbers(fields, &["Offset", "Position", "Origin"], 3)? {
        Some(o) => o,
        None => {
            warnings.push(
                "its header gives no Offset: voxel 0 at the origin, as MetaIO assumes".into(),
            );
            vec![0.0; 3]
        }
    };
    let matrix = match numbers(fields, &["TransformMatrix", "Rotation", "Orientation"], 9)? {
        Some(m) => m,
        None => {
            warnings.push(
                "its header gives no TransformMatrix: axes read as L, P, S, as MetaIO assumes"
                    .into(),
            );
            vec![1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
        }
    };
    let columns =
        std::array::from_fn(|axis| std::array::from_fn(|c| matrix[axis * 3 + c] * spacing[axis]));
    let samples = match field(fields, "ElementType").ok_or("no ElementType")? {
        "MET_UCHAR" => SampleType::U8,
        "MET_CHAR" => SampleType::I8,
        "MET_USHORT" => SampleType::U16,
        "MET_SHORT" => SampleType::I16,
        "MET_UINT" => SampleType::U32,
        "MET_INT" => SampleType::I32,
        "MET_FLOAT" => SampleType::F32,
        "MET_DOUBLE" => SampleType::F64,
        other => return Err(format!("its ElementType {other} is not read here")),
    };
    let big_endian = ["ElementByteOrderMSB", "BinaryDataByteOrderMSB"]
        .iter()
        .any(|k| is_true(fields, k));
    Ok(Header {
        size,
        world_from_voxel: Affine3::from_columns(columns, [origin[0], origin[1], origin[2]]),
        samples,
        big_endian,
        slope: 1.0,
        intercept: 0.0,
    })
}

enum DataSource {
    Local,
    File(PathBuf),
}

fn data_source(path: &Path, fields: &Fields) -> Result<DataSource, String> {
    let name = field(fields, "ElementDataFile").ok_or("no ElementDataFile")?;
    if name.eq_ignore_ascii_case("LOCAL") {
        return Ok(DataSource::Local);
    }
    if name.eq_ignore_ascii_case("LIST") || name.contains('%') {
        return Err(format!(
            "its voxels are spread over several files ({name}); one data file is read"
        ));
    }
    let base = path.parent().unwrap_or(Path::new(""));
    Ok(DataSource::File(base.join(name)))
}

/// The voxels from `start`, after `HeaderSize` bytes (-1: the last bytes of the file).
fn read_data(
    mut reader: BufReader<std::fs::File>,
    start: u64,
    fields: &Fields,
    bytes: usize,
    compressed: bool,
) -> Result<Vec<u8>, String> {
    let skip: i64 = match field(fields, "HeaderSize") {
        None => 0,
        Some(v) => v
            .parse()
            .map_err(|_| format!("HeaderSize ({v:?}) is not a whole number"))?,
    };
    let seek = |r: &mut BufReader<std::fs::File>, to: SeekFrom| {
        r.seek(to).map_err(|e| format!("finding its voxels: {e}"))
    };
    if skip == -1 && !compressed {
        seek(&mut reader, SeekFrom::End(-(bytes as i64)))?;
    } else if skip >= 0 {
        seek(
            &mut reader,
            SeekFrom::Start(start.saturating_add(skip as u64)),
        )?;
    } else {
        return Err(format!("HeaderSize is {skip}"));
    }
    if compressed {
        read_exact_capped(&mut flate2::read::ZlibDecoder::new(reader), bytes)
    } else {
        read_exact_capped(&mut reader, bytes)
    }
}

/// LUNA16 names each file after its series: that UID is the study's series UID.
fn info(path: &Path) -> SeriesInfo {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let is_uid = !stem.is_empty()
        && stem.len() <= 64
        && stem.chars().all(|c| c.is_ascii_digit() || c == '.');
    SeriesInfo {
        series_uid: if is_uid { stem.clone() } else { String::new() },
        series_description: path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        ..SeriesInfo::default()
    }
}
