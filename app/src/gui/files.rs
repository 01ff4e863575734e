//! File dialogs, and a typed path where none can open: on a desktop without an
//! xdg-desktop-portal service rfd's dialog returns at once with nothing, which looked like a
//! menu item that did nothing at all.

use std::path::PathBuf;
use std::time::Instant;

use tessera_core::sr::Selection;

use super::{Source, TesseraApp, review};

/// What a path is asked for: each job finishes the same way from a dialog or a typed path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathJob {
    OpenFolder,
    OpenFile,
    OpenSr,
    OpenBatch,
    ExportJson,
    ExportCsv,
    ExportSr(Selection),
    SavePng,
}

enum Pick {
    File,
    Folder,
    Save,
}

impl PathJob {
    fn title(self) -> &'static str {
        match self {
            Self::OpenFolder => "Open folder",
            Self::OpenFile => "Open file",
            Self::OpenSr => "Open SR",
            Self::OpenBatch => "Open batch results",
            Self::ExportJson => "Export detections JSON",
            Self::ExportCsv => "Export LUNA16 CSV",
            Self::ExportSr(_) => "Export SR",
            Self::SavePng => "Save layout as PNG",
        }
    }

    fn dialog(self) -> (rfd::FileDialog, Pick) {
        let save = |filter: &str, ext: &str, name: &str| {
            rfd::FileDialog::new()
                .add_filter(filter, &[ext])
                .set_file_name(name)
        };
        match self {
            Self::OpenFolder | Self::OpenBatch => (rfd::FileDialog::new(), Pick::Folder),
            Self::OpenFile | Self::OpenSr => (rfd::FileDialog::new(), Pick::File),
            Self::ExportJson => (save("JSON", "json", "det.json"), Pick::Save),
            Self::ExportCsv => (save("CSV", "csv", "det.csv"), Pick::Save),
            Self::ExportSr(_) => (save("DICOM", "dcm", "tessera-sr.dcm"), Pick::Save),
            Self::SavePng => (save("PNG", "png", "tessera.png"), Pick::Save),
        }
    }
}

/// A path being typed because no dialog could open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathPrompt {
    pub job: PathJob,
    pub text: String,
}

/// A dialog that came back empty sooner than this never showed: nobody cancels that fast.
const NO_DIALOG_MS: u128 = 300;

impl TesseraApp {
    /// Asks for the path `job` needs: a file dialog, or (when none can open, or
    /// `file_dialogs` is off) a path field.
    pub(super) fn ask_path(&mut self, job: PathJob) {
        if !self.file_dialogs {
            self.path_prompt = Some(PathPrompt {
                job,
                text: String::new(),
            });
            return;
        }
        let (dialog, pick) = job.dialog();
        let started = Instant::now();
        let chosen = match pick {
            Pick::File => dialog.pick_file(),
            Pick::Folder => dialog.pick_folder(),
            Pick::Save => dialog.save_file(),
        };
        match chosen {
            Some(path) => self.finish_path(job, path),
            None if started.elapsed().as_millis() < NO_DIALOG_MS => {
                self.error(format!(
                    "{}: no file dialog could open on this desktop (is an xdg-desktop-portal service running?); type the path in the window that opened instead",
                    job.title()
                ));
                self.path_prompt = Some(PathPrompt {
                    job,
                    text: String::new(),
                });
            }
            None => {} // the reader cancelled
        }
    }

    /// Does what `job` was asked for with `path`.
    pub(super) fn finish_path(&mut self, job: PathJob, path: PathBuf) {
        match job {
            PathJob::OpenFolder | PathJob::OpenFile => self.open(Source::Path(path), None),
            PathJob::OpenSr => self.import_sr(&path),
            PathJob::OpenBatch => {
                if let Err(e) = self.batch.load(path) {
                    self.error(format!("{e:#}"));
                }
            }
            PathJob::ExportJson => self.export(review::ExportKind::Json, &path),
            PathJob::ExportCsv => self.export(review::ExportKind::Csv, &path),
            PathJob::ExportSr(selection) => match self.export_sr(selection, &path) {
                Ok(count) => self.info(format!("saved {} ({count} finding(s))", path.display())),
                Err(e) => self.error(format!("{e:#}")),
            },
            PathJob::SavePng => self.save_png(path),
        }
    }

    /// The path field, while one is asked for.
    pub(super) fn path_prompt_ui(&mut self, ctx: &egui::Context) {
        let Some(prompt) = &mut self.path_prompt else {
            return;
        };
        let mut done = None;
        egui::Window::new(prompt.job.title())
            .collapsible(false)
            .show(ctx, |ui| {
                ui.label("Path:");
                let field = ui.add(
                    egui::TextEdit::singleline(&mut prompt.text)
                        .hint_text("/path/to/file or folder")
                        .desired_width(360.0),
                );
                let entered = field.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
                ui.horizontal(|ui| {
                    if ui.button("OK").clicked() || entered {
                        done = Some(true);
                    }
                    if ui.button("Cancel").clicked() {
                        done = Some(false);
                    }
                });
            });
        match done {
            Some(true) if !prompt.text.trim().is_empty() => {
                let job = prompt.job;
                let path = PathBuf::from(prompt.text.trim());
                self.path_prompt = None;
                self.finish_path(job, path);
            }
            Some(false) => self.path_prompt = None,
            _ => {}
        }
    }
}
