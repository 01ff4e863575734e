//! A real Orthanc PACS with its DICOMweb plugin, started on loopback on a free port with its
//! own temporary storage, and stopped when dropped.

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tessera_pacs::{Auth, Server};

/// The Debian package's DICOMweb plugin.
const PLUGIN: &str = "/usr/share/orthanc/plugins/libOrthancDicomWeb.so";
/// Orthanc answers within a second or two here; a minute means it is not coming up.
const START_TIMEOUT: Duration = Duration::from_secs(60);
pub const USER: &str = "tessera";
pub const PASSWORD: &str = "loopback-only";

#[derive(Debug)]
pub struct Orthanc {
    child: Child,
    pub port: u16,
    _storage: tempfile::TempDir,
}

impl Orthanc {
    /// Starts Orthanc, or `None` (after saying why) outside CI when it is not installed.
    ///
    /// # Panics
    /// When it is installed but does not start, and in CI when it is missing.
    pub fn start() -> Option<Self> {
        let binary = crate::tool("Orthanc", "orthanc")?;
        if !std::path::Path::new(PLUGIN).is_file() {
            let message = format!("{PLUGIN} not found (Debian package orthanc-dicomweb)");
            if std::env::var_os("CI").is_some() {
                panic!("{message}; CI's test command installs it");
            }
            eprintln!("SKIPPED: {message}");
            return None;
        }
        let storage = tempfile::tempdir().unwrap_or_else(|e| panic!("temporary storage: {e}"));
        let port = free_port();
        let config = serde_json::json!({
            "Name": "tessera-test",
            "StorageDirectory": storage.path().join("db"),
            "IndexDirectory": storage.path().join("db"),
            "HttpPort": port,
            "DicomServerEnabled": false,
            "RemoteAccessAllowed": false,
            "AuthenticationEnabled": true,
            "RegisteredUsers": { USER: PASSWORD },
            "Plugins": [PLUGIN],
            "DicomWeb": { "Enable": true, "Root": "/dicom-web/" }
        });
        let config_path: PathBuf = storage.path().join("orthanc.json");
        std::fs::write(&config_path, config.to_string())
            .unwrap_or_else(|e| panic!("writing {}: {e}", config_path.display()));
        let log = std::fs::File::create(storage.path().join("orthanc.log"))
            .unwrap_or_else(|e| panic!("orthanc.log: {e}"));
        let child = Command::new(binary)
            .arg(&config_path)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("starting Orthanc: {e}"));
        let orthanc = Self {
            child,
            port,
            _storage: storage,
        };
        let started = Instant::now();
        while orthanc.rest("GET", "/system", "").0 != 200 {
            if started.elapsed() > START_TIMEOUT {
                panic!("Orthanc did not answer on port {port} within {START_TIMEOUT:?}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Some(orthanc)
    }

    /// A client for its DICOMweb root, with its credentials.
    pub fn server(&self) -> Server {
        Server::new(&self.dicomweb_url(), Some(auth()))
            .unwrap_or_else(|e| panic!("a loopback URL: {e}"))
    }

    /// The DICOMweb root.
    pub fn dicomweb_url(&self) -> String {
        format!("http://127.0.0.1:{}/dicom-web", self.port)
    }

    /// One request to Orthanc's own REST API: status and body (status 0: no connection).
    pub fn rest(&self, method: &str, path: &str, body: &str) -> (u16, String) {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return (0, String::new());
        };
        let credentials = auth().authorization();
        let request = format!(
            "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nAuthorization: {credentials}\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let mut answer = String::new();
        if stream.write_all(request.as_bytes()).is_err()
            || stream.read_to_string(&mut answer).is_err()
        {
            return (0, String::new());
        }
        let status = answer
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let body = answer
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())
            .unwrap_or_default();
        (status, body)
    }
}

impl Drop for Orthanc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The test server's credentials.
pub fn auth() -> Auth {
    Auth::Basic {
        user: USER.into(),
        password: PASSWORD.into(),
    }
}

/// A port nothing listens on now (the OS picks it; a race with another process is unlikely
/// and shows as Orthanc failing to start).
pub fn free_port() -> u16 {
    TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("no free port: {e}"))
}
