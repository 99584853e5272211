//! TLS for `serve`: a certificate chain and its private key from PEM files, with rustls.
//!
//! The files are looked at on every handshake and read again when either changed (its
//! inode, length or modification time), as exporter-toolkit does: a rotated Kubernetes Secret
//! (whose files are symlinks swapped at once) or a renewed certificate takes effect without a
//! restart. A pair that fails to load is reported once and the previous pair stays in use.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio_rustls::rustls::crypto::{ring, CryptoProvider};
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::{ClientHello, ResolvesServerCert};
use tokio_rustls::rustls::sign::CertifiedKey;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::TlsAcceptor;

/// The PEM files of `--cert-file` and `--key-file`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain, leaf first.
    pub cert_file: PathBuf,
    /// The private key (PKCS #8, PKCS #1 or SEC1).
    pub key_file: PathBuf,
}

/// Why TLS cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file cannot be read or holds nothing usable.
    #[error("{}: {reason}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// rustls refused the pair (e.g. the key does not match the certificate).
    #[error("{}, {}: {source}", cert_file.display(), key_file.display())]
    Config {
        /// The certificate file.
        cert_file: PathBuf,
        /// The key file.
        key_file: PathBuf,
        /// What rustls said.
        #[source]
        source: tokio_rustls::rustls::Error,
    },
}

fn file_error(path: &Path, reason: impl ToString) -> TlsError {
    TlsError::File {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}

/// What identifies one version of a file: a change to any part means it must be read again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FileStamp {
    device: u64,
    inode: u64,
    len: u64,
    modified_ns: i64,
}

impl FileStamp {
    fn of(path: &Path) -> Option<Self> {
        let metadata = std::fs::metadata(path).ok()?;
        Some(Self {
            device: metadata.dev(),
            inode: metadata.ino(),
            len: metadata.len(),
            modified_ns: metadata
                .mtime()
                .saturating_mul(1_000_000_000)
                .saturating_add(metadata.mtime_nsec()),
        })
    }
}

/// Both files' stamps (`None` for one that cannot be looked at).
type PairStamp = [Option<FileStamp>; 2];

#[derive(Debug)]
struct Loaded {
    /// The files' stamps when they were last read, whether or not that read worked.
    read_at: PairStamp,
    /// The pair served.
    key: Arc<CertifiedKey>,
}

/// The certificate of every handshake: the last pair that loaded, re-read when the files
/// change.
#[derive(Debug)]
struct ReloadingCertificate {
    files: TlsFiles,
    provider: Arc<CryptoProvider>,
    loaded: Mutex<Loaded>,
}

impl ReloadingCertificate {
    fn stamp(&self) -> PairStamp {
        [
            FileStamp::of(&self.files.cert_file),
            FileStamp::of(&self.files.key_file),
        ]
    }
}

impl ResolvesServerCert for ReloadingCertificate {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let stamp = self.stamp();
        let mut loaded = self
            .loaded
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if loaded.read_at != stamp {
            loaded.read_at = stamp;
            match self.files.certified_key(&self.provider) {
                Ok(key) => {
                    log::info!("{}: certificate read again", self.files.cert_file.display());
                    loaded.key = Arc::new(key);
                }
                Err(error) => log::warn!("{error}; serving the previous certificate"),
            }
        }
        Some(Arc::clone(&loaded.key))
    }
}

impl TlsFiles {
    /// The pair in the files now.
    fn certified_key(&self, provider: &CryptoProvider) -> Result<CertifiedKey, TlsError> {
        let certificates = CertificateDer::pem_file_iter(&self.cert_file)
            .map_err(|e| file_error(&self.cert_file, e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| file_error(&self.cert_file, e))?;
        if certificates.is_empty() {
            return Err(file_error(&self.cert_file, "no certificate in it"));
        }
        let key = PrivateKeyDer::from_pem_file(&self.key_file)
            .map_err(|e| file_error(&self.key_file, e))?;
        CertifiedKey::from_der(certificates, key, provider).map_err(|source| TlsError::Config {
            cert_file: self.cert_file.clone(),
            key_file: self.key_file.clone(),
            source,
        })
    }

    /// An acceptor serving the certificate with its key, over HTTP/1.1, and the files'
    /// next versions once they change.
    ///
    /// # Errors
    ///
    /// [`TlsError`] when a file cannot be read or parsed, or the pair is refused.
    pub fn acceptor(&self) -> Result<TlsAcceptor, TlsError> {
        let provider = Arc::new(ring::default_provider());
        let certificate = ReloadingCertificate {
            files: self.clone(),
            provider: Arc::clone(&provider),
            loaded: Mutex::new(Loaded {
                read_at: [
                    FileStamp::of(&self.cert_file),
                    FileStamp::of(&self.key_file),
                ],
                key: Arc::new(self.certified_key(&provider)?),
            }),
        };
        let config_error = |source| TlsError::Config {
            cert_file: self.cert_file.clone(),
            key_file: self.key_file.clone(),
            source,
        };
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(config_error)?
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(certificate));
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(TlsAcceptor::from(Arc::new(config)))
    }
}
