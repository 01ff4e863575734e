#![allow(clippy::unwrap_used, missing_docs)]
use std::time::Instant;
fn main() {
    let dir = std::env::args().nth(1).unwrap();
    for _ in 0..3 {
        let t = Instant::now();
        let report = tessera_dicom::dicom::scan(dir.as_ref()).unwrap();
        let s = &report.series[0];
        let layout = tessera_dicom::dicom::layout(s, Default::default()).unwrap();
        let t1 = t.elapsed();
        let v = tessera_dicom::dicom::decode(s, &layout).unwrap();
        println!(
            "scan {:?} total {:?} {}",
            t1,
            t.elapsed(),
            v.voxels.is_i16()
        );
    }
}
