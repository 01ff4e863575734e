//! The user's settings (`settings.json` in the user's config folder) and where the viewer keeps
//! reviews (the user's data folder): small files, written atomically.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

/// What the viewer remembers between sessions. Credentials are not kept here: the PACS
/// client reads them from the environment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settings {
    /// The reader's name as DICOM PN (`Family^Given`), stamped on reviews and SRs.
    #[serde(default)]
    pub reader: String,
    /// The PACS's DICOMweb root.
    #[serde(default)]
    pub pacs_url: String,
}

/// Where the viewer's files live; `None` folders keep nothing (tests, or no home folder).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Places {
    pub settings: Option<PathBuf>,
    pub reviews: Option<PathBuf>,
}

impl Places {
    /// `$XDG_CONFIG_HOME/tessera/settings.json` and `$XDG_DATA_HOME/tessera/reviews/`
    /// (defaults `~/.config`, `~/.local/share`).
    pub fn user() -> Self {
        let var = |name: &str| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let home = var("HOME");
        let config = var("XDG_CONFIG_HOME").or_else(|| home.as_ref().map(|h| h.join(".config")));
        let data = var("XDG_DATA_HOME").or_else(|| home.as_ref().map(|h| h.join(".local/share")));
        Self {
            settings: config.map(|c| c.join("tessera/settings.json")),
            reviews: data.map(|d| d.join("tessera/reviews")),
        }
    }

    /// Both under `dir` (tests).
    pub fn under(dir: &Path) -> Self {
        Self {
            settings: Some(dir.join("settings.json")),
            reviews: Some(dir.join("reviews")),
        }
    }

    /// The settings, or the defaults when there is no file yet.
    pub fn load_settings(&self) -> anyhow::Result<Settings> {
        let Some(path) = &self.settings else {
            return Ok(Settings::default());
        };
        match tessera_core::io::read_regular_file(path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .with_context(|| format!("{} is not a Tessera settings file", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Settings::default()),
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }

    pub fn save_settings(&self, settings: &Settings) -> anyhow::Result<()> {
        let Some(path) = &self.settings else {
            return Ok(());
        };
        write_json(path, settings)
    }

    /// Where the review of run `run_id` is kept.
    pub fn review_path(&self, run_id: &str) -> Option<PathBuf> {
        self.reviews
            .as_ref()
            .map(|d| d.join(format!("{run_id}.json")))
    }
}

fn write_json(path: &Path, value: &impl Serialize) -> anyhow::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    let mut bytes = serde_json::to_vec_pretty(value)?;
    bytes.push(b'\n');
    tessera_core::io::write_atomic(path, &bytes)
        .with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_round_trip_and_default_when_absent() {
        let dir = tempfile::tempdir().unwrap(); // ok: test code
        let places = Places::under(dir.path());
        assert_eq!(places.load_settings().unwrap(), Settings::default()); // ok: test code
        let settings = Settings {
            reader: "Doe^Jane".into(),
            pacs_url: "http://localhost:8042/dicom-web".into(),
        };
        places.save_settings(&settings).unwrap(); // ok: test code
        assert_eq!(places.load_settings().unwrap(), settings); // ok: test code
        assert_eq!(
            Places::default().load_settings().unwrap(),
            Settings::default()
        ); // ok: test code
    }
}
