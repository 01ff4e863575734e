//! The viewer's keyboard shortcuts and the wheel, read as events so that every press and notch
//! counts once.
//!
//! A shortcut must never act on a key meant for a text field. Under a slow (software) renderer
//! a click on a field and the keys typed right after it (Ctrl+A, "0.10", Enter) can reach egui
//! in one frame, before the field has the keyboard, and a check made while the panels were
//! drawn saw no focus and read "A" as accept (measured under Xvfb with xdotool). So shortcuts
//! are read once, after every widget has run, and only when no widget had the keyboard at the
//! frame's start nor has it at its end; a key held with Ctrl, Alt or Cmd is never a shortcut.

use egui::{Context, Event, Key, Modifiers, MouseWheelUnit};

/// Slices a Page Up / Page Down key or a page of wheel scroll moves.
pub const PAGE_SLICES: i64 = 10;

/// One key press (auto-repeat included) with no Ctrl, Alt or Cmd held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Press {
    pub key: Key,
    pub shift: bool,
}

/// Whether a widget has the keyboard: a text field, or a number field being typed into.
pub fn typing(ctx: &Context) -> bool {
    ctx.memory(|m| m.focused().is_some())
}

/// This frame's shortcut presses, in order; none when a widget had the keyboard at the start
/// of the frame (`typing_at_start`, from [`typing`] before any widget ran) or has it now.
pub fn shortcut_presses(ctx: &Context, typing_at_start: bool) -> Vec<Press> {
    if typing_at_start || typing(ctx) {
        return Vec::new();
    }
    ctx.input(|i| {
        i.events
            .iter()
            .filter_map(|event| match event {
                Event::Key {
                    key,
                    pressed: true,
                    modifiers,
                    ..
                } if !held_for_a_command(*modifiers) => Some(Press {
                    key: *key,
                    shift: modifiers.shift,
                }),
                _ => None,
            })
            .collect()
    })
}

fn held_for_a_command(m: Modifiers) -> bool {
    m.ctrl || m.alt || m.command || m.mac_cmd
}

/// This frame's vertical wheel scroll in lines (a notch is one), from the raw events: egui's
/// smoothed scroll spreads a notch over several frames, and counting frames lost or added
/// slices. A touchpad's points are converted at egui's own line height.
pub fn wheel_lines(ctx: &Context) -> f32 {
    let line_points = ctx.options(|o| o.input_options.line_scroll_speed).max(1.0);
    ctx.input(|i| {
        i.events
            .iter()
            .map(|event| match event {
                Event::MouseWheel { unit, delta, .. } => match unit {
                    MouseWheelUnit::Line => delta.y,
                    MouseWheelUnit::Point => delta.y / line_points,
                    MouseWheelUnit::Page => delta.y * PAGE_SLICES as f32,
                },
                _ => 0.0,
            })
            .sum()
    })
}

/// Whole lines out of `lines` plus what was left over before; the rest is kept for the next
/// frame, so that a touchpad's small steps add up. A sum within rounding of a whole number is
/// that number (seven sevenths of a line are one line, not 0.9999999).
pub fn whole_lines(carried: &mut f32, lines: f32) -> i64 {
    const ROUNDING: f32 = 1e-3;
    let total = *carried + lines;
    let whole = if (total - total.round()).abs() < ROUNDING {
        total.round()
    } else {
        total.trunc()
    };
    *carried = total - whole;
    whole as i64
}

#[cfg(test)]
mod tests {
    use super::whole_lines;

    #[test]
    fn small_steps_add_up_to_whole_lines_and_nothing_is_lost() {
        let mut carried = 0.0;
        let moved: i64 = (0..7).map(|_| whole_lines(&mut carried, 3.0 / 7.0)).sum();
        assert_eq!(moved, 3);
        assert!(carried.abs() < 1e-3);
        assert_eq!(whole_lines(&mut carried, -0.5), 0);
        assert_eq!(whole_lines(&mut carried, -0.5), -1);
        assert_eq!(whole_lines(&mut carried, 2.0), 2);
        assert!(carried.abs() < 1e-3);
    }
}
