//! The reader's correction of a finding's axes: on the axial slice they were measured on,
//! the selected finding's four axis ends are handles; dragging one moves it, and on release
//! the new axes (their lengths through the pixel spacing) go to the review.

use tessera_core::measure::AxialAxes;

/// A press this close to an end (screen pixels) takes it.
pub const GRAB_PX: f32 = 8.0;

/// The axes on offer and the one being dragged.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct AxesEdit {
    /// The selected finding's axes: `(finding, axes)`, offered each frame.
    pub offered: Option<(usize, AxialAxes)>,
    /// The end being dragged: 0 and 1 the long axis', 2 and 3 the short axis'.
    pub end: Option<usize>,
    /// Axes the reader finished dragging, for the review to take.
    pub corrected: Option<(usize, AxialAxes)>,
}

impl AxesEdit {
    /// Offers `axes` (not while one is being dragged, which keeps its own copy).
    pub fn offer(&mut self, axes: Option<(usize, AxialAxes)>) {
        if self.end.is_none() {
            self.offered = axes;
        }
    }

    /// A press at `at` (study voxels `[x, y]`, centres on integers) on slice `slice`, with
    /// `px_per_voxel` screen pixels per voxel along x and y: takes the nearest end within
    /// [`GRAB_PX`]. Returns whether it did.
    pub fn press(&mut self, slice: usize, at: [f64; 2], px_per_voxel: [f32; 2]) -> bool {
        let Some((_, axes)) = self.offered.filter(|(_, a)| a.slice == slice) else {
            return false;
        };
        let distance = |p: [f64; 2]| {
            let dx = (p[0] - at[0]) as f32 * px_per_voxel[0];
            let dy = (p[1] - at[1]) as f32 * px_per_voxel[1];
            dx.hypot(dy)
        };
        self.end = ends(&axes)
            .into_iter()
            .enumerate()
            .map(|(i, p)| (i, distance(p)))
            .filter(|(_, d)| *d <= GRAB_PX)
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(i, _)| i);
        self.end.is_some()
    }

    /// The dragged end moved to `at`.
    pub fn moved(&mut self, at: [f64; 2]) {
        if let (Some(end), Some((_, axes))) = (self.end, &mut self.offered) {
            match end {
                0 | 1 => axes.long_axis_ends[end] = at,
                _ => axes.short_axis_ends[end - 2] = at,
            }
        }
    }

    /// The drag ended at `at`: the axes, their lengths on pixels of `pixel_mm`, become the
    /// correction (the longer one the long axis).
    pub fn released(&mut self, at: [f64; 2], pixel_mm: [f64; 2]) {
        self.moved(at);
        if self.end.take().is_none() {
            return;
        }
        if let Some((finding, a)) = self.offered {
            let mut axes =
                AxialAxes::from_ends(a.slice, a.long_axis_ends, a.short_axis_ends, pixel_mm);
            if axes.short_axis_mm > axes.long_axis_mm {
                axes = AxialAxes::from_ends(a.slice, a.short_axis_ends, a.long_axis_ends, pixel_mm);
            }
            self.offered = Some((finding, axes));
            self.corrected = Some((finding, axes));
        }
    }

    /// The axes being dragged, to draw over the stored ones.
    pub fn dragging(&self) -> Option<&AxialAxes> {
        self.end.and(self.offered.as_ref()).map(|(_, a)| a)
    }
}

fn ends(a: &AxialAxes) -> [[f64; 2]; 4] {
    [
        a.long_axis_ends[0],
        a.long_axis_ends[1],
        a.short_axis_ends[0],
        a.short_axis_ends[1],
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn axes() -> AxialAxes {
        AxialAxes::from_ends(
            7,
            [[10.0, 10.0], [20.0, 10.0]],
            [[15.0, 6.0], [15.0, 14.0]],
            [0.5, 0.5],
        )
    }

    #[test]
    fn dragging_an_end_corrects_the_axes_and_lengths_follow() {
        let mut edit = AxesEdit::default();
        edit.offer(Some((3, axes())));
        // 4 screen pixels per voxel: a press 1 voxel (4 px) from the long axis' far end takes
        // it; one on another slice or 3 voxels away does not.
        assert!(!edit.press(6, [21.0, 10.0], [4.0, 4.0]));
        assert!(!edit.press(7, [23.0, 10.0], [4.0, 4.0]));
        assert!(edit.press(7, [21.0, 10.0], [4.0, 4.0]));
        assert_eq!(edit.end, Some(1));
        edit.moved([24.0, 10.0]);
        assert_eq!(
            edit.dragging().map(|a| a.long_axis_ends[1]),
            Some([24.0, 10.0])
        );
        edit.released([26.0, 10.0], [0.5, 0.5]);
        let Some((finding, corrected)) = edit.corrected else {
            panic!("the release made a correction");
        };
        assert_eq!(finding, 3);
        assert_eq!(
            (corrected.long_axis_mm, corrected.short_axis_mm),
            (8.0, 4.0)
        );
        assert_eq!(corrected.mean_diameter_mm(), 6.0);
        assert_eq!(edit.dragging(), None);
    }

    #[test]
    fn a_short_axis_dragged_longer_than_the_long_becomes_the_long() {
        let mut edit = AxesEdit::default();
        edit.offer(Some((0, axes())));
        assert!(edit.press(7, [15.0, 14.0], [4.0, 4.0]));
        edit.released([15.0, 30.0], [0.5, 0.5]);
        let Some((_, corrected)) = edit.corrected else {
            panic!("the release made a correction");
        };
        assert_eq!(
            (corrected.long_axis_mm, corrected.short_axis_mm),
            (12.0, 5.0)
        );
        assert_eq!(corrected.long_axis_ends, [[15.0, 6.0], [15.0, 30.0]]);
    }
}
