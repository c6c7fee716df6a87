//! TLS to a Docker engine as Docker's own client speaks it: the engine's
//! certificate must chain to the `ca.pem` given, and to nothing else (not
//! the system's public authorities), and this client shows `cert.pem` with
//! `key.pem`.

use std::path::Path;
use std::sync::Arc;

use bollard::{BollardRequest, Docker};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// A client of the engine at `address` (`HOST:PORT`) that trusts `certs`'s
/// `ca.pem` alone and shows its `cert.pem` and `key.pem`; a request gives up
/// after `timeout_seconds`.
pub(crate) fn client(address: &str, certs: &Path, timeout_seconds: u64) -> Result<Docker, String> {
    let config = client_config(certs)?;
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_only()
        .enable_http1()
        .build();
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .pool_max_idle_per_host(0)
        .build(https);
    let transport = move |request: BollardRequest| {
        let client = client.clone();
        async move {
            client
                .request(request)
                .await
                .map_err(|err| bollard::errors::Error::HyperLegacyError { err })
        }
    };
    Docker::connect_with_custom_transport(
        transport,
        Some(format!("https://{address}")),
        timeout_seconds,
        bollard::API_DEFAULT_VERSION,
    )
    .map_err(|e| e.to_string())
}

/// Certificate files are small: more than this is not one.
const MAX_PEM_BYTES: u64 = 1 << 20;

/// A PEM file's bytes: a regular file (never a fifo that would block) of at
/// most [`MAX_PEM_BYTES`].
fn read_pem(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut bytes = Vec::new();
    file.take(MAX_PEM_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_PEM_BYTES {
        return Err(std::io::Error::other("larger than 1 MiB"));
    }
    Ok(bytes)
}

/// The TLS settings: `ca.pem`'s certificates the only roots.
pub(crate) fn client_config(certs: &Path) -> Result<rustls::ClientConfig, String> {
    let read = |name: &str| {
        let path = certs.join(name);
        read_pem(&path).map_err(|e| format!("{}: {e}", path.display()))
    };
    let bad =
        |name: &str, e: &dyn std::fmt::Display| format!("{}: {e}", certs.join(name).display());
    let roots = roots(&read("ca.pem")?).map_err(|e| bad("ca.pem", &e))?;
    let chain = CertificateDer::pem_slice_iter(&read("cert.pem")?)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad("cert.pem", &e))?;
    if chain.is_empty() {
        return Err(bad("cert.pem", &"holds no certificate"));
    }
    let key = PrivateKeyDer::from_pem_slice(&read("key.pem")?).map_err(|e| bad("key.pem", &e))?;
    rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(roots)
    .with_client_auth_cert(chain, key)
    .map_err(|e| format!("{}: {e}", certs.display()))
}

/// The authorities to trust: the certificates of `ca_pem`, and nothing
/// else.
fn roots(ca_pem: &[u8]) -> Result<rustls::RootCertStore, String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem) {
        roots
            .add(cert.map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    }
    if roots.is_empty() {
        return Err("holds no certificate".into());
    }
    Ok(roots)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed authority made for this test (no key kept).
    const AUTHORITY: &str = "-----BEGIN CERTIFICATE-----
MIIBkzCCATmgAwIBAgIUDpYyWCJecs3s6anEmVJrDi/PYscwCgYIKoZIzj0EAwIw
HjEcMBoGA1UEAwwTdW5pdCB0ZXN0IGF1dGhvcml0eTAgFw0yNjEyMDYyMDA2MDVa
GA8yMTI2MTExMjIwMDYwNVowHjEcMBoGA1UEAwwTdW5pdCB0ZXN0IGF1dGhvcml0
eTBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABD69r4psjwEyvwELZtZsra2oyeuh
6tGbF+/u60MYORzmpBbAtPru4eU2G2iRO9/Vd+DSb5FI0yjL4156ss/21kujUzBR
MB0GA1UdDgQWBBQTQCfxwKzl76CQHrvLoWz49BuFqDAfBgNVHSMEGDAWgBQTQCfx
wKzl76CQHrvLoWz49BuFqDAPBgNVHRMBAf8EBTADAQH/MAoGCCqGSM49BAMCA0gA
MEUCIFZTtC6qCtMWXSjk+Q/uncEhPTfdvpkJLmYg0EQ42pCtAiEA460eGDKBFXNT
fgMeUZdTExbGDUiN2p2wFwVbU8OGdrE=
-----END CERTIFICATE-----\n";

    #[test]
    fn the_only_authority_trusted_is_the_one_in_ca_pem() {
        let trusted = roots(AUTHORITY.as_bytes()).expect("one authority");
        assert_eq!(trusted.len(), 1, "the system's authorities crept in");
        let twice = format!("{AUTHORITY}{AUTHORITY}");
        assert_eq!(roots(twice.as_bytes()).expect("two").len(), 2);
    }

    #[test]
    fn a_ca_pem_without_a_certificate_is_refused() {
        assert!(roots(b"").is_err());
        assert!(roots(b"not a certificate").is_err());
        let folder = tempfile::tempdir().expect("tempdir");
        let error = client_config(folder.path()).expect_err("no files");
        assert!(error.contains("ca.pem"), "{error}");
    }

    #[test]
    fn a_fifo_or_an_oversized_file_is_refused_without_waiting() {
        let folder = tempfile::tempdir().expect("tempdir");
        let fifo = folder.path().join("ca.pem");
        rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, rustix::fs::Mode::RUSR).expect("mkfifo");
        let error = client_config(folder.path()).expect_err("a fifo");
        assert!(error.contains("ca.pem: not a regular file"), "{error}");
        std::fs::remove_file(&fifo).expect("rm");
        std::fs::write(&fifo, vec![b'-'; (MAX_PEM_BYTES + 1) as usize]).expect("write");
        let error = client_config(folder.path()).expect_err("too large");
        assert!(error.contains("larger than 1 MiB"), "{error}");
    }
}
