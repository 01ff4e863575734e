//! The reader's pass over the last run's findings: next/previous (J/K, Space/Shift+Space),
//! accept/reject/unsure (A/R/U or buttons), a note, the reader's name. Every change is saved
//! at once (one file per run in the user's data folder), and a run that finds the same
//! detections again gets its review back.

use std::path::PathBuf;

use egui::{Key, Ui};
use tessera_core::report::DetectionReport;
use tessera_core::review::{AddedFinding, Decision, Review, run_id};

use super::keys::Press;
use super::review::Row;
use crate::common::settings::Profile;

/// The decisions on the last run, and the note being typed.
#[derive(Debug, Default)]
pub struct Reading {
    pub review: Option<Review>,
    /// Where this run's review is kept (`None`: nowhere, as in tests without a data folder).
    path: Option<PathBuf>,
    /// The note field's text for the selected finding (saved when it loses focus).
    note: String,
    note_for: Option<Row>,
    /// The reader was told once that no name is set.
    told_unnamed: bool,
}

/// What the reader asked for with a key or a button.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Next,
    Previous,
    Decide(Decision),
}

impl Reading {
    /// A new run: its stored review if there is one (same detections), else a fresh one.
    /// Returns a line for the message bar.
    pub fn run_finished(&mut self, report: &DetectionReport, profile: &Profile) -> Option<String> {
        self.note_for = None;
        let id = run_id(report);
        self.path = profile.places.review_path(&id);
        let stored = self.path.clone().filter(|p| p.is_file());
        let reader = &profile.settings.reader;
        match stored.map(|path| (Review::read_for(&path, report), path)) {
            Some((Ok(review), path)) => {
                let decided = review
                    .findings
                    .iter()
                    .filter(|f| f.decision.is_some())
                    .count();
                self.review = Some(review);
                Some(format!(
                    "restored the review of this run ({decided} decision(s)) from {}",
                    path.display()
                ))
            }
            Some((Err(e), _)) => {
                self.review = Some(Review::new(report, reader));
                Some(format!("the stored review could not be used: {e:#}"))
            }
            None => {
                self.review = Some(Review::new(report, reader));
                None
            }
        }
    }

    /// Records `reader`'s `decision` on finding `index` and saves the review.
    pub fn decide(&mut self, index: usize, decision: Decision, reader: &str) -> Result<(), String> {
        let Some(review) = &mut self.review else {
            return Ok(());
        };
        reader.clone_into(&mut review.reader);
        review.decide(index, Some(decision), &tessera_core::sr::now_dt());
        self.save()?;
        if reader.trim().is_empty() && !std::mem::replace(&mut self.told_unnamed, true) {
            return Err("decision saved, but no reader is named: type your name in the Reader field, or the SR will not say who decided".into());
        }
        Ok(())
    }

    fn save(&self) -> Result<(), String> {
        let (Some(review), Some(path)) = (&self.review, &self.path) else {
            return Ok(());
        };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("creating {}: {e}", parent.display()))?;
        }
        review.write(path).map_err(|e| format!("{e:#}"))
    }

    /// Adds a finding the reader drew, and saves the review.
    pub fn add(&mut self, finding: AddedFinding) -> Result<(), String> {
        let Some(review) = &mut self.review else {
            return Err("run the detector first: added findings belong to a run's review".into());
        };
        review.added.push(finding);
        self.save()
    }

    /// The decision on finding `index`, if any.
    pub fn decision(&self, index: usize) -> Option<Decision> {
        self.review.as_ref()?.of(index)?.decision
    }

    /// The review step a shortcut press asks for, if any: J/K or Space/Shift+Space move,
    /// A/R/U decide.
    pub fn step_of(press: Press) -> Option<Step> {
        match press.key {
            Key::J => Some(Step::Next),
            Key::K => Some(Step::Previous),
            Key::Space if press.shift => Some(Step::Previous),
            Key::Space => Some(Step::Next),
            Key::A => Some(Step::Decide(Decision::Accepted)),
            Key::R => Some(Step::Decide(Decision::Rejected)),
            Key::U => Some(Step::Decide(Decision::Unsure)),
            _ => None,
        }
    }

    /// The selected finding's buttons and note, and how far the review is. Returns the step a
    /// button asked for, and a failure to save, if any.
    pub fn ui(
        &mut self,
        ui: &mut Ui,
        selected: Option<Row>,
        count: usize,
    ) -> (Option<Step>, Option<String>) {
        let mut step = None;
        let mut problem = None;
        if let Some(review) = &self.review {
            let of = |d| {
                review
                    .findings
                    .iter()
                    .filter(|f| f.decision == Some(d))
                    .count()
            };
            ui.label(format!(
                "Reviewed {} of {count}: {} accepted, {} rejected, {} unsure. Keys: J/K or Space/Shift+Space next/previous, A/R/U decide.",
                review.findings.iter().filter(|f| f.decision.is_some()).count(),
                of(Decision::Accepted),
                of(Decision::Rejected),
                of(Decision::Unsure),
            ));
        }
        let Some(row) = selected else {
            return (None, problem);
        };
        let mut remove = None;
        ui.horizontal(|ui| {
            ui.label(match row {
                Row::Detection(i) => format!("Finding {}:", i + 1),
                Row::Added(k) => format!("Reader finding {}:", k + 1),
            });
            for (decision, label) in [
                (Decision::Accepted, "Accept (A)"),
                (Decision::Rejected, "Reject (R)"),
                (Decision::Unsure, "Unsure (U)"),
            ] {
                let current = self.decision_of(row) == Some(decision);
                if ui.selectable_label(current, label).clicked() {
                    step = Some(Step::Decide(decision));
                }
            }
            if let Row::Added(k) = row
                && ui.button("Remove").clicked()
            {
                remove = Some(k);
            }
        });
        if let Some(k) = remove {
            if let Some(review) = self.review.as_mut().filter(|r| k < r.added.len()) {
                review.added.remove(k);
            }
            self.note_for = None;
            return (None, self.save().err().or(problem));
        }
        if self.note_for != Some(row) {
            self.note_for = Some(row);
            self.note = self.note_of(row).to_string();
        }
        let note = ui.add(egui::TextEdit::singleline(&mut self.note).hint_text("Note"));
        if note.lost_focus()
            && let Err(e) = self.set_note(row)
        {
            problem = Some(e);
        }
        (step, problem)
    }

    /// The decision on a row: a detection's, or a reader's finding's (accepted when drawn).
    pub fn decision_of(&self, row: Row) -> Option<Decision> {
        match row {
            Row::Detection(i) => self.decision(i),
            Row::Added(k) => Some(self.review.as_ref()?.added.get(k)?.decision()),
        }
    }

    fn note_of(&self, row: Row) -> &str {
        let Some(review) = &self.review else {
            return "";
        };
        match row {
            Row::Detection(i) => review.of(i).map_or("", |f| &f.note),
            Row::Added(k) => review.added.get(k).map_or("", |a| &a.note),
        }
    }

    /// Sets (or clears) the reader's category on their finding `k`, and saves the review.
    pub fn set_added_lung_rads(
        &mut self,
        k: usize,
        category: Option<tessera_core::lungrads::Category>,
    ) -> Result<(), String> {
        let Some(added) = self.review.as_mut().and_then(|r| r.added.get_mut(k)) else {
            return Ok(());
        };
        added.lung_rads = category;
        self.save()
    }

    /// Records `decision` on the reader's finding `k` and saves the review.
    pub fn decide_added(&mut self, k: usize, decision: Decision) -> Result<(), String> {
        let Some(added) = self.review.as_mut().and_then(|r| r.added.get_mut(k)) else {
            return Ok(());
        };
        added.decision = Some(decision);
        self.save()
    }

    /// Sets (or, with `None`, clears back to the suggestion) the reader's Lung-RADS category
    /// on finding `index`, and saves the review.
    pub fn set_lung_rads(
        &mut self,
        index: usize,
        category: Option<tessera_core::lungrads::Category>,
    ) -> Result<(), String> {
        self.edit(index, |f| f.lung_rads = category)
    }

    /// Keeps the reader's axes for finding `index`, and saves the review.
    pub fn set_axes(
        &mut self,
        index: usize,
        axes: tessera_core::measure::AxialAxes,
    ) -> Result<(), String> {
        self.edit(index, |f| f.axes = Some(axes))
    }

    fn set_note(&mut self, row: Row) -> Result<(), String> {
        if self.note_of(row) == self.note {
            return Ok(());
        }
        let note = self.note.clone();
        match row {
            Row::Detection(i) => self.edit(i, |f| f.note = note),
            Row::Added(k) => {
                if let Some(added) = self.review.as_mut().and_then(|r| r.added.get_mut(k)) {
                    added.note = note;
                }
                self.save()
            }
        }
    }

    /// Changes the reader's record of finding `index` (made, undecided, when there is none),
    /// stamped now, and saves the review.
    fn edit(
        &mut self,
        index: usize,
        change: impl FnOnce(&mut tessera_core::review::FindingReview),
    ) -> Result<(), String> {
        let Some(review) = &mut self.review else {
            return Ok(());
        };
        let decision = review.of(index).and_then(|f| f.decision);
        review.decide(index, decision, &tessera_core::sr::now_dt());
        if let Some(f) = review.findings.iter_mut().find(|f| f.index == index) {
            change(f);
        }
        self.save()
    }
}

/// The reader's name (kept in the settings, stamped on decisions, reviews and SRs); returns a
/// failure to save the settings, if any.
pub fn reader_ui(ui: &mut Ui, profile: &mut Profile) -> Option<String> {
    ui.horizontal(|ui| {
        ui.label("Reader");
        let name = ui.add(
            egui::TextEdit::singleline(&mut profile.settings.reader)
                .hint_text("Family^Given")
                .desired_width(160.0),
        );
        name.lost_focus()
            .then(|| profile.save_settings().err())
            .flatten()
            .map(|e| format!("{e:#}"))
    })
    .inner
}

/// The label and colour of a decision in the table.
pub fn decision_label(decision: Option<Decision>) -> (&'static str, egui::Color32) {
    match decision {
        Some(Decision::Accepted) => ("accepted", egui::Color32::from_rgb(80, 200, 120)),
        Some(Decision::Rejected) => ("rejected", egui::Color32::from_rgb(230, 90, 90)),
        Some(Decision::Unsure) => ("unsure", egui::Color32::from_rgb(230, 190, 80)),
        None => ("", egui::Color32::GRAY),
    }
}
