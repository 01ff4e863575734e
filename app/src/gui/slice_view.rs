//! The three MPR views: slice textures with physical aspect, crosshair, boxes, seams, live
//! windows, orientation letters, corner text, HU under the pointer and a scale bar.
//!
//! Mouse: click sets the crosshair (shift-drag drags it), left-drag window/level, middle-drag
//! pan, right-drag zoom about the press, wheel or arrow keys scroll (each notch and press one
//! slice), double-click maximises a view.

use egui::{Align2, Color32, FontId, Pos2, Rect, Sense, Stroke, StrokeKind, Ui, pos2, vec2};
use tessera_dicom::view::{Plane, SlabMode, WindowLevel, box_on_slice, slab_image, slice_image};
use tessera_plan::blend::BlendMode;
use tessera_plan::grid_map::GridMap;
use tessera_plan::plan::TilePlan;

use super::corner_text::{self, Backed};
use super::run_panel::{Overlay, WindowState};
use super::study::{Study, TextureKey, plane_index};
use super::tools::{self, Phase, Tool};
use super::{colors, keys, overlays};

/// The 2x2 layout (axial, coronal / sagittal, study card), or one maximised view.
pub fn layout_ui(ui: &mut Ui, study: &mut Study, overlay: &Overlay<'_>) {
    let full = ui.available_rect_before_wrap();
    ui.allocate_rect(full, Sense::hover());
    study.hovered = None;
    if let Some(plane) = study.maximised {
        view_ui(ui, study, plane, full, overlay);
        return;
    }
    let half = full.size() / 2.0;
    let cell = |col: f32, row: f32| {
        Rect::from_min_size(full.min + vec2(col * half.x, row * half.y), half).shrink(2.0)
    };
    view_ui(ui, study, Plane::Axial, cell(0.0, 0.0), overlay);
    view_ui(ui, study, Plane::Coronal, cell(1.0, 0.0), overlay);
    view_ui(ui, study, Plane::Sagittal, cell(0.0, 1.0), overlay);
    card_ui(ui, study, cell(1.0, 1.0));
}

/// Maps continuous study voxel coordinates (voxel `j` spans `[j, j + 1)`) to the screen.
#[derive(Debug, Clone, Copy)]
struct Mapping {
    plane: Plane,
    image: Rect,
    size: [usize; 3],
}

impl Mapping {
    fn axes(&self) -> (usize, usize) {
        self.plane.image_axes()
    }

    fn pixels(&self) -> (f32, f32) {
        let (c, r) = self.axes();
        (self.size[c] as f32, self.size[r] as f32)
    }

    /// In-plane coordinates to the screen.
    fn screen(&self, column: f64, row_voxel: f64) -> Pos2 {
        let (w, h) = self.pixels();
        let (_, r) = self.axes();
        let row = if self.plane == Plane::Axial {
            row_voxel
        } else {
            self.size[r] as f64 - row_voxel
        };
        pos2(
            self.image.min.x + column as f32 * self.image.width() / w,
            self.image.min.y + row as f32 * self.image.height() / h,
        )
    }

    /// A screen point to in-plane voxel coordinates (continuous).
    fn voxel(&self, p: Pos2) -> (f64, f64) {
        let (w, h) = self.pixels();
        let (_, r) = self.axes();
        let column = f64::from((p.x - self.image.min.x) / self.image.width() * w);
        let row = f64::from((p.y - self.image.min.y) / self.image.height() * h);
        let row_voxel = if self.plane == Plane::Axial {
            row
        } else {
            self.size[r] as f64 - row
        };
        (column, row_voxel)
    }

    fn rect(&self, min: [f64; 3], max: [f64; 3]) -> Rect {
        let (c, r) = self.axes();
        Rect::from_two_pos(self.screen(min[c], min[r]), self.screen(max[c], max[r]))
    }
}

fn view_ui(ui: &mut Ui, study: &mut Study, plane: Plane, rect: Rect, overlay: &Overlay<'_>) {
    let id = ui.scope_id().with(("view", plane as u8));
    let response = ui.interact(rect, id, Sense::click_and_drag());
    let painter = ui.painter_at(rect);
    painter.rect_filled(rect, 0.0, Color32::BLACK);
    let k = plane_index(plane);
    let geometry = study.volume.geometry.clone();
    let size = geometry.size;
    let index = study.cursor[plane.normal_axis()];
    let Some(texture) = texture(ui, study, plane, index) else {
        return;
    };
    let (c, r) = plane.image_axes();
    let extent_mm = vec2(
        (size[c] as f64 * geometry.spacing_mm[c]) as f32,
        (size[r] as f64 * geometry.spacing_mm[r]) as f32,
    );
    let view = study.views[k];
    let fit = (rect.width() / extent_mm.x).min(rect.height() / extent_mm.y);
    let scale = fit * view.zoom;
    let image = Rect::from_center_size(rect.center() + view.pan, extent_mm * scale);
    let uv = Rect::from_min_max(pos2(0.0, 0.0), pos2(1.0, 1.0));
    painter.image(texture, image, uv, Color32::WHITE);
    let map = Mapping { plane, image, size };
    study.view_images[k] = Some(image);

    if plane == Plane::Axial {
        study.axes_edit.offer(selected_axes(overlay));
    }
    interact(ui, study, plane, &response, &map);
    draw_filled_slices(&painter, study, &map, index);
    draw_overlay(&painter, study, &map, overlay, index);
    if plane == Plane::Axial
        && let Some(axes) = study.axes_edit.dragging()
    {
        let screen = |x, y| map.screen(x, y);
        super::measures::draw_axes(&painter, axes, index, colors::TOOL, &screen);
    }
    tools::draw(
        &painter,
        &study.tools,
        &geometry,
        (plane, index),
        &|column, row| map.screen(column, row),
    );
    draw_crosshair(&painter, study, &map);
    let hovered = response.hover_pos().and_then(|p| {
        let (column, row) = map.voxel(p);
        let mut voxel = study.cursor;
        (column >= 0.0 && row >= 0.0).then(|| {
            voxel[c] = column as usize;
            voxel[r] = row as usize;
            voxel
        })
    });
    corner_text::draw(&painter, study, (plane, rect), hovered, scale);
}

/// The slice texture, rebuilt only when the slice or the window changes.
fn texture(ui: &Ui, study: &mut Study, plane: Plane, index: usize) -> Option<egui::TextureId> {
    let k = plane_index(plane);
    let key = TextureKey {
        index,
        window: study.window,
        slab: study.slabs[k],
    };
    if let Some((cached, handle)) = &study.textures[k]
        && *cached == key
    {
        return Some(handle.id());
    }
    let (voxels, geometry) = (&study.volume.voxels, &study.volume.geometry);
    let image = match study.slabs[k] {
        Some(slab) => slab_image(voxels, geometry, plane, index, slab, study.window)?,
        None => slice_image(voxels, geometry, plane, index, study.window)?,
    };
    let color = egui::ColorImage::from_gray([image.width, image.height], &image.pixels);
    let options = egui::TextureOptions::LINEAR;
    let handle = match study.textures[k].take() {
        Some((_, mut handle)) => {
            handle.set(color, options);
            handle
        }
        None => ui
            .ctx()
            .load_texture(format!("slice-{plane:?}"), color, options),
    };
    let id = handle.id();
    study.textures[k] = Some((key, handle));
    Some(id)
}

fn interact(ui: &Ui, study: &mut Study, plane: Plane, response: &egui::Response, map: &Mapping) {
    let k = plane_index(plane);
    let (c, r) = plane.image_axes();
    let set_cursor = |study: &mut Study, p: Pos2| {
        let (column, row) = map.voxel(p);
        let mut voxel = study.cursor.map(|v| v as f64);
        voxel[c] = column - 0.5;
        voxel[r] = row - 0.5;
        study.set_cursor(voxel);
    };
    if response.double_clicked() {
        study.maximised = if study.maximised == Some(plane) {
            None
        } else {
            Some(plane)
        };
    } else if response.clicked()
        && let Some(p) = response.interact_pointer_pos()
    {
        set_cursor(study, p);
    }
    let shift = ui.input(|i| i.modifiers.shift);
    // A drag starts once the pointer has moved a few pixels: on its first frame, take all of
    // the way from the press, so that nothing the reader dragged is lost.
    let (press_origin, total_drag) =
        ui.input(|i| (i.pointer.press_origin(), i.pointer.total_drag_delta()));
    let delta = if response.drag_started() {
        total_drag.unwrap_or_default()
    } else {
        response.drag_delta()
    };
    let primary = egui::PointerButton::Primary;
    let phase = if response.drag_started_by(primary) {
        Some(Phase::Start)
    } else if response.drag_stopped_by(primary) {
        Some(Phase::End)
    } else if response.dragged_by(primary) {
        Some(Phase::Move)
    } else {
        None
    };
    let at = if phase == Some(Phase::Start) {
        press_origin
    } else {
        response.interact_pointer_pos()
    };
    let axes_took = plane == Plane::Axial && !shift && drag_axes(study, map, phase, at);
    let tool_took = axes_took
        || match (phase, at) {
            (Some(phase), Some(p)) if !shift => {
                let (column, row) = map.voxel(p);
                let mut edge = study.cursor.map(|v| v as f64 + 0.5);
                edge[c] = column;
                edge[r] = row;
                study.tools.drag(plane, edge, phase)
            }
            _ => false,
        };
    if response.dragged_by(primary) && !tool_took {
        if shift {
            if let Some(p) = response.interact_pointer_pos() {
                set_cursor(study, p);
            }
        } else {
            // Right widens the window, down lowers the level (OHIF's convention).
            let w = &mut study.window;
            *w = WindowLevel {
                center_hu: w.center_hu - delta.y * 2.0,
                width_hu: (w.width_hu + delta.x * 4.0).max(1.0),
            };
        }
    }
    if response.dragged_by(egui::PointerButton::Middle) {
        study.views[k].pan += delta;
    }
    if response.dragged_by(egui::PointerButton::Secondary) {
        let v = &mut study.views[k];
        let zoom = (v.zoom * (1.0 - delta.y * 0.01)).clamp(0.2, 20.0);
        if let Some(anchor) = press_origin {
            v.pan = pan_zoomed_about(v.pan, map.image.center(), anchor, zoom / v.zoom);
        }
        v.zoom = zoom;
    }
    if response.hovered() {
        study.hovered = Some(plane);
        // Keys go through `keys::shortcut_presses` (they must not reach a text field twice);
        // the wheel is the pointer's, over this view.
        let slices = keys::whole_lines(&mut study.wheel_carried, keys::wheel_lines(ui.ctx()));
        if slices != 0 {
            study.scroll(plane, slices);
        }
    }
}

/// The pan that keeps the image point under `anchor` there when the zoom changes by `ratio`
/// (the image is centred on the view's centre plus the pan, so moving its centre is panning).
fn pan_zoomed_about(pan: egui::Vec2, image_centre: Pos2, anchor: Pos2, ratio: f32) -> egui::Vec2 {
    pan + (anchor - image_centre) * (1.0 - ratio)
}

/// Slices no file provided (interpolated because gaps were allowed): a hatched band across
/// the coronal and sagittal views at each one, and a frame with a label on the axial view
/// when it shows one. A reader must never take them for measured data.
fn draw_filled_slices(painter: &egui::Painter, study: &Study, map: &Mapping, index: usize) {
    let filled = &study.volume.filled_slices;
    if filled.is_empty() {
        return;
    }
    let stroke = Stroke::new(2.0, colors::FILLED_SLICE);
    if map.plane == Plane::Axial {
        if filled.iter().any(|f| f.index == index) {
            painter.rect_stroke(map.image, 0.0, stroke, StrokeKind::Inside);
            painter.text(
                map.image.center_top() + vec2(0.0, 6.0),
                Align2::CENTER_TOP,
                "INTERPOLATED SLICE: no file provides it",
                FontId::proportional(14.0),
                colors::FILLED_SLICE,
            );
        }
        return;
    }
    let (c, _) = map.axes();
    let width = map.size[c] as f64;
    for f in filled {
        let z = f.index as f64;
        let band = Rect::from_two_pos(map.screen(0.0, z), map.screen(width, z + 1.0));
        painter.rect_filled(band, 0.0, colors::FILLED_SLICE_BAND);
        painter.line_segment([band.left_center(), band.right_center()], stroke);
    }
}

fn draw_crosshair(painter: &egui::Painter, study: &Study, map: &Mapping) {
    if !study.show_crosshair {
        return;
    }
    let (c, r) = map.axes();
    let centre = study.cursor.map(|v| v as f64 + 0.5);
    let p = map.screen(centre[c], centre[r]);
    let stroke = Stroke::new(1.0, colors::CROSSHAIR);
    painter.line_segment(
        [pos2(map.image.min.x, p.y), pos2(map.image.max.x, p.y)],
        stroke,
    );
    painter.line_segment(
        [pos2(p.x, map.image.min.y), pos2(p.x, map.image.max.y)],
        stroke,
    );
}

fn draw_overlay(
    painter: &egui::Painter,
    study: &Study,
    map: &Mapping,
    overlay: &Overlay<'_>,
    index: usize,
) {
    let n = map.plane.normal_axis();
    let slice = index as f64 + 0.5;
    let review = overlay.review;
    let show_seams = review.is_some_and(|r| r.show_seams);
    let show_weights = review.is_some_and(|r| r.show_weights);
    let study_size = study.volume.geometry.size;
    // The last run's field, on the grid that run used (a run in flight may use another).
    if review.is_some_and(|r| r.show_lungs)
        && let Some(record) = overlay.record
        && let Some(field) = record.lung_field.as_deref()
    {
        let grid = GridMap::new(&record.model_geometry, &study.volume.geometry);
        overlays::draw_lung_field(
            painter,
            map.image,
            (map.plane, index),
            field,
            &grid,
            study_size,
        );
    }
    if let Some((plan, grid)) = overlay.plan {
        let grid = GridMap::new(grid, &study.volume.geometry);
        if show_weights {
            overlays::draw_weights(
                painter,
                map.image,
                (map.plane, index),
                plan,
                &grid,
                study_size,
            );
        }
        if show_seams {
            draw_seams(painter, map, plan, &grid);
        }
    }
    for (lo, hi, state) in &overlay.windows {
        if slice < lo[n] || slice >= hi[n] {
            continue;
        }
        let rect = map.rect(*lo, *hi);
        match state {
            WindowState::Finished => {
                painter.rect_filled(rect, 0.0, colors::FINISHED_WINDOW);
            }
            WindowState::Current => {
                painter.rect_stroke(
                    rect,
                    0.0,
                    Stroke::new(2.0, colors::CURRENT_WINDOW),
                    StrokeKind::Inside,
                );
            }
        }
    }
    draw_detections(painter, map, overlay, index);
    draw_imported(painter, map, overlay, index);
    draw_added(painter, study, map, overlay, index);
}

/// The findings the reader added to the last run's review.
fn draw_added(
    painter: &egui::Painter,
    study: &Study,
    map: &Mapping,
    overlay: &Overlay<'_>,
    index: usize,
) {
    let Some(review) = overlay.review.and_then(|r| r.reading.review.as_ref()) else {
        return;
    };
    for (i, added) in review.added.iter().enumerate() {
        let placed = tools::study_box(added.center_lps_mm, added.size_mm, &study.volume.geometry);
        let Some(b) = placed.and_then(|b| box_on_slice(b.min, b.max, map.size, map.plane, index))
        else {
            continue;
        };
        let rect = image_rect(map, b);
        let selected = overlay
            .review
            .is_some_and(|r| r.selected_added() == Some(i));
        let style = if selected {
            (2.5, colors::SELECTED)
        } else {
            (1.5, colors::ADDED)
        };
        labelled_box(painter, rect, style, &format!("R{}", i + 1), true);
    }
}

/// An SR's findings on this slice, labelled with their tracking identifiers.
fn draw_imported(painter: &egui::Painter, map: &Mapping, overlay: &Overlay<'_>, index: usize) {
    let Some(imported) = overlay.imported else {
        return;
    };
    for (i, (finding, placed)) in imported.findings.iter().zip(&imported.boxes).enumerate() {
        let Some(b) = placed else {
            continue;
        };
        let Some(rect) = box_on_slice(b.min, b.max, map.size, map.plane, index) else {
            continue;
        };
        let rect = image_rect(map, rect);
        let width = if imported.selected == Some(i) {
            2.5
        } else {
            1.5
        };
        labelled_box(
            painter,
            rect,
            (width, colors::IMPORTED),
            &finding.tracking_id,
            false,
        );
    }
}

/// A box's outline and its label, above it or below it.
fn labelled_box(
    painter: &egui::Painter,
    rect: Rect,
    (width, color): (f32, Color32),
    label: &str,
    above: bool,
) {
    painter.rect_stroke(rect, 0.0, Stroke::new(width, color), StrokeKind::Outside);
    let (at, align) = if above {
        (rect.left_top() - vec2(0.0, 2.0), Align2::LEFT_BOTTOM)
    } else {
        (rect.left_bottom() + vec2(0.0, 2.0), Align2::LEFT_TOP)
    };
    Backed(painter).text(at, align, label, FontId::proportional(11.0), color);
}

/// The last run's boxes on this slice, coloured by score (the selected one highlighted), and
/// with parity on, the previous run's boxes this one did not find.
fn draw_detections(painter: &egui::Painter, map: &Mapping, overlay: &Overlay<'_>, index: usize) {
    let review = overlay.review;
    let Some(record) = overlay.record else {
        return;
    };
    let threshold = review.map_or(0.0, |r| r.threshold);
    let selected = review.and_then(|r| r.selected_detection());
    for (i, d) in record.report.detections.iter().enumerate() {
        if d.score < threshold {
            continue;
        }
        let Some([x0, y0, x1, y1]) =
            box_on_slice(d.box_voxel.min, d.box_voxel.max, map.size, map.plane, index)
        else {
            continue;
        };
        let rect = image_rect(map, [x0, y0, x1, y1]);
        let (color, width) = if selected == Some(i) {
            (colors::SELECTED, 2.5)
        } else {
            (colors::score(d.score), 1.5)
        };
        labelled_box(
            painter,
            rect,
            (width, color),
            &format!("{:.2}", d.score),
            true,
        );
        if map.plane == Plane::Axial
            && let Some(axes) = drawn_axes(review, record, i)
        {
            super::measures::draw_axes(painter, axes, index, color, &|x, y| map.screen(x, y));
        }
    }
    // Parity against the previous run: boxes it found that this run did not.
    if let (Some(review), Some(previous)) = (review, overlay.previous)
        && review.compare
    {
        for i in review.only_in_previous() {
            let Some(d) = previous.report.detections.get(i) else {
                continue;
            };
            if let Some(b) =
                box_on_slice(d.box_voxel.min, d.box_voxel.max, map.size, map.plane, index)
            {
                let rect = image_rect(map, b);
                painter.rect_stroke(
                    rect,
                    0.0,
                    Stroke::new(1.5, colors::ONLY_IN_PREVIOUS),
                    StrokeKind::Outside,
                );
            }
        }
    }
}

/// The selected finding's axes (the reader's, else as measured), to drag.
fn selected_axes(overlay: &Overlay<'_>) -> Option<(usize, tessera_core::measure::AxialAxes)> {
    let (record, review) = overlay.record.zip(overlay.review)?;
    let i = review.selected_detection()?;
    record.report.detections.get(i)?;
    drawn_axes(Some(review), record, i).map(|axes| (i, *axes))
}

/// A primary drag on the axial view that took (or moves, or drops) one of the selected
/// finding's axis ends.
fn drag_axes(study: &mut Study, map: &Mapping, phase: Option<Phase>, at: Option<Pos2>) -> bool {
    let (Some(phase), Some(p)) = (phase, at) else {
        return false;
    };
    let (column, row) = map.voxel(p);
    let xy = [column - 0.5, row - 0.5];
    let edit = &mut study.axes_edit;
    match phase {
        Phase::Start => {
            let (w, h) = map.pixels();
            let px_per_voxel = [map.image.width() / w, map.image.height() / h];
            edit.press(study.cursor[2], xy, px_per_voxel)
        }
        Phase::Move if edit.end.is_some() => {
            edit.moved(xy);
            true
        }
        Phase::End if edit.end.is_some() => {
            let g = &study.volume.geometry;
            edit.released(xy, [g.spacing_mm[0], g.spacing_mm[1]]);
            true
        }
        _ => false,
    }
}

/// A detection's axes as the reader drew them, or as measured (a box's sides only when it is
/// selected).
fn drawn_axes<'a>(
    review: Option<&'a super::review::ReviewPanel>,
    record: &'a super::run_panel::RunRecord,
    i: usize,
) -> Option<&'a tessera_core::measure::AxialAxes> {
    let reader = super::measures::reader_axes(review.and_then(|r| r.reading.review.as_ref()), i);
    // A box's sides only for the selected finding: the reader may draw its axes from them.
    let selected = review.is_some_and(|r| r.selected_detection() == Some(i));
    let measured = record.report.detections[i]
        .measurements
        .as_ref()
        .filter(|m| selected || m.method != tessera_core::measure::Method::Box)
        .map(|m| &m.axes);
    reader.or(measured)
}

/// The plan's seams on this slice, and in blended modes the bands where windows overlap.
fn draw_seams(painter: &egui::Painter, map: &Mapping, plan: &TilePlan, grid: &GridMap) {
    let (c, r) = map.axes();
    let stroke = Stroke::new(1.0, colors::SEAM);
    let size = map.size;
    for s in plan.seams(c) {
        let x = grid.study_edge(c, s);
        painter.line_segment([map.screen(x, 0.0), map.screen(x, size[r] as f64)], stroke);
    }
    for s in plan.seams(r) {
        let y = grid.study_edge(r, s);
        painter.line_segment([map.screen(0.0, y), map.screen(size[c] as f64, y)], stroke);
    }
    if plan.spec.blend != BlendMode::Halo {
        // Overlap bands: where consecutive windows along an in-plane axis share voxels.
        for axis in [c, r] {
            for (lo, hi) in plan.overlap_bands(axis) {
                let lo = grid.study_edge(axis, lo);
                let hi = grid.study_edge(axis, hi);
                let mut min = [0.0; 3];
                let mut max = size.map(|v| v as f64);
                min[axis] = lo;
                max[axis] = hi;
                painter.rect_filled(map.rect(min, max), 0.0, colors::SEAM.gamma_multiply(0.15));
            }
        }
    }
}

/// A `[column0, row0, column1, row1]` image rectangle (as `box_on_slice` gives) on screen.
fn image_rect(map: &Mapping, [x0, y0, x1, y1]: [usize; 4]) -> Rect {
    let (w, h) = map.pixels();
    let sx = map.image.width() / w;
    let sy = map.image.height() / h;
    Rect::from_min_max(
        map.image.min + vec2(x0 as f32 * sx, y0 as f32 * sy),
        map.image.min + vec2(x1 as f32 * sx, y1 as f32 * sy),
    )
}

/// Each view's slab: off or a thickness (the steps, or typed), and its projection.
fn slab_ui(ui: &mut Ui, study: &mut Study) {
    ui.label("Slab (S, M: the view under the pointer, else all)");
    for (k, plane) in super::study::PLANES.into_iter().enumerate() {
        ui.horizontal(|ui| {
            let name = format!("{plane:?}");
            ui.add_sized(
                [56.0, ui.spacing().interact_size.y],
                egui::Label::new(&name),
            );
            let slab = &mut study.slabs[k];
            let mode = slab.map_or(SlabMode::Mip, |s| s.mode);
            if ui.selectable_label(slab.is_none(), "off").clicked() {
                *slab = None;
            }
            for t in super::study::SLAB_STEPS_MM {
                let on = slab.is_some_and(|s| (s.thickness_mm - t).abs() < 1e-9);
                if ui.selectable_label(on, format!("{t:.0}")).clicked() {
                    *slab = Some(tessera_dicom::view::Slab {
                        thickness_mm: t,
                        mode,
                    });
                }
            }
            let Some(slab) = slab else {
                return;
            };
            ui.add(
                egui::DragValue::new(&mut slab.thickness_mm)
                    .range(0.0..=200.0)
                    .speed(0.5)
                    .suffix(" mm"),
            );
            let combo = egui::ComboBox::from_id_salt(("slab mode", k))
                .selected_text(slab.mode.label())
                .width(70.0)
                .show_ui(ui, |ui| {
                    for m in SlabMode::ALL {
                        ui.selectable_value(&mut slab.mode, m, m.label());
                    }
                });
            let mode = slab.mode.label();
            combo.response.widget_info(|| {
                let mut info = egui::WidgetInfo::labeled(
                    egui::Role::ComboBox,
                    true,
                    format!("{name} projection"),
                );
                info.current_text_value = Some(mode.into());
                info
            });
        });
    }
}

/// The fourth cell: what is open and how to drive the views.
fn card_ui(ui: &mut Ui, study: &mut Study, rect: Rect) {
    let v = &study.volume;
    let g = &v.geometry;
    let mut child = ui.new_child(egui::UiBuilder::new().max_rect(rect.shrink(8.0)));
    child.heading("Study");
    let name = study.source.file_name().map_or_else(
        || study.source.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    child
        .label(name)
        .on_hover_text(study.source.display().to_string());
    child.label(format!(
        "{} voxels, {:.3} x {:.3} x {:.3} mm{}",
        g.size_label(),
        g.spacing_mm[0],
        g.spacing_mm[1],
        g.spacing_mm[2],
        if g.tilt_deg().abs() > 0.01 {
            format!(", gantry tilt {:.1}°", g.tilt_deg())
        } else {
            String::new()
        }
    ));
    for w in &v.warnings {
        child.colored_label(child.visuals().warn_fg_color, w);
    }
    child.separator();
    slab_ui(&mut child, study);
    child.horizontal(|ui| {
        ui.checkbox(&mut study.show_crosshair, "Crosshair (C)");
        ui.checkbox(&mut study.show_text, "Corner text (H)");
    });
    child.horizontal(|ui| {
        ui.label("Left-drag:");
        let tool = &mut study.tools.tool;
        ui.selectable_value(tool, Tool::Navigate, "window/level");
        ui.selectable_value(tool, Tool::Ruler, "ruler");
        ui.selectable_value(tool, Tool::AddFinding, "add finding");
    });
    let rulers = study.tools.rulers.len();
    if rulers > 0 && child.button(format!("Clear {rulers} ruler(s)")).clicked() {
        study.tools.rulers.clear();
    }
    child.weak(
        "Click: crosshair (shift-drag to drag it) · left-drag: the tool above · middle-drag: pan · right-drag: zoom about the press · wheel/arrows: slice · double-click: maximise · 0: reset views and window (the model's, else the file's)",
    );
    child.weak(format!(
        "Presets: 1 lung · 2 soft tissue · 3 bone · 4 brain · 5 the file's own{}",
        if study.file_window().is_none() {
            " (none here)"
        } else {
            ""
        }
    ));
}

#[cfg(test)]
mod tests {
    use super::pan_zoomed_about;
    use egui::{pos2, vec2};

    #[test]
    fn zooming_keeps_the_point_under_the_anchor_in_place() {
        let (pan, centre, anchor) = (vec2(12.0, -7.0), pos2(400.0, 300.0), pos2(330.0, 410.0));
        for ratio in [0.5_f32, 1.0, 1.25, 3.0] {
            let moved = pan_zoomed_about(pan, centre, anchor, ratio);
            let new_centre = centre + (moved - pan);
            // The anchor's offset from the image centre scales with the image.
            let offset = (anchor - new_centre) / ratio;
            assert!(
                (offset - (anchor - centre)).length() < 1e-3,
                "ratio {ratio}"
            );
        }
    }
}
