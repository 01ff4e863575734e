//! An HTTPS server on loopback with a certificate no system trusts (self-signed, made by
//! `openssl` for the test), for checking that the PACS client refuses it.

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};

/// Python's standard HTTPS server: enough to answer a TLS handshake.
const SERVER: &str = r#"
import http.server, ssl, sys
srv = http.server.HTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
print(srv.server_address[1], flush=True)
srv.serve_forever()
"#;

#[derive(Debug)]
pub struct UntrustedHttps {
    child: Child,
    pub port: u16,
    _dir: tempfile::TempDir,
}

impl UntrustedHttps {
    /// Starts it, or `None` (after saying why) outside CI when openssl or python3 is missing.
    ///
    /// # Panics
    /// When they are there but the server does not start, and in CI when they are missing.
    pub fn start() -> Option<Self> {
        let openssl = crate::tool("openssl", "openssl")?;
        let python = crate::tool("python3", "python3")?;
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temporary folder: {e}"));
        let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
        let made = Command::new(openssl)
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            ])
            .args([
                "-subj",
                "/CN=127.0.0.1",
                "-addext",
                "subjectAltName=IP:127.0.0.1",
            ])
            .args(["-addext", "basicConstraints=critical,CA:FALSE", "-keyout"])
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .stderr(Stdio::null())
            .status()
            .unwrap_or_else(|e| panic!("running openssl: {e}"));
        assert!(made.success(), "openssl could not make a certificate");
        let mut child = Command::new(python)
            .args(["-c", SERVER])
            .arg(&cert)
            .arg(&key)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting the HTTPS server: {e}"));
        let mut line = String::new();
        if let Some(out) = child.stdout.take() {
            let _ = BufReader::new(out).read_line(&mut line);
        }
        let port = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("the HTTPS server did not say its port: '{line}'"));
        Some(Self {
            child,
            port,
            _dir: dir,
        })
    }
}

impl Drop for UntrustedHttps {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
