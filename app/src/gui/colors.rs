//! Colours the views share.

use egui::Color32;

/// Score colour: yellow at 0.3 or less, through orange, to red at 1.
pub fn score(score: f32) -> Color32 {
    let t = ((score - 0.3) / 0.7).clamp(0.0, 1.0);
    Color32::from_rgb(255, (220.0 * (1.0 - t)) as u8 + 20, 0)
}

pub const SELECTED: Color32 = Color32::from_rgb(0, 230, 255);
pub const CROSSHAIR: Color32 = Color32::from_rgba_premultiplied(60, 200, 60, 160);
pub const SEAM: Color32 = Color32::from_rgba_premultiplied(120, 160, 255, 200);
pub const ONLY_IN_PREVIOUS: Color32 = Color32::from_rgb(255, 0, 255);
pub const CURRENT_WINDOW: Color32 = Color32::from_rgb(80, 255, 120);
pub const FINISHED_WINDOW: Color32 = Color32::from_rgba_premultiplied(20, 60, 20, 60);
/// Slices interpolated over a gap: a colour no other overlay uses.
pub const FILLED_SLICE: Color32 = Color32::from_rgb(255, 120, 200);
pub const FILLED_SLICE_BAND: Color32 = Color32::from_rgba_premultiplied(90, 40, 70, 90);
/// Findings read from an SR: apart from the live run's score colours.
pub const IMPORTED: Color32 = Color32::from_rgb(90, 220, 140);
/// The ruler and a box being drawn.
pub const TOOL: Color32 = Color32::from_rgb(255, 235, 90);
/// Findings the reader added.
pub const ADDED: Color32 = Color32::from_rgb(120, 170, 255);
