//! The user's settings (`settings.json` in the user's config folder) and where the viewer keeps
//! reviews (the user's data folder): small files, written atomically.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

/// What the viewer remembers between sessions. PACS credentials may be put here by hand
/// (the file is kept readable by its owner only); the environment's take precedence
/// (`TESSERA_PACS_TOKEN`, `TESSERA_PACS_USER`/`TESSERA_PACS_PASSWORD`).
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settings {
    /// The reader's name as DICOM PN (`Family^Given`), stamped on reviews and SRs.
    #[serde(default)]
    pub reader: String,
    /// The PACS's DICOMweb root.
    #[serde(default)]
    pub pacs_url: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pacs_user: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pacs_password: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pacs_token: String,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("reader", &self.reader)
            .field("pacs_url", &self.pacs_url)
            .field("pacs_user", &self.pacs_user)
            .finish_non_exhaustive()
    }
}

impl Settings {
    /// The PACS credentials: the environment's, else these settings', else none.
    pub fn pacs_auth(&self) -> anyhow::Result<Option<tessera_pacs::Auth>> {
        use tessera_pacs::Auth;
        if let Some(auth) = Auth::from_env()? {
            return Ok(Some(auth));
        }
        Ok(if !self.pacs_token.is_empty() {
            Some(Auth::Bearer(self.pacs_token.clone()))
        } else if !self.pacs_user.is_empty() {
            Some(Auth::Basic {
                user: self.pacs_user.clone(),
                password: self.pacs_password.clone(),
            })
        } else {
            None
        })
    }

    /// A client for the configured PACS.
    pub fn pacs_server(&self) -> anyhow::Result<tessera_pacs::Server> {
        if self.pacs_url.trim().is_empty() {
            anyhow::bail!(
                "no PACS URL: set the server's DICOMweb root (e.g. http://localhost:8042/dicom-web)"
            );
        }
        Ok(tessera_pacs::Server::new(
            &self.pacs_url,
            self.pacs_auth()?,
        )?)
    }
}

/// The user's settings and where their files live: what the viewer's panels read and save.
#[derive(Debug, Clone, Default)]
pub struct Profile {
    pub settings: Settings,
    pub places: Places,
}

impl Profile {
    /// The settings kept in `places`; a broken settings file is reported (and the defaults
    /// used), not fatal.
    pub fn load(places: Places) -> (Self, Option<String>) {
        let (settings, problem) = match places.load_settings() {
            Ok(s) => (s, None),
            Err(e) => (Settings::default(), Some(format!("{e:#}"))),
        };
        (Self { settings, places }, problem)
    }

    /// Saves the settings where they are kept.
    pub fn save_settings(&self) -> anyhow::Result<()> {
        self.places.save_settings(&self.settings)
    }
}

/// Where the viewer's files live; `None` folders keep nothing (tests, or no home folder).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Places {
    pub settings: Option<PathBuf>,
    pub reviews: Option<PathBuf>,
    /// Studies retrieved from a PACS, one folder per study and series.
    pub retrieved: PathBuf,
    /// The user's own models (e.g. a converted MONAI bundle), one folder with a `model.json`
    /// each: the viewer lists them after the shipped ones.
    pub models: Option<PathBuf>,
}

impl Places {
    /// `$XDG_CONFIG_HOME/tessera/settings.json`, `$XDG_DATA_HOME/tessera/reviews/` and
    /// `$XDG_DATA_HOME/tessera/models/` (defaults `~/.config`, `~/.local/share`).
    pub fn user() -> Self {
        let var = tessera_dicom::places::env_path;
        let config = var("XDG_CONFIG_HOME").or_else(|| var("HOME").map(|h| h.join(".config")));
        let data = tessera_dicom::places::user_data_dir();
        Self {
            settings: config.map(|c| c.join("tessera/settings.json")),
            reviews: data.as_ref().map(|d| d.join("reviews")),
            retrieved: super::demo::cache_root().join("pacs"),
            models: data.map(|d| d.join("models")),
        }
    }

    /// All under `dir` (tests).
    pub fn under(dir: &Path) -> Self {
        Self {
            settings: Some(dir.join("settings.json")),
            reviews: Some(dir.join("reviews")),
            retrieved: dir.join("pacs"),
            models: Some(dir.join("models")),
        }
    }

    /// The models a run can choose from: the shipped ones, then the user's models folder's
    /// (each folder there with a `model.json`), each group sorted by name.
    pub fn installed_models(&self) -> Vec<PathBuf> {
        let mut found = tessera_plan::model::shipped_model_dirs().unwrap_or_default();
        if let Some(Ok(entries)) = self.models.as_ref().map(std::fs::read_dir) {
            let mut own: Vec<PathBuf> = entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.join("model.json").is_file())
                .collect();
            own.sort();
            found.extend(own);
        }
        found
    }

    /// The settings, or the defaults when there is no file yet.
    pub fn load_settings(&self) -> anyhow::Result<Settings> {
        let Some(path) = &self.settings else {
            return Ok(Settings::default());
        };
        match tessera_dicom::io::read_regular_file(path) {
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
        write_json(path, settings)?;
        // It may hold PACS credentials.
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .with_context(|| format!("restricting {}", path.display()))
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
    tessera_dicom::io::write_atomic(path, &bytes)
        .with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_round_trip_and_default_when_absent() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let places = Places::under(dir.path());
        assert_eq!(places.load_settings()?, Settings::default());
        let settings = Settings {
            reader: "Doe^Jane".into(),
            pacs_url: "http://localhost:8042/dicom-web".into(),
            ..Settings::default()
        };
        places.save_settings(&settings)?;
        assert_eq!(places.load_settings()?, settings);
        assert_eq!(Places::default().load_settings()?, Settings::default());
        Ok(())
    }

    #[test]
    fn a_users_models_follow_the_shipped_ones_and_folders_without_a_card_are_not_listed()
    -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let places = Places::under(dir.path());
        let shipped = tessera_plan::model::shipped_model_dirs()?;
        assert_eq!(places.installed_models(), shipped, "no models folder yet");
        let own = dir.path().join("models");
        for name in ["monai-lung-nodule", "a-converted-bundle", "not-a-model"] {
            std::fs::create_dir_all(own.join(name))?;
        }
        for name in ["monai-lung-nodule", "a-converted-bundle"] {
            std::fs::write(own.join(name).join("model.json"), "{}")?;
        }
        let listed = places.installed_models();
        assert_eq!(listed[..shipped.len()], shipped[..]);
        assert_eq!(
            listed[shipped.len()..],
            [
                own.join("a-converted-bundle"),
                own.join("monai-lung-nodule")
            ]
        );
        Ok(())
    }
}
