//! A PACS client over DICOMweb: find studies and series (QIDO-RS), retrieve a series into a
//! folder (WADO-RS), store files (STOW-RS).
//!
//! HTTPS checks the server against the system's roots. Credentials come from the environment
//! or the viewer's settings file ([`Auth::from_env`]), never from the command line, and are
//! never printed: [`Server`]'s `Debug` hides them. A retrieval is written as a set: into a
//! temporary folder beside the target, renamed into place only when every part arrived.
//!
//! ```no_run
//! use tessera_pacs::{Auth, Server, StudyQuery};
//!
//! let server = Server::new("http://localhost:8042/dicom-web", Auth::from_env()?)?;
//! for study in server.search_studies(&StudyQuery::default())? {
//!     println!("{} {} {:?}", study.study_uid, study.patient_name, study.modalities);
//! }
//! # Ok::<(), tessera_pacs::PacsError>(())
//! ```

mod multipart;
mod qido;
mod stow;
mod wado;

use std::time::Duration;

pub use qido::{SeriesRow, StudyQuery, StudyRow};
pub use stow::Stored;
pub use wado::{Progress, Retrieved};

/// Environment variables [`Auth::from_env`] reads.
pub const USER_VAR: &str = "TESSERA_PACS_USER";
pub const PASSWORD_VAR: &str = "TESSERA_PACS_PASSWORD";
pub const TOKEN_VAR: &str = "TESSERA_PACS_TOKEN";

/// How to authenticate to the server.
#[derive(Clone, PartialEq, Eq)]
pub enum Auth {
    Basic { user: String, password: String },
    Bearer(String),
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Basic { user, .. } => write!(f, "Basic({user}, password hidden)"),
            Self::Bearer(_) => write!(f, "Bearer(token hidden)"),
        }
    }
}

impl Auth {
    /// `TESSERA_PACS_TOKEN` (bearer), else `TESSERA_PACS_USER` with `TESSERA_PACS_PASSWORD`
    /// (basic), else none. A user without a password is an error, not an anonymous request.
    pub fn from_env() -> Result<Option<Self>, PacsError> {
        let var = |name| std::env::var(name).ok().filter(|v| !v.is_empty());
        if let Some(token) = var(TOKEN_VAR) {
            return Ok(Some(Self::Bearer(token)));
        }
        match (var(USER_VAR), var(PASSWORD_VAR)) {
            (Some(user), Some(password)) => Ok(Some(Self::Basic { user, password })),
            (Some(_), None) => Err(PacsError::Config(format!(
                "{USER_VAR} is set but {PASSWORD_VAR} is not"
            ))),
            _ => Ok(None),
        }
    }

    /// The `Authorization` header's value.
    pub fn authorization(&self) -> String {
        match self {
            Self::Basic { user, password } => {
                format!("Basic {}", base64(format!("{user}:{password}").as_bytes()))
            }
            Self::Bearer(token) => format!("Bearer {token}"),
        }
    }
}

/// Why a PACS request failed. Messages name the URL (never credentials) and the reason.
#[derive(Debug, thiserror::Error)]
pub enum PacsError {
    #[error("PACS settings: {0}")]
    Config(String),
    #[error("cannot reach {url}: {reason}{}", unreachable_hint(reason))]
    Unreachable { url: String, reason: String },
    #[error("{url} answered {status}{}", describe_status(*status, detail))]
    Status {
        url: String,
        status: u16,
        detail: String,
    },
    #[error("{url} sent something Tessera cannot use: {reason}")]
    Protocol { url: String, reason: String },
    #[error("study {study_uid} has no CT series (its series: {found}): Tessera detects on CT only")]
    NotCt { study_uid: String, found: String },
    #[error("no study {study_uid} on the server")]
    NoSuchStudy { study_uid: String },
    #[error("cannot write {}", path.display())]
    Write {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("refusing to retrieve into {}: {reason}", path.display())]
    Target {
        path: std::path::PathBuf,
        reason: String,
    },
    #[error("cannot read {}", path.display())]
    Read {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the server stored {stored} of {sent} file(s); it refused: {failed}")]
    StoreRefused {
        sent: usize,
        stored: usize,
        failed: String,
    },
    #[error("cancelled")]
    Cancelled,
}

fn unreachable_hint(reason: &str) -> &'static str {
    if reason.contains("certificate") {
        " (the server's certificate is not trusted by this system's roots: install its CA in the system's store, or fix the server's certificate)"
    } else {
        " (is the server running, and the URL right?)"
    }
}

fn describe_status(status: u16, detail: &str) -> String {
    let hint = match status {
        401 | 403 => {
            " (check the credentials: TESSERA_PACS_USER/TESSERA_PACS_PASSWORD or TESSERA_PACS_TOKEN)"
        }
        404 => " (not found: check the URL's DICOMweb root and the UIDs)",
        500..=599 => " (a server error: see the server's log)",
        _ => "",
    };
    let detail = detail.trim();
    if detail.is_empty() {
        hint.to_string()
    } else {
        let short: String = detail.chars().take(300).collect();
        format!("{hint}: {short}")
    }
}

/// A DICOMweb server: its base URL (the DICOMweb root, e.g. `http://host:8042/dicom-web`).
#[derive(Clone)]
pub struct Server {
    base_url: String,
    auth: Option<Auth>,
    agent: ureq::Agent,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("base_url", &self.base_url)
            .field("auth", &self.auth)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// A server at `base_url` (http or https; a trailing `/` is dropped).
    pub fn new(base_url: &str, auth: Option<Auth>) -> Result<Self, PacsError> {
        let base_url = base_url.trim().trim_end_matches('/').to_string();
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            return Err(PacsError::Config(format!(
                "'{base_url}' is not an http:// or https:// URL"
            )));
        }
        if base_url.contains('@') {
            return Err(PacsError::Config(
                "credentials in the URL are not accepted (they would be logged): use TESSERA_PACS_USER/TESSERA_PACS_PASSWORD or TESSERA_PACS_TOKEN".into(),
            ));
        }
        let tls = ureq::tls::TlsConfig::builder()
            .root_certs(ureq::tls::RootCerts::PlatformVerifier)
            .build();
        let agent = ureq::Agent::config_builder()
            .tls_config(tls)
            .http_status_as_error(false)
            .timeout_connect(Some(Duration::from_secs(10)))
            .timeout_recv_response(Some(Duration::from_secs(120)))
            .timeout_per_read(Some(Duration::from_secs(120)))
            .user_agent(concat!("tessera/", env!("CARGO_PKG_VERSION")))
            .build()
            .new_agent();
        Ok(Self {
            base_url,
            auth,
            agent,
        })
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    fn url(&self, path: &str) -> String {
        format!("{}/{}", self.base_url, path.trim_start_matches('/'))
    }

    /// GET `url` with `accept`; a non-2xx answer is an error carrying its body's start.
    fn get(&self, url: &str, accept: &str) -> Result<ureq::http::Response<ureq::Body>, PacsError> {
        let mut request = self.agent.get(url).header("Accept", accept);
        if let Some(auth) = &self.auth {
            request = request.header("Authorization", auth.authorization());
        }
        checked(url, request.call())
    }

    fn post(
        &self,
        url: &str,
        content_type: &str,
        body: &[u8],
    ) -> Result<ureq::http::Response<ureq::Body>, PacsError> {
        let mut request = self
            .agent
            .post(url)
            .header("Content-Type", content_type)
            .header("Accept", "application/dicom+json");
        if let Some(auth) = &self.auth {
            request = request.header("Authorization", auth.authorization());
        }
        checked(url, request.send(body))
    }
}

fn checked(
    url: &str,
    response: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
) -> Result<ureq::http::Response<ureq::Body>, PacsError> {
    let mut response = response.map_err(|e| PacsError::Unreachable {
        url: url.into(),
        reason: e.to_string(),
    })?;
    let status = response.status().as_u16();
    if (200..300).contains(&status) {
        return Ok(response);
    }
    let detail = response
        .body_mut()
        .with_config()
        .limit(4096)
        .read_to_string()
        .unwrap_or_default();
    Err(PacsError::Status {
        url: url.into(),
        status,
        detail,
    })
}

/// Standard base64 (RFC 4648) for the basic-auth header.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc_4648() {
        for (input, expected) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foobar", "Zm9vYmFy"),
            ("user:päss", "dXNlcjpww6Rzcw=="),
        ] {
            assert_eq!(base64(input.as_bytes()), expected, "{input}");
        }
    }

    #[test]
    fn credentials_never_show() {
        let auth = Auth::Basic {
            user: "reader".into(),
            password: "s3cret".into(),
        };
        let server = Server::new("https://pacs.example/dicom-web/", Some(auth))
            .unwrap_or_else(|e| unreachable!("a valid URL: {e}"));
        let shown = format!("{server:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert_eq!(
            server.url("/studies"),
            "https://pacs.example/dicom-web/studies"
        );
        let refused = Server::new("https://reader:s3cret@pacs.example", None).unwrap_err();
        assert!(!refused.to_string().contains("s3cret"), "{refused}");
        assert!(Server::new("ftp://pacs", None).is_err());
    }
}
